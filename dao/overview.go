package dao

import (
	"context"
	"fmt"
	"time"
)

// The statements of the UI's pictures: the overview's charts (runs per hour, the load of each
// worker group, duration percentiles per workflow) and a workflow instance's timeline. Each
// reads a bounded range through an index, whatever the size of the tables: the finished
// instances of a time range through workflow_instance_ended, the queued and running tasks
// through their partial indexes, an instance's tasks through its unique (instance, name) key.

// HourRuns is how many workflow instances ended in an hour, by how they ended.
type HourRuns struct {
	// Hour is the start of the hour, in UTC.
	Hour      time.Time `db:"hour"`
	Succeeded int       `db:"succeeded"`
	Failed    int       `db:"failed"`
	Stopped   int       `db:"stopped"`
}

// runsPerHourSQL is WorkflowRunsPerHour's statement: $1 the start of the range. The range
// on ended_at with the finished states is workflow_instance_ended's.
const runsPerHourSQL = `
		SELECT date_trunc('hour', ended_at, 'UTC') AS hour,
			count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
			count(*) FILTER (WHERE state = 'failed') AS failed,
			count(*) FILTER (WHERE state = 'stopped') AS stopped
		FROM workflow_instance
		WHERE state IN ('succeeded', 'failed', 'stopped') AND ended_at >= $1
		GROUP BY 1 ORDER BY 1`

// WorkflowRunsPerHour counts the workflow instances that ended at or after since, by the
// hour (UTC) they ended in and how; the hours without any are left out.
func (q *Queries) WorkflowRunsPerHour(ctx context.Context, since time.Time) ([]HourRuns, error) {
	var out []HourRuns
	if err := sqlxSelect(ctx, q, &out, runsPerHourSQL, since); err != nil {
		return nil, fmt.Errorf("count the workflow instances ended per hour since %s: %w", since.Format(time.RFC3339), err)
	}
	for i := range out {
		out[i].Hour = out[i].Hour.UTC()
	}
	return out, nil
}

// WorkflowDurations are the percentiles of how long a workflow's instances ran (started to
// ended), in milliseconds.
type WorkflowDurations struct {
	Name string  `db:"workflow_name"`
	Runs int     `db:"runs"`
	P50  float64 `db:"p50"`
	P90  float64 `db:"p90"`
	P99  float64 `db:"p99"`
}

// durationPercentilesSQL is WorkflowDurationPercentiles' statement: $1 the start of the
// range, $2 how many workflows.
const durationPercentilesSQL = `
		SELECT workflow_name, count(*) AS runs,
			percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
			percentile_cont(0.9) WITHIN GROUP (ORDER BY ms) AS p90,
			percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
		FROM (
			SELECT workflow_name, extract(epoch FROM ended_at - started_at) * 1000 AS ms
			FROM workflow_instance
			WHERE state IN ('succeeded', 'failed', 'stopped') AND ended_at >= $1
			  AND started_at IS NOT NULL) d
		GROUP BY workflow_name ORDER BY runs DESC, workflow_name LIMIT $2`

// WorkflowDurationPercentiles returns the duration percentiles of the instances that ended
// at or after since, for the limit workflows that ran most, most first. An instance that
// never started (stopped while it waited) has no duration and is left out.
func (q *Queries) WorkflowDurationPercentiles(ctx context.Context, since time.Time, limit int) ([]WorkflowDurations, error) {
	var out []WorkflowDurations
	if err := sqlxSelect(ctx, q, &out, durationPercentilesSQL, since, limit); err != nil {
		return nil, fmt.Errorf("read the duration percentiles of workflows ended since %s: %w", since.Format(time.RFC3339), err)
	}
	return out, nil
}

// GroupLoad is a worker group's queue and its tasks running now.
type GroupLoad struct {
	Group string `db:"worker_group"`
	// Queued is how many tasks wait in the group's queue (those held back by a retry
	// interval too), counted up to the statement's cap.
	Queued  int `db:"queued"`
	Running int `db:"running"`
}

