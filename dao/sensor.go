package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// queueSensorsDueSQL is TaskQueueSensorsDue's statement: $1 how many at most. It finds the due
// sensors from the index of wait_until, as every wait's timeout is found, and skips rows
// another transaction holds (a kill, a signal, another master's sweep): that one decides them.
const queueSensorsDueSQL = `
		WITH due AS (
			SELECT id FROM task_instance
			WHERE state = 'waiting' AND wait_until IS NOT NULL AND wait_until <= now() AND paused_step = 'sensor'
			ORDER BY wait_until LIMIT $1
			FOR UPDATE SKIP LOCKED
		), t AS (
			UPDATE task_instance ti SET state = 'queued', queued_at = now(), paused_step = NULL, wait_until = NULL
			FROM due WHERE ti.id = due.id
			RETURNING ti.worker_group
		)
		SELECT worker_group FROM t`

// TaskQueueSensorsDue is the transition "sensor check due": it queues again at most limit
// sensors waiting between their checks (paused at the step sensor) whose next check is due by
// the database's clock, in one statement, for any worker of their group; it wakes the workers
// of those groups and returns how many it queued.
func (q *Queries) TaskQueueSensorsDue(ctx context.Context, limit int) (int, error) {
	var groups []string
	if err := sqlxSelect(ctx, q, &groups, queueSensorsDueSQL, limit); err != nil {
		return 0, fmt.Errorf("queue the sensors whose check is due: %w", err)
	}
	q.wakeGroups(groups)
	return len(groups), nil
}

// This part holds the statements of workflow sensors (migration 00038): a sensor that waits,
// on no worker, at the paused step workflow-run:NAME for a run of the workflow NAME that ends
// in one of its states at or after its since. The statement that ends such a run ends the
// sensors it satisfies, in its transaction (the trigger workflow_run_ended);
// TaskEndIfRunEnded catches the runs that ended before a sensor's creation committed.

// RunWait is what a workflow sensor waits for: a run of Workflow that ends in one of States
// at or after Since.
type RunWait struct {
	Workflow string
	States   []string
	Since    time.Time
}

// createWaitingOnRunSQL is TaskCreateWaitingOnRun's statement: $1-$7 the task's workflow
// instance, name, type, params, priority, group and timeout (ms, NULL for none), $8-$10 the
// workflow, states and since it waits for.
const createWaitingOnRunSQL = `
		WITH t AS (
			INSERT INTO task_instance (workflow_instance_id, name, type, params, state, priority, worker_group,
				timeout, started_at, wait_until, paused_step)
			VALUES ($1, $2, $3, $4::jsonb, 'waiting', $5, $6, $7 * interval '1 millisecond', now(),
				now() + $7 * interval '1 millisecond', 'workflow-run:' || $8)
			ON CONFLICT (workflow_instance_id, name) DO NOTHING
			RETURNING id
		), w AS (
			INSERT INTO workflow_run_wait (task_instance_id, workflow_name, states, since)
			SELECT id, $8, $9, $10 FROM t
		)
		SELECT id FROM t`

