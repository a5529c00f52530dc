package dao

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lib/pq"
)

// This file holds the statements of child workflows: a task of type workflow (the parent
// task) starts an instance of another workflow (the child) and waits, on no worker, until
// the child ends. The two are linked both ways (migration 00020), by the statement that
// creates the parent task; every statement that ends an instance also ends its parent task,
// in the same transaction (TaskEndIfChildEnded).

// ErrTaskExists is TaskCreateWaitingOnChild's error when the task instance is already there:
// the caller created a child for a task it did not create, and must roll back.
var ErrTaskExists = errors.New("the task instance exists already")

// createWaitingOnChildSQL is TaskCreateWaitingOnChild's statement: $1-$6 the task's workflow
// instance, name, type, params, priority and group, $7 its child.
const createWaitingOnChildSQL = `
		WITH t AS (
			INSERT INTO task_instance (workflow_instance_id, name, type, params, state, priority,
				worker_group, child_workflow_instance_id, started_at)
			VALUES ($1, $2, $3, $4::jsonb, 'waiting', $5, $6, $7, now())
			ON CONFLICT (workflow_instance_id, name) DO NOTHING
			RETURNING id, workflow_instance_id
		), linked AS (
			UPDATE workflow_instance c SET parent_task_instance_id = t.id,
				parent_workflow_instance_id = t.workflow_instance_id
			FROM t WHERE c.id = $7
		)
		SELECT id FROM t`

// TaskCreateWaitingOnChild is the transition "child started": it creates the workflow task t
// waiting on child, the instance the caller created for it in the same transaction, and
// links the child back to it. A task of that name that exists already is ErrTaskExists, and
// nothing is written: the caller, which holds the task's workflow instance locked, rolls the
// child back. It returns the task's id.
func (q *Queries) TaskCreateWaitingOnChild(ctx context.Context, t NewTask, child int64) (int64, error) {
	params := t.Params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	var id int64
	err := sqlxGet(ctx, q, &id, createWaitingOnChildSQL, t.WorkflowInstanceID, t.Name, t.Type, string(params),
		t.Priority, t.Group, child)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("create task %s of workflow instance %d: %w", t.Name, t.WorkflowInstanceID, ErrTaskExists)
	}
	if err != nil {
		return 0, fmt.Errorf("create task %s of workflow instance %d waiting on %d: %w", t.Name, t.WorkflowInstanceID, child, err)
	}
	return id, nil
}

// nestingDepthSQL is WorkflowNestingDepth's statement: $1 the instance, $2 the deepest to
// look.
const nestingDepthSQL = `
		WITH RECURSIVE up (id, depth) AS (
			SELECT parent_workflow_instance_id, 1 FROM workflow_instance
			WHERE id = $1 AND parent_workflow_instance_id IS NOT NULL
			UNION ALL
			SELECT w.parent_workflow_instance_id, up.depth + 1 FROM up
			JOIN workflow_instance w ON w.id = up.id
			WHERE w.parent_workflow_instance_id IS NOT NULL AND up.depth < $2
		)
		SELECT coalesce(max(depth), 0) FROM up`

// WorkflowNestingDepth returns how many parents the workflow instance id has, up to its top
// instance (one submitted, not started by a task): 0 for a top instance. It looks at most
// limit levels up, and returns limit for anything deeper.
func (q *Queries) WorkflowNestingDepth(ctx context.Context, id int64, limit int) (int, error) {
	var n int
	if err := sqlxGet(ctx, q, &n, nestingDepthSQL, id, limit); err != nil {
		return 0, fmt.Errorf("nesting depth of workflow instance %d: %w", id, err)
	}
	return n, nil
}

// ChildEnded is an ended instance whose parent task, if it has one, is to end with it.
type ChildEnded struct {
	Child int64
	// Output is the parent task's output if the child succeeded.
	Output string
}

// endOnChildSQL is TaskEndIfChildEnded's statement: $1 the ended instances, $2 the outputs
// their parent tasks get if they succeeded.
const endOnChildSQL = `
		UPDATE task_instance p SET
			state = CASE WHEN c.state = 'succeeded' THEN 'succeeded' ELSE 'failed' END,
			output = CASE WHEN c.state = 'succeeded' THEN x.output END,
			error = CASE WHEN c.state <> 'succeeded' THEN 'child workflow instance ' || c.id || ' (' ||
				c.workflow_name || ') ' || c.state || coalesce(': ' || c.error, '') END,
			end_reason = CASE WHEN c.state <> 'succeeded' THEN 'child-failed' END,
			ended_at = now()
		FROM unnest($1::bigint[], $2::text[]) AS x(child, output)
		JOIN workflow_instance c ON c.id = x.child
		WHERE p.id = c.parent_task_instance_id AND p.child_workflow_instance_id = c.id
		  AND p.state = 'waiting' AND p.type = 'workflow'
		  AND c.state IN ('succeeded', 'failed', 'stopped')
		RETURNING p.workflow_instance_id`

