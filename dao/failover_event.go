package dao

import (
	"context"
	"fmt"
	"time"
)

// FailoverEvent is a row of failover_event: one per lost identity.
type FailoverEvent struct {
	ID                int64      `db:"id"`
	NodeID            string     `db:"node_id"`
	Role              string     `db:"role"`
	LostAt            time.Time  `db:"lost_at"`
	FencedAt          time.Time  `db:"fenced_at"`
	FinishedAt        *time.Time `db:"finished_at"`
	Leader            string     `db:"leader"`
	TasksRequeued     int        `db:"tasks_requeued"`
	WorkflowsReleased int        `db:"workflows_released"`
}

// WorkOwners returns the identities that PostgreSQL says own running work: workers with
// running task instances and masters owning unfinished workflow instances. The leader's sweep
// compares them with ZooKeeper to find lost nodes whose loss it never saw.
func (q *Queries) WorkOwners(ctx context.Context) (workers, masters []string, err error) {
	if err := sqlxSelect(ctx, q, &workers, `SELECT DISTINCT worker_id FROM task_instance
		WHERE state = 'running' AND worker_id IS NOT NULL`); err != nil {
		return nil, nil, fmt.Errorf("list workers owning running tasks: %w", err)
	}
	if err := sqlxSelect(ctx, q, &masters, `SELECT DISTINCT owner FROM workflow_instance
		WHERE owner IS NOT NULL AND state IN ('submitted', 'running')`); err != nil {
		return nil, nil, fmt.Errorf("list masters owning workflow instances: %w", err)
	}
	return workers, masters, nil
}

// TaskRequeueIfRunningOnWorker puts every task running on a fenced worker back in the queue: its
// attempt ends as failed_over, failover_count grows, retries do not. A task whose kill was
// requested (TaskKillIfQueuedOrRunning, WorkflowStopIfActive, a workflow's timeout) ends killed instead, as a queued
// task does when it is killed, and its master is woken to skip what follows it. It returns
// how many tasks it took off the worker, killed ones included. Idempotent: a second run finds
// nothing running on that worker. Call it only for a fenced identity.
func (q *Queries) TaskRequeueIfRunningOnWorker(ctx context.Context, worker string) (int, error) {
	var n int
	err := sqlxGet(ctx, q, &n, `
		WITH pools AS (
			-- The pools of the tasks, locked in name order before any task row, as
			-- finishManySQL locks them and for the same reason.
			SELECT p.name FROM task_pool p WHERE p.name = ANY(ARRAY(
				SELECT ti.pool FROM task_instance ti
				WHERE ti.worker_id = $1 AND ti.state = 'running' AND ti.pool IS NOT NULL))
			ORDER BY p.name
			FOR UPDATE
		), t AS (
			-- Queued, a kill-requested task would wait for ever: the claim skips it
			-- (claimSQL).
			UPDATE task_instance SET
				state = CASE WHEN kill_requested THEN 'killed' ELSE 'queued' END,
				failover_count = failover_count + 1,
				queued_at = CASE WHEN kill_requested THEN queued_at ELSE now() END,
				ended_at = CASE WHEN kill_requested THEN now() END,
				error = CASE WHEN kill_requested THEN killed_error(end_reason)
					ELSE 'failed over: worker ' || worker_id || ' was lost' END
			WHERE worker_id = $1 AND state = 'running' AND (SELECT count(*) FROM pools) >= 0
			RETURNING id, attempt, worker_group, workflow_instance_id, state
		), a AS (
			UPDATE task_attempt SET ended_at = now(), outcome = 'failed_over',
				error = 'worker lost; failed over'
			FROM t WHERE task_attempt.task_instance_id = t.id AND task_attempt.attempt = t.attempt
		), woken AS (
			SELECT pg_notify($2, g) FROM (SELECT DISTINCT worker_group AS g FROM t WHERE state = 'queued') d
		), ended AS (
			-- The masters, with the killed tasks' instances, as by a kill of a queued task.
			SELECT pg_notify($3, string_agg(id::text, ',')) FROM (
				SELECT id, (row_number() OVER (ORDER BY id) - 1) / $4 AS k FROM (
					SELECT DISTINCT workflow_instance_id AS id FROM t WHERE state = 'killed') k) c
			GROUP BY k
		)
		SELECT count(*) FROM t, (SELECT count(*) FROM woken) w, (SELECT count(*) FROM ended) e`,
		worker, q.ch.task, q.ch.master, wakeIDsPerPayload)
	if err != nil {
		return 0, fmt.Errorf("requeue tasks of lost worker %s: %w", worker, err)
	}
	return n, nil
}

// WorkflowReleaseIfOwnedBy clears the owner of every unfinished workflow instance a fenced
// master drove, so another master continues it. Idempotent. The masters are woken with the
// released ids, as by the end of a task of theirs (300 to a wake-up): whichever hears them
// locks and advances those it can at once (one whose tasks ended while its master was gone
// has waited long enough); a wake-up no master heard is made up for by their sweep.
func (q *Queries) WorkflowReleaseIfOwnedBy(ctx context.Context, master string) (int, error) {
	var n int
	err := sqlxGet(ctx, q, &n, `
		WITH w AS (
			UPDATE workflow_instance SET owner = NULL
			WHERE owner = $1 AND state IN ('submitted', 'running')
			RETURNING id
		), woken AS (
			SELECT pg_notify($2, string_agg(id::text, ',')) FROM (
				SELECT id, (row_number() OVER (ORDER BY id) - 1) / $3 AS k FROM w) c
			GROUP BY k
		)
		SELECT count(*) FROM w, (SELECT count(*) FROM woken) n`, master, q.ch.master, wakeIDsPerPayload)
	if err != nil {
		return 0, fmt.Errorf("release workflow instances of lost master %s: %w", master, err)
	}
	return n, nil
}

// FailoverEventRecord records the failover of an identity, once per identity. When a later
// leader repeats the step (its predecessor crashed before finishing the marker, or work of the
// fenced identity showed up again), the counts are added: call it in the transaction that
// requeued or released, so a repeat that found nothing adds nothing. It returns the totals.
func (q *Queries) FailoverEventRecord(ctx context.Context, ev FailoverEvent) (*FailoverEvent, error) {
	var out FailoverEvent
	err := sqlxGet(ctx, q, &out, `
		INSERT INTO failover_event (node_id, role, lost_at, fenced_at, finished_at, leader,
			tasks_requeued, workflows_released)
		VALUES ($1, $2, $3, $4, now(), $5, $6, $7)
		ON CONFLICT (node_id) DO UPDATE SET
			tasks_requeued = failover_event.tasks_requeued + excluded.tasks_requeued,
			workflows_released = failover_event.workflows_released + excluded.workflows_released,
			finished_at = now()
		RETURNING *`,
		ev.NodeID, ev.Role, ev.LostAt, ev.FencedAt, ev.Leader, ev.TasksRequeued, ev.WorkflowsReleased)
	if err != nil {
		return nil, fmt.Errorf("record failover of %s: %w", ev.NodeID, err)
	}
	return &out, nil
}

// FailoverEventList returns the most recent failover events, newest first.
func (q *Queries) FailoverEventList(ctx context.Context, limit int) ([]FailoverEvent, error) {
	var evs []FailoverEvent
	if err := sqlxSelect(ctx, q, &evs, `SELECT * FROM failover_event ORDER BY id DESC LIMIT $1`, limit); err != nil {
		return nil, fmt.Errorf("list failover events: %w", err)
	}
	return evs, nil
}