// TaskCreateWaitingOnRun is the transition "run awaited": it creates the workflow sensor t
// waiting, on no worker and holding no slot, for a run as w says, until its timeout (t's
// Timeout; none for 0). It returns the task's id, or 0 when a task of that name exists already
// (an advance that created it before). The caller, once its transaction has committed, calls
// TaskEndIfRunEnded for it: a run that ended before the commit found no sensor to end.
func (q *Queries) TaskCreateWaitingOnRun(ctx context.Context, t NewTask, w RunWait) (int64, error) {
	params := t.Params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	var timeout *int64
	if t.Timeout > 0 {
		ms := t.Timeout.Milliseconds()
		timeout = &ms
	}
	var ids []int64
	if err := sqlxSelect(ctx, q, &ids, createWaitingOnRunSQL, t.WorkflowInstanceID, t.Name, t.Type, string(params),
		t.Priority, t.Group, timeout, w.Workflow, pq.Array(w.States), w.Since); err != nil {
		return 0, fmt.Errorf("create task %s of workflow instance %d waiting for a run of %s: %w", t.Name, t.WorkflowInstanceID, w.Workflow, err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	return ids[0], nil
}

// awaitRunEndsSQL is TaskEndIfRunEnded's first statement for one task: $1 the task. It
// locks the active runs of the workflow the task waits for, and so waits for the
// transactions ending one of them: their trigger may have looked for sensors before the
// task's creation committed.
const awaitRunEndsSQL = `
		SELECT w.id FROM workflow_run_wait r
		JOIN workflow_instance w ON w.workflow_name = r.workflow_name AND w.state IN ('submitted', 'running')
		WHERE r.task_instance_id = $1
		ORDER BY w.id
		FOR SHARE OF w`

// endIfRunEndedSQL is TaskEndIfRunEnded's statement: $1 the task, or NULL for any, $2 how
// many at most. Each waiting workflow sensor is ended by the first run, by its end, that
// satisfies it: found by workflow_instance_name_ended.
const endIfRunEndedSQL = `
		WITH s AS (
			SELECT ti.id, ti.workflow_instance_id, r.workflow_name, r.states, r.since FROM task_instance ti
			JOIN workflow_run_wait r ON r.task_instance_id = ti.id
			WHERE ti.state = 'waiting' AND ti.paused_step LIKE 'workflow-run:%' AND ($1::bigint IS NULL OR ti.id = $1)
			ORDER BY ti.id LIMIT $2
		), m AS (
			SELECT s.id, run.id AS run_id, run.workflow_name, run.state, run.ended_at FROM s
			CROSS JOIN LATERAL (
				SELECT w.id, w.workflow_name, w.state, w.ended_at FROM workflow_instance w
				WHERE w.workflow_name = s.workflow_name AND w.state IN ('succeeded', 'failed', 'stopped')
				  AND w.state = ANY (s.states) AND w.ended_at >= s.since AND w.id <> s.workflow_instance_id
				ORDER BY w.ended_at LIMIT 1) run
		), t AS (
			UPDATE task_instance ti SET state = 'succeeded', ended_at = now(), paused_step = NULL, wait_until = NULL,
				output = workflow_run_output(m.run_id, m.workflow_name, m.state, m.ended_at)
			FROM m WHERE ti.id = m.id AND ti.state = 'waiting' AND ti.paused_step LIKE 'workflow-run:%'
			RETURNING ti.workflow_instance_id
		)
		SELECT workflow_instance_id FROM t`

// TaskEndIfRunEnded ends the workflow sensors whose run has ended already: task (after its
// creation committed: it first waits for the ends of its workflow's runs in flight, see
// awaitRunEndsSQL), or (0) at most limit of any (the masters' poll, which catches a sensor
// whose creator died before it looked). A run's end ends the sensors it satisfies by itself;
// this catches a run that ended while the sensor was being created. It wakes the masters with
// the sensors' workflow instances, as any task's end does, and returns how many it ended.
func (q *Queries) TaskEndIfRunEnded(ctx context.Context, task int64, limit int) (int, error) {
	var id *int64
	if task != 0 {
		id = &task
		var locked []int64
		if err := sqlxSelect(ctx, q, &locked, awaitRunEndsSQL, task); err != nil {
			return 0, fmt.Errorf("wait for the ends in flight of the runs task %d waits for: %w", task, err)
		}
	}
	var woken []int64
	if err := sqlxSelect(ctx, q, &woken, endIfRunEndedSQL, id, limit); err != nil {
		return 0, fmt.Errorf("end the workflow sensors whose run ended: %w", err)
	}
	ids := make(map[int64]struct{}, len(woken))
	for _, w := range woken {
		ids[w] = struct{}{}
	}
	q.wakeEnded(ids)
	return len(woken), nil
}