// TaskEndIfChildEnded is the transition "child ended": the parent task of each of ended, if
// it has one and still waits on it, ends as the child did: succeeded with the given output,
// or failed, its error naming the child instance, its end and its error. The masters are woken
// with the parent tasks' instances once the transaction commits. Every statement that ends an
// instance calls it in its transaction, so a child never ends without its parent task; the
// condition on the waiting task makes a second call a no-op. It returns how many tasks it
// ended.
func (q *Queries) TaskEndIfChildEnded(ctx context.Context, ended []ChildEnded) (int, error) {
	if len(ended) == 0 {
		return 0, nil
	}
	ids, outputs := make([]int64, len(ended)), make([]string, len(ended))
	for i, e := range ended {
		ids[i], outputs[i] = e.Child, e.Output
	}
	var parents []int64
	if err := sqlxSelect(ctx, q, &parents, endOnChildSQL, pq.Array(ids), pq.Array(outputs)); err != nil {
		return 0, fmt.Errorf("end the parent tasks of %d ended instances: %w", len(ended), err)
	}
	woken := make(map[int64]struct{}, len(parents))
	for _, p := range parents {
		woken[p] = struct{}{}
	}
	q.wakeEnded(woken)
	var groups []string
	if err := sqlxSelect(ctx, q, &groups, resumeOnToolChildSQL, pq.Array(ids)); err != nil {
		return 0, fmt.Errorf("resume the agents waiting on %d ended instances: %w", len(ended), err)
	}
	q.wakeGroups(groups)
	return len(parents), nil
}

// resumeOnToolChildSQL is TaskEndIfChildEnded's statement for the children of workflow tools'
// calls: $1 the ended instances. An agent waiting at the call's step (tool-child:CALL) is
// queued again, for any worker to take the call's result from its child.
const resumeOnToolChildSQL = `
		UPDATE task_instance p SET state = 'queued', queued_at = now(), paused_step = NULL, wait_until = NULL
		FROM unnest($1::bigint[]) AS x(child)
		JOIN workflow_instance c ON c.id = x.child
		WHERE p.id = c.parent_task_instance_id AND c.parent_call_id IS NOT NULL
		  AND p.state = 'waiting' AND p.paused_step = 'tool-child:' || c.parent_call_id
		  AND c.state IN ('succeeded', 'failed', 'stopped')
		RETURNING p.worker_group`

// endParentsOf ends the parent tasks of those of ids that are children (TaskEndIfChildEnded),
// each with its output in outputs (by instance; none for a child that did not succeed).
func (q *Queries) endParentsOf(ctx context.Context, ids []int64, outputs map[int64]string) error {
	if len(ids) == 0 {
		return nil
	}
	ended := make([]ChildEnded, len(ids))
	for i, id := range ids {
		ended[i] = ChildEnded{Child: id, Output: outputs[id]}
	}
	_, err := q.TaskEndIfChildEnded(ctx, ended)
	return err
}

// childStop is a child instance to stop (workflowStopChildren), with the error it is to end
// with and its end's reason, which its tasks and children end with too.
type childStop struct {
	ID     int64
	Reason string
	End    EndReason
}