// groupLoadSQL is TaskGroupLoad's statement: $1 the cap of a queue's count, $2 how many
// groups. The groups with a queue are found by a skip scan of task_instance_queued (one index
// probe a group, however long its queue), and each queue is counted up to the cap in the
// same index; the running tasks are few (no more than the workers' slots) and read through
// task_instance_running.
const groupLoadSQL = `
		WITH RECURSIVE queued_group AS (
			(SELECT worker_group FROM task_instance WHERE state = 'queued' ORDER BY worker_group LIMIT 1)
			UNION ALL
			SELECT (SELECT t.worker_group FROM task_instance t
				WHERE t.state = 'queued' AND t.worker_group > g.worker_group ORDER BY t.worker_group LIMIT 1)
			FROM queued_group g WHERE g.worker_group IS NOT NULL
		), queued AS (
			SELECT g.worker_group, (SELECT count(*) FROM (SELECT 1 FROM task_instance t
				WHERE t.state = 'queued' AND t.worker_group = g.worker_group LIMIT $1) c) AS n
			FROM queued_group g WHERE g.worker_group IS NOT NULL LIMIT $2
		), running AS (
			SELECT worker_group, count(*) AS n FROM task_instance WHERE state = 'running' GROUP BY worker_group
		)
		SELECT worker_group, coalesce(q.n, 0) AS queued, coalesce(r.n, 0) AS running
		FROM queued q FULL JOIN running r USING (worker_group)
		ORDER BY worker_group LIMIT $2`

// TaskGroupLoad returns, for at most limit worker groups in name order, how many tasks are
// queued (counted up to queueCap: a longer queue reads as queueCap) and running in each. A
// group with neither is left out.
func (q *Queries) TaskGroupLoad(ctx context.Context, queueCap, limit int) ([]GroupLoad, error) {
	var out []GroupLoad
	if err := sqlxSelect(ctx, q, &out, groupLoadSQL, queueCap, limit); err != nil {
		return nil, fmt.Errorf("count the queued and running tasks of each worker group: %w", err)
	}
	return out, nil
}

// TimelineTask is a task instance with its attempts, for a workflow instance's timeline.
type TimelineTask struct {
	ID        int64      `db:"id"`
	Name      string     `db:"name"`
	State     TaskState  `db:"state"`
	QueuedAt  time.Time  `db:"queued_at"`
	NotBefore *time.Time `db:"not_before"`
	StartedAt *time.Time `db:"started_at"`
	EndedAt   *time.Time `db:"ended_at"`
	// Attempts are oldest first; Error is left out of them (the task page has it).
	Attempts []TaskAttempt
}

// timelineSQL is TaskTimelineOfWorkflow's statement: $1 the workflow instance, $2 how many
// tasks. The tasks come by the instance's (workflow_instance_id, name) key, the attempts by
// task_attempt's primary key.
const timelineSQL = `
		SELECT t.id, t.name, t.state, t.queued_at, t.not_before, t.started_at, t.ended_at,
			a.attempt, a.worker_id, a.started_at AS attempt_started_at, a.ended_at AS attempt_ended_at, a.outcome
		FROM (SELECT id, name, state, queued_at, not_before, started_at, ended_at FROM task_instance
			WHERE workflow_instance_id = $1 ORDER BY started_at NULLS LAST, id LIMIT $2) t
		LEFT JOIN task_attempt a ON a.task_instance_id = t.id
		ORDER BY t.started_at NULLS LAST, t.id, a.attempt`

// TaskTimelineOfWorkflow returns the first limit task instances of a workflow instance in
// the order they started (those not started last, by id), each with its attempts.
func (q *Queries) TaskTimelineOfWorkflow(ctx context.Context, id int64, limit int) ([]TimelineTask, error) {
	var rows []struct {
		ID        int64      `db:"id"`
		Name      string     `db:"name"`
		State     TaskState  `db:"state"`
		QueuedAt  time.Time  `db:"queued_at"`
		NotBefore *time.Time `db:"not_before"`
		StartedAt *time.Time `db:"started_at"`
		EndedAt   *time.Time `db:"ended_at"`
		Attempt   *int       `db:"attempt"`
		WorkerID  *string    `db:"worker_id"`
		AStarted  *time.Time `db:"attempt_started_at"`
		AEnded    *time.Time `db:"attempt_ended_at"`
		Outcome   *Outcome   `db:"outcome"`
	}
	if err := sqlxSelect(ctx, q, &rows, timelineSQL, id, limit); err != nil {
		return nil, fmt.Errorf("read the timeline of workflow instance %d: %w", id, err)
	}
	var out []TimelineTask
	for _, r := range rows {
		if len(out) == 0 || out[len(out)-1].ID != r.ID {
			out = append(out, TimelineTask{ID: r.ID, Name: r.Name, State: r.State, QueuedAt: r.QueuedAt,
				NotBefore: r.NotBefore, StartedAt: r.StartedAt, EndedAt: r.EndedAt})
		}
		if r.Attempt == nil {
			continue
		}
		t := &out[len(out)-1]
		t.Attempts = append(t.Attempts, TaskAttempt{TaskInstanceID: r.ID, Attempt: *r.Attempt, WorkerID: *r.WorkerID,
			StartedAt: *r.AStarted, EndedAt: r.AEnded, Outcome: r.Outcome})
	}
	return out, nil
}