// workflowStopChildren stops the active instances stops, children of tasks that were just
// killed, each with its reason as its error, and their own children in turn: their queued
// and waiting tasks are killed and the workers of their running ones are asked to stop them,
// as WorkflowStopIfActive does. The workers to wake are added to workers. Call it in the
// transaction that killed the parent tasks.
func (q *Queries) workflowStopChildren(ctx context.Context, stops []childStop, workers map[string]bool) (StopResult, error) {
	var res StopResult
	for len(stops) > 0 {
		ids, reasons, ends := make([]int64, len(stops)), make([]string, len(stops)), make([]string, len(stops))
		why := make(map[int64]EndReason, len(stops))
		for i, c := range stops {
			ids[i], reasons[i], ends[i] = c.ID, c.Reason, string(c.End)
			why[c.ID] = c.End
		}
		var rows []struct {
			ID     int64 `db:"id"`
			Capped bool  `db:"capped"`
			Keyed  bool  `db:"keyed"`
		}
		if err := sqlxSelect(ctx, q, &rows, `
			UPDATE workflow_instance w SET state = 'stopped', ended_at = now(), error = x.reason,
				end_reason = x.why::end_reason
			FROM unnest($1::bigint[], $2::text[], $3::text[]) AS x(id, reason, why)
			WHERE w.id = x.id AND w.state IN ('submitted', 'running')
			RETURNING w.id, w.max_active IS NOT NULL AS capped, w.concurrency_key IS NOT NULL AS keyed`,
			pq.Array(ids), pq.Array(reasons), pq.Array(ends)); err != nil {
			return res, fmt.Errorf("stop child workflow instances %v: %w", ids, err)
		}
		if len(rows) == 0 {
			return res, nil
		}
		// A stopped child frees its slot of its workflow's cap or of its key, as any stop does.
		stopped := make([]int64, len(rows))
		byReason := map[EndReason][]int64{}
		var keyed []int64
		for i, r := range rows {
			stopped[i] = r.ID
			byReason[why[r.ID]] = append(byReason[why[r.ID]], r.ID)
			if r.Keyed {
				keyed = append(keyed, r.ID)
			}
			if r.Capped {
				q.wake(q.ch.master, "")
			}
		}
		q.notifyKeys(keyed)
		stops = nil
		for end, wfs := range byReason {
			r, children, err := q.killTasksOf(ctx, wfs, "killed: the workflow was stopped", end, workers)
			if err != nil {
				return res, err
			}
			res.Killed, res.KillRequested = res.Killed+r.Killed, res.KillRequested+r.KillRequested
			stops = append(stops, children...)
		}
		for _, id := range stopped {
			q.wake(q.ch.master, fmt.Sprint(id))
		}
	}
	return res, nil
}

// stoppedWithParent is the childStop of each child in children (by the workflow instance
// whose task started it), whose parent instance was stopped for the reason why.
func stoppedWithParent(children map[int64]int64, why EndReason) []childStop {
	var out []childStop
	for child, parent := range children {
		out = append(out, childStop{ID: child, Reason: fmt.Sprintf("stopped: its parent workflow instance %d was stopped", parent), End: why})
	}
	return out
}

// killTasksOf kills the queued and waiting tasks of the instances wfs with errMsg as their
// error and why as their end's reason, and asks the workers of their running ones to stop
// them (kill_requested, and why as the reason they will end with), adding
// those workers to workers. It returns what it did and the children of the workflow tasks it
// killed and of its agents' workflow tools (lockToolChildren), to stop, with the reason that
// their parent was stopped.
func (q *Queries) killTasksOf(ctx context.Context, wfs []int64, errMsg string, why EndReason, workers map[string]bool) (StopResult, []childStop, error) {
	if err := q.lockChildren(ctx, wfs, nil); err != nil {
		return StopResult{}, nil, err
	}
	toolChildren, err := q.lockToolChildren(ctx, wfs, nil)
	if err != nil {
		return StopResult{}, nil, err
	}
	var tasks []struct {
		Workflow int64     `db:"workflow_instance_id"`
		State    TaskState `db:"state"`
		WorkerID *string   `db:"worker_id"`
		Child    *int64    `db:"child_workflow_instance_id"`
	}
	err = sqlxSelect(ctx, q, &tasks, `
		UPDATE task_instance SET
			state = CASE WHEN state IN ('queued', 'waiting') THEN 'killed' ELSE state END,
			kill_requested = true,
			end_reason = $3,
			not_before = NULL,
			ended_at = CASE WHEN state IN ('queued', 'waiting') THEN now() ELSE ended_at END,
			error = CASE WHEN state IN ('queued', 'waiting') THEN $2 ELSE error END,
			paused_step = NULL
		WHERE workflow_instance_id = ANY($1) AND state IN ('queued', 'waiting', 'running')
		RETURNING workflow_instance_id, state, worker_id, child_workflow_instance_id`, pq.Array(wfs), errMsg, why)
	if err != nil {
		return StopResult{}, nil, fmt.Errorf("kill tasks of workflow instances %v: %w", wfs, err)
	}
	var res StopResult
	children := toolChildren
	for _, t := range tasks {
		if t.Child != nil {
			children[*t.Child] = t.Workflow
		}
		if t.State == TaskKilled {
			res.Killed++
			continue
		}
		res.KillRequested++
		if t.WorkerID != nil {
			workers[*t.WorkerID] = true
		}
	}
	return res, stoppedWithParent(children, why), nil
}

// lockChildrenSQL is lockChildren's statement: $1 the workflow instances, $2 the tasks.
const lockChildrenSQL = `
		SELECT c.id FROM task_instance t
		JOIN workflow_instance c ON c.id = t.child_workflow_instance_id
		WHERE (t.workflow_instance_id = ANY($1) OR t.id = ANY($2)) AND t.state = 'waiting' AND t.type = 'workflow'
		ORDER BY c.id
		FOR NO KEY UPDATE OF c`

// lockChildren locks, for the rest of the transaction, the children that the waiting workflow
// tasks of the instances wfs, or the tasks tasks, wait on, before the caller kills those
// tasks. A child's end locks the child and then ends its parent task: locking in that order
// here too, a stop or kill racing the child's end waits for it (and then finds the task
// ended) rather than deadlocking with it.
func (q *Queries) lockChildren(ctx context.Context, wfs, tasks []int64) error {
	var ids []int64
	if err := sqlxSelect(ctx, q, &ids, lockChildrenSQL, pq.Array(wfs), pq.Array(tasks)); err != nil {
		return fmt.Errorf("lock the children of workflow instances %v, tasks %v: %w", wfs, tasks, err)
	}
	return nil
}

// lockToolChildrenSQL is lockToolChildren's statement: $1 the workflow instances, $2 the tasks.
const lockToolChildrenSQL = `
		SELECT c.id, c.parent_workflow_instance_id FROM task_instance t
		JOIN workflow_instance c ON c.parent_task_instance_id = t.id AND c.parent_call_id IS NOT NULL
		WHERE (t.workflow_instance_id = ANY($1) OR t.id = ANY($2)) AND t.type = 'agent'
		  AND t.state IN ('queued', 'waiting', 'running') AND c.state IN ('submitted', 'running')
		ORDER BY c.id
		FOR NO KEY UPDATE OF c`

// lockToolChildren locks, as lockChildren does and after it, the active children that the
// workflow tools' calls of the unended agents of the instances wfs, or of the tasks tasks,
// started: a killed agent never goes on, so they stop with it. It returns them, each with the
// workflow instance of its agent.
func (q *Queries) lockToolChildren(ctx context.Context, wfs, tasks []int64) (map[int64]int64, error) {
	var rows []struct {
		ID     int64 `db:"id"`
		Parent int64 `db:"parent_workflow_instance_id"`
	}
	if err := sqlxSelect(ctx, q, &rows, lockToolChildrenSQL, pq.Array(wfs), pq.Array(tasks)); err != nil {
		return nil, fmt.Errorf("lock the tool children of workflow instances %v, tasks %v: %w", wfs, tasks, err)
	}
	out := make(map[int64]int64, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Parent
	}
	return out, nil
}

// ParentLink is where a child workflow instance came from: the task that started it and that
// task's workflow instance. Both are nil for an instance that was submitted; Task alone is nil
// when a rerun has since replaced the task.
type ParentLink struct {
	Workflow *int64  `db:"parent_workflow_instance_id"`
	Task     *int64  `db:"parent_task_instance_id"`
	TaskName *string `db:"task_name"`
	// WorkflowName is the parent instance's workflow.
	WorkflowName *string `db:"workflow_name"`
}

// workflowParentSQL is WorkflowParent's statement: $1 the instance.
const workflowParentSQL = `
		SELECT c.parent_workflow_instance_id, t.id AS parent_task_instance_id, t.name AS task_name, w.workflow_name
		FROM workflow_instance c
		LEFT JOIN task_instance t ON t.id = c.parent_task_instance_id
		LEFT JOIN workflow_instance w ON w.id = c.parent_workflow_instance_id
		WHERE c.id = $1`

// WorkflowParent returns the parent of workflow instance id (ParentLink).
func (q *Queries) WorkflowParent(ctx context.Context, id int64) (ParentLink, error) {
	var p ParentLink
	err := sqlxGet(ctx, q, &p, workflowParentSQL, id)
	if err != nil {
		return ParentLink{}, fmt.Errorf("parent of workflow instance %d: %w", id, err)
	}
	return p, nil
}

// TaskChildren returns the child instance of each workflow task of workflow instance id that
// started one, by task instance.
func (q *Queries) TaskChildren(ctx context.Context, id int64) (map[int64]int64, error) {
	var rows []struct {
		Task  int64 `db:"id"`
		Child int64 `db:"child_workflow_instance_id"`
	}
	if err := sqlxSelect(ctx, q, &rows, `SELECT id, child_workflow_instance_id FROM task_instance
		WHERE workflow_instance_id = $1 AND child_workflow_instance_id IS NOT NULL`, id); err != nil {
		return nil, fmt.Errorf("children of workflow instance %d: %w", id, err)
	}
	out := make(map[int64]int64, len(rows))
	for _, r := range rows {
		out[r.Task] = r.Child
	}
	return out, nil
}
