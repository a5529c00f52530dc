package dao

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// This file holds the operators' actions on task and workflow instances: kill, rerun, stop.
// Each is one statement or one transaction whose every write is conditioned on the state it
// expects, so an action racing a worker that finishes the same task, or a master that
// finishes the same workflow, either applies whole or reports a ConflictError; it never
// overwrites a result.

// ErrInstanceNotFound is returned by an action on a task or workflow instance that does not
// exist.
var ErrInstanceNotFound = errors.New("no such instance")

// InstanceNotFoundError is ErrInstanceNotFound about one instance: Kind is "task instance" or
// "workflow instance".
type InstanceNotFoundError struct {
	Kind string
	ID   int64
}

func (e *InstanceNotFoundError) Error() string {
	return fmt.Sprintf("%s %d: %v", e.Kind, e.ID, ErrInstanceNotFound)
}

// Unwrap makes the error ErrInstanceNotFound to errors.Is.
func (e *InstanceNotFoundError) Unwrap() error { return ErrInstanceNotFound }

// ConflictError is returned by an action that the instance's current state does not allow,
// such as killing a task that has already finished.
type ConflictError struct {
	// Kind is "task" or "workflow".
	Kind   string
	ID     int64
	State  string
	Action string
	// Reason, unless empty, is what else about the instance refuses the action.
	Reason string
}

func (e *ConflictError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("cannot %s %s instance %d: it is %s; %s", e.Action, e.Kind, e.ID, e.State, e.Reason)
	}
	return fmt.Sprintf("cannot %s %s instance %d: it is %s", e.Action, e.Kind, e.ID, e.State)
}

// KillResult is what a kill request did.
type KillResult struct {
	TaskID             int64
	WorkflowInstanceID int64
	// State is TaskKilled when the task was still queued (or waiting for a signal) and is
	// now killed, TaskRunning when its worker has been asked to stop it (the state becomes
	// killed when it has), or TaskWaiting for the parent of a for-each task's items: its
	// queued items are killed, the workers of its running ones asked to stop them, and it
	// ends killed once they have all ended.
	State    TaskState
	WorkerID *string
	Attempt  int
}

// killSQL is TaskKillIfQueuedOrRunning's statement: $1 the task; $2 the masters' channel,
// woken with its workflow instance; $3 the workers' kill channel, woken with a worker's id.
const killSQL = `
		WITH t AS (
			-- A for-each task's parent waits for its items: it is not killed here but marked,
			-- and its master ends it killed once they have ended (lifecycle.Driver).
			UPDATE task_instance SET
				state = CASE WHEN state = 'queued' OR (state = 'waiting' AND item_count IS NULL) THEN 'killed' ELSE state END,
				kill_requested = true,
				end_reason = 'operator-kill',
				not_before = NULL,
				ended_at = CASE WHEN state = 'queued' OR (state = 'waiting' AND item_count IS NULL) THEN now() ELSE ended_at END,
				error = CASE WHEN state = 'queued' THEN 'killed by an operator before it ran'
					WHEN state = 'waiting' AND item_count IS NULL THEN 'killed by an operator while it waited' ELSE error END,
				paused_step = NULL
			WHERE id = $1 AND state IN ('queued', 'waiting', 'running')
			RETURNING id, workflow_instance_id, state, worker_id, attempt, child_workflow_instance_id
		), woken AS (
			SELECT pg_notify(CASE WHEN state = 'running' THEN $3 ELSE $2 END,
				CASE WHEN state = 'running' THEN worker_id ELSE workflow_instance_id::text END) FROM t
		)
		SELECT id, workflow_instance_id, state, worker_id, attempt, child_workflow_instance_id
		FROM t, (SELECT count(*) FROM woken) w`

// killItemsSQL is the statement TaskKillIfQueuedOrRunning runs after killSQL for a for-each
// task's parent $1, marked: its items (task names hold no '['), the queued ones and the
// agents paused for a signal killed at once, the running ones asked to stop; $2 the workers'
// kill channel.
const killItemsSQL = `
		WITH i AS (
			UPDATE task_instance i SET
				state = CASE WHEN i.state IN ('queued', 'waiting') THEN 'killed' ELSE i.state END,
				kill_requested = true,
				end_reason = 'operator-kill',
				not_before = NULL,
				ended_at = CASE WHEN i.state IN ('queued', 'waiting') THEN now() ELSE i.ended_at END,
				error = CASE WHEN i.state = 'queued' THEN 'killed by an operator before it ran'
					WHEN i.state = 'waiting' THEN 'killed by an operator while it waited' ELSE i.error END,
				paused_step = NULL
			FROM task_instance p
			WHERE p.id = $1 AND i.workflow_instance_id = p.workflow_instance_id
			  AND starts_with(i.name, p.name || '[') AND i.state IN ('queued', 'waiting', 'running')
			RETURNING i.state, i.worker_id
		)
		SELECT count(*) FROM (SELECT pg_notify($2, w.worker_id) FROM (SELECT DISTINCT worker_id FROM i
			WHERE state = 'running' AND worker_id IS NOT NULL) w) n`

// TaskKillIfQueuedOrRunning is the transition "killed": it kills a queued task instance at once, or asks the worker of a running one to stop
// it: kill_requested is set and the worker is woken. Both in one statement conditioned on the
// state, so a worker claiming or finishing the task at the same moment either sees the kill or
// wins the race (the kill then reports a ConflictError). The owning master is woken when the
// task was killed at once, so it skips the downstream tasks. A waiting workflow task's child
// is stopped with it, and the child's own children in turn: call it in a transaction.
//
// The parent of a for-each task's items is marked kill_requested and the masters are woken,
// so that no further item is created and the parent ends killed once its items have; a
// second statement then kills its queued items and asks the workers of its running ones to
// stop them. It comes after the mark, with a snapshot of its own: an advance creating items
// holds the parent's row (TaskForEachItems), so the mark waits for it to commit and the
// second statement sees what it created, while an advance after the mark creates nothing.
func (q *Queries) TaskKillIfQueuedOrRunning(ctx context.Context, id int64) (KillResult, error) {
	if err := q.lockChildren(ctx, nil, []int64{id}); err != nil {
		return KillResult{}, err
	}
	toolChildren, err := q.lockToolChildren(ctx, nil, []int64{id})
	if err != nil {
		return KillResult{}, err
	}
	var r []struct {
		ID                 int64     `db:"id"`
		WorkflowInstanceID int64     `db:"workflow_instance_id"`
		State              TaskState `db:"state"`
		WorkerID           *string   `db:"worker_id"`
		Attempt            int       `db:"attempt"`
		Child              *int64    `db:"child_workflow_instance_id"`
	}
	err = sqlxSelect(ctx, q, &r, killSQL, id, q.ch.master, q.ch.kill)
	if err != nil {
		return KillResult{}, fmt.Errorf("kill task instance %d: %w", id, err)
	}
	if len(r) == 0 {
		return KillResult{}, q.taskConflict(ctx, id, "kill")
	}
	// A workflow task's child stops with it; an agent's workflow tools' children stop with
	// it too, as soon as its kill is asked: it never goes on to take their results.
	var stops []childStop
	if c := r[0].Child; c != nil && r[0].State == TaskKilled {
		stops = append(stops, childStop{ID: *c, Reason: fmt.Sprintf("stopped: its parent task %d was killed", id), End: EndOperatorKill})
	}
	for c := range toolChildren {
		stops = append(stops, childStop{ID: c, Reason: fmt.Sprintf("stopped: the agent task %d whose tool started it was killed", id), End: EndOperatorKill})
	}
	if len(stops) > 0 {
		workers := map[string]bool{}
		if _, err := q.workflowStopChildren(ctx, stops, workers); err != nil {
			return KillResult{}, err
		}
		for w := range workers {
			q.wake(q.ch.kill, w)
		}
	}
	if r[0].State == TaskWaiting {
		if _, err := q.q.ExecContext(ctx, killItemsSQL, id, q.ch.kill); err != nil {
			return KillResult{}, fmt.Errorf("kill the items of task instance %d: %w", id, err)
		}
	}
	return KillResult{TaskID: r[0].ID, WorkflowInstanceID: r[0].WorkflowInstanceID, State: r[0].State,
		WorkerID: r[0].WorkerID, Attempt: r[0].Attempt}, nil
}

// taskConflict explains why an action conditioned on a task's state matched nothing.
func (q *Queries) taskConflict(ctx context.Context, id int64, action string) error {
	var state string
	err := sqlxGet(ctx, q, &state, `SELECT state FROM task_instance WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return &InstanceNotFoundError{Kind: "task instance", ID: id}
	}
	if err != nil {
		return fmt.Errorf("%s task instance %d: %w", action, id, err)
	}
	return &ConflictError{Kind: "task", ID: id, State: state, Action: action}
}

// TaskListKillRequested returns the tokens of the running attempts of worker that an operator
// asked to kill. The worker stops them with outcome killed.
func (q *Queries) TaskListKillRequested(ctx context.Context, worker string) ([]Token, error) {
	var toks []struct {
		ID       int64  `db:"id"`
		WorkerID string `db:"worker_id"`
		Attempt  int    `db:"attempt"`
	}
	if err := sqlxSelect(ctx, q, &toks, `SELECT id, worker_id, attempt FROM task_instance
		WHERE worker_id = $1 AND state = 'running' AND kill_requested`, worker); err != nil {
		return nil, fmt.Errorf("list kill requests of %s: %w", worker, err)
	}
	out := make([]Token, len(toks))
	for i, t := range toks {
		out[i] = Token{TaskID: t.ID, WorkerID: t.WorkerID, Attempt: t.Attempt}
	}
	return out, nil
}

// RerunResult is what a rerun did.
type RerunResult struct {
	// Requeued are the task instances put back in the queue, and the for-each parents put
	// back to waiting for their items.
	Requeued []int64
	// Deleted counts the skipped task instances removed for the master to create again.
	Deleted int
	// Reopened is set when the workflow instance had finished and runs again, without an
	// owner until a master takes it.
	Reopened bool
}

// TaskRerunIfFailedOrKilled is the transition "rerun": it puts the given failed or killed task instances of a workflow instance back in
// the queue (retries reset, attempt numbers going on so every fencing token stays unique;
// a for-each task's parent waiting again, for its master to create its items never created;
// a sensor's state removed, so it starts over),
// deletes the task instances named in recreate that ended without an attempt — skipped,
// failed at their creation, a wait, workflow or worker-less sensor task failed or killed; never a for-each
// task's parent, which keeps its items — so the master creates them again, deciding anew, once their
// dependencies are met (the caller names the tasks below the rerun ones, and the rerun ones
// that failed at creation), and reopens the workflow instance if it had finished: state running, no owner. The
// masters are woken with its id, as by the end of a task of it, so one locks it at once and
// continues it.
//
// It holds the workflow instance's row for the whole transaction, as a master's advance does,
// so a master finishing the instance at the same moment either finishes it first (and the
// rerun reopens it) or sees the requeued tasks. A task that is no longer failed or killed
// fails the whole rerun with a ConflictError.
//
// An instance with a concurrency key is reopened only while its key has a free slot and no
// instance of the key waits (their turn comes first); otherwise the rerun is a ConflictError
// that says so. The rerun holds the key's lock, taken before the row's, as admissions do.
//
// ev, unless nil, is the rerun's audit_event row, written in its transaction: the rerun
// happens only if its record is written with it.
func (db *DB) TaskRerunIfFailedOrKilled(ctx context.Context, workflowID int64, taskIDs []int64, recreate []string, ev *AuditEvent) (RerunResult, error) {
	var res RerunResult
	err := db.Tx(ctx, func(q *Queries) error {
		var keyed struct {
			Name string  `db:"workflow_name"`
			Key  *string `db:"concurrency_key"`
			Max  *int    `db:"concurrency_max"`
		}
		// An instance's key never changes: read before its lock.
		err := sqlxGet(ctx, q, &keyed, `SELECT workflow_name, concurrency_key, concurrency_max
			FROM workflow_instance WHERE id = $1`, workflowID)
		if errors.Is(err, sql.ErrNoRows) {
			return &InstanceNotFoundError{Kind: "workflow instance", ID: workflowID}
		}
		if err != nil {
			return fmt.Errorf("read workflow instance %d: %w", workflowID, err)
		}
		var keyFull string
		if keyed.Key != nil && keyed.Max != nil {
			if keyFull, err = q.keyRerunConflict(ctx, keyed.Name, *keyed.Key, *keyed.Max); err != nil {
				return err
			}
		}
		var wf struct {
			State WorkflowState `db:"state"`
		}
		err = sqlxGet(ctx, q, &wf, `SELECT state FROM workflow_instance WHERE id = $1 FOR UPDATE`, workflowID)
		if err != nil {
			return fmt.Errorf("lock workflow instance %d: %w", workflowID, err)
		}
		if wf.State.Terminal() && keyFull != "" {
			return &ConflictError{Kind: "workflow", ID: workflowID, State: string(wf.State), Action: "rerun", Reason: keyFull}
		}
		var requeued []struct {
			ID    int64     `db:"id"`
			State TaskState `db:"state"`
			Group string    `db:"worker_group"`
		}
		// A for-each task's parent waits again, for the items rerun with it and those never
		// created, which its master creates.
		err = sqlxSelect(ctx, q, &requeued, `
			UPDATE task_instance SET state = CASE WHEN item_count IS NULL THEN 'queued' ELSE 'waiting' END,
				worker_id = NULL, retries = 0,
				kill_requested = false, not_before = NULL, output = NULL, error = NULL, exit_code = NULL, end_reason = NULL,
				output_truncated = false,
				started_at = CASE WHEN item_count IS NULL THEN NULL ELSE now() END, ended_at = NULL, queued_at = now()
			WHERE workflow_instance_id = $1 AND id = ANY($2) AND state IN ('failed', 'killed')
			RETURNING id, state, worker_group`, workflowID, pq.Array(taskIDs))
		if err != nil {
			return fmt.Errorf("requeue tasks of workflow instance %d: %w", workflowID, err)
		}
		if len(requeued) != len(taskIDs) {
			done := map[int64]bool{}
			for _, r := range requeued {
				done[r.ID] = true
			}
			for _, id := range taskIDs {
				if !done[id] {
					return q.taskConflict(ctx, id, "rerun")
				}
			}
		}
		groups := map[string]bool{}
		for _, r := range requeued {
			res.Requeued = append(res.Requeued, r.ID)
			if r.State == TaskQueued {
				groups[r.Group] = true
			}
		}
		// A sensor rerun starts over: its timeout runs from its new first check, not from the
		// one its state (the checkpoint sensor-state, executor.Sensor) keeps.
		if _, err := q.q.ExecContext(ctx, `DELETE FROM task_checkpoint WHERE task_instance_id = ANY($1) AND step = 'sensor-state'`,
			pq.Array(res.Requeued)); err != nil {
			return fmt.Errorf("reset the sensors rerun in workflow instance %d: %w", workflowID, err)
		}
		del, err := q.q.ExecContext(ctx, `DELETE FROM task_instance
			WHERE workflow_instance_id = $1 AND name = ANY($2)
				AND (state = 'skipped' OR (attempt = 0 AND item_count IS NULL AND (state = 'failed' OR (state = 'killed' AND type IN ('wait', 'workflow', 'sensor')))))`, workflowID, pq.Array(recreate))
		if err != nil {
			return fmt.Errorf("delete tasks of workflow instance %d that never ran: %w", workflowID, err)
		}
		n, _ := del.RowsAffected()
		res.Deleted = int(n)
		// The instance's id, whether it was reopened or is still driven: the claim of new
		// instances does not take running ones, so a bare wake-up would leave a reopened one
		// to its requeued tasks' ends.
		payload := fmt.Sprint(workflowID)
		if wf.State.Terminal() {
			if _, err := q.q.ExecContext(ctx, `UPDATE workflow_instance SET state = 'running', owner = NULL,
				ended_at = NULL, error = NULL, end_reason = NULL WHERE id = $1`, workflowID); err != nil {
				return fmt.Errorf("reopen workflow instance %d: %w", workflowID, err)
			}
			res.Reopened = true
		}
		if _, err := q.q.ExecContext(ctx, `SELECT pg_notify($1, $2)`, q.ch.master, payload); err != nil {
			return fmt.Errorf("wake masters: %w", err)
		}
		for g := range groups {
			if _, err := q.q.ExecContext(ctx, `SELECT pg_notify($1, $2)`, q.ch.task, g); err != nil {
				return fmt.Errorf("wake workers: %w", err)
			}
		}
		if ev != nil {
			return q.AuditInsert(ctx, *ev)
		}
		return nil
	})
	if err != nil {
		return RerunResult{}, err
	}
	return res, nil
}

// StopResult is what stopping a workflow instance did.
type StopResult struct {
	// Killed counts the queued task instances killed at once.
	Killed int
	// KillRequested counts the running ones whose workers were asked to stop them.
	KillRequested int
}

// WorkflowStopIfActive is the transition "stopped": it stops a submitted or running workflow instance: it becomes stopped, its queued
// and waiting task instances are killed and the workers of its running ones are asked to kill
// them. The children its workflow tasks started stop with it, and theirs in turn; if it is a
// child itself, its parent task fails (TaskEndIfChildEnded). The owning master finds the
// instance no longer running at its next advance and lets go of it. A stopped instance of a
// capped workflow or with a concurrency key frees its slot: the masters are woken to admit
// the next.
//
// ev, unless nil, is the stop's audit_event row, written in its transaction: the stop
// happens only if its record is written with it.
func (db *DB) WorkflowStopIfActive(ctx context.Context, workflowID int64, ev *AuditEvent) (StopResult, error) {
	var res StopResult
	err := db.Tx(ctx, func(q *Queries) error {
		var err error
		res, err = q.workflowStopIfActive(ctx, workflowID, "stopped by an operator", EndStop, ev)
		return err
	})
	if err != nil {
		return StopResult{}, err
	}
	return res, nil
}

// workflowStopIfActive is WorkflowStopIfActive in the caller's transaction, the instance's
// error being errMsg and its end's reason why: an operator's stop (EndStop), or a
// submission's when-full: cancel-oldest (EndCancelOldest, WorkflowCreate). Its tasks and
// children end for the same reason.
func (q *Queries) workflowStopIfActive(ctx context.Context, workflowID int64, errMsg string, why EndReason, ev *AuditEvent) (StopResult, error) {
	var stopped []struct {
		ID     int64 `db:"id"`
		Capped bool  `db:"capped"`
		Keyed  bool  `db:"keyed"`
	}
	err := sqlxSelect(ctx, q, &stopped, `UPDATE workflow_instance SET state = 'stopped', ended_at = now(),
		error = $2, end_reason = $3
		WHERE id = $1 AND state IN ('submitted', 'running')
		RETURNING id, max_active IS NOT NULL AS capped, concurrency_key IS NOT NULL AS keyed`, workflowID, errMsg, why)
	if err != nil {
		return StopResult{}, fmt.Errorf("stop workflow instance %d: %w", workflowID, err)
	}
	if len(stopped) == 0 {
		var state string
		err := sqlxGet(ctx, q, &state, `SELECT state FROM workflow_instance WHERE id = $1`, workflowID)
		if errors.Is(err, sql.ErrNoRows) {
			return StopResult{}, &InstanceNotFoundError{Kind: "workflow instance", ID: workflowID}
		}
		if err != nil {
			return StopResult{}, fmt.Errorf("stop workflow instance %d: %w", workflowID, err)
		}
		return StopResult{}, &ConflictError{Kind: "workflow", ID: workflowID, State: state, Action: "stop"}
	}
	ids := []int64{workflowID}
	workers := map[string]bool{}
	r, children, err := q.killTasksOf(ctx, ids, "killed: the workflow was stopped", why, workers)
	if err != nil {
		return StopResult{}, err
	}
	// Its children stop with it, and a child's parent task ends with it.
	sub, err := q.workflowStopChildren(ctx, children, workers)
	if err != nil {
		return StopResult{}, err
	}
	if err := q.endParentsOf(ctx, ids, nil); err != nil {
		return StopResult{}, err
	}
	res := StopResult{Killed: r.Killed + sub.Killed, KillRequested: r.KillRequested + sub.KillRequested}
	for w := range workers {
		if _, err := q.q.ExecContext(ctx, `SELECT pg_notify($1, $2)`, q.ch.kill, w); err != nil {
			return res, fmt.Errorf("wake worker %s: %w", w, err)
		}
	}
	if _, err := q.q.ExecContext(ctx, `SELECT pg_notify($1, $2)`, q.ch.master, fmt.Sprint(workflowID)); err != nil {
		return res, err
	}
	// The slot it held, or would have taken, is free.
	if stopped[0].Keyed {
		q.notifyKeys(ids)
	}
	if stopped[0].Capped {
		q.wake(q.ch.master, "")
	}
	if ev != nil {
		return res, q.AuditInsert(ctx, *ev)
	}
	return res, nil
}

// endWaitingSQL is TaskEndIfWaiting's statement: $1 the task, $2 its end state, $3 its
// output, $4 its error; $5 the masters' channel, woken with the task's workflow instance,
// $6 the workers', woken with the task's group when a paused agent is queued again; $7 the
// end's reason (empty for none), which a paused agent resumed does not take.
//
// A wait task, or a sensor that waits on no worker (a time sensor; a workflow sensor, at
// workflow-run:NAME), ends as $2 says. A paused agent (another paused_step) that $2 ends
// succeeded is
// resumed instead: $3 becomes the checkpoint of its wait step, under the attempt that paused,
// and the task is queued, for any worker to go on from the next step; one that $2 fails ends
// failed, its error naming the step — except an agent waiting for the approval of a tool call
// (paused_step tool-approval:T.S), which a rejection resumes too: $3, the reviewer's text,
// becomes the checkpoint tool-rejection:T.S, which the model is given as the call's result.
// An agent waiting for the child of a workflow tool's call (tool-child:CALL) waits for the
// child, not for a person: only its timeout ($7 set) resumes it. w locks the row first, so a
// second signal, or a timeout racing this one, waits for it and then finds the task no longer
// waiting.
const endWaitingSQL = `
		WITH w AS (
			SELECT id, paused_step,
				paused_step IS NOT NULL AND paused_step NOT LIKE 'workflow-run:%' AS agent,
				paused_step IS NOT NULL AND paused_step NOT LIKE 'workflow-run:%'
					AND ($2 = 'succeeded' OR paused_step LIKE 'tool-approval:%') AS resume
			FROM task_instance
			WHERE id = $1 AND state = 'waiting' AND (type IN ('wait', 'sensor') OR paused_step IS NOT NULL)
			  AND (paused_step IS NULL OR paused_step NOT LIKE 'tool-child:%' OR $7 <> '')
			FOR UPDATE
		), t AS (
			UPDATE task_instance ti SET
				state = CASE WHEN w.resume THEN 'queued' ELSE $2 END,
				output = CASE WHEN w.resume THEN ti.output ELSE $3 END,
				error = CASE WHEN w.resume THEN NULL WHEN w.agent THEN 'step ' || w.paused_step || ': ' || $4 ELSE $4 END,
				ended_at = CASE WHEN w.resume THEN NULL ELSE now() END,
				queued_at = CASE WHEN w.resume THEN now() ELSE ti.queued_at END,
				wait_until = CASE WHEN w.paused_step IS NULL THEN ti.wait_until END,
				end_reason = CASE WHEN w.resume THEN NULL ELSE nullif($7, '')::end_reason END,
				paused_step = NULL
			FROM w WHERE ti.id = w.id
			RETURNING ti.id, ti.workflow_instance_id, ti.state, ti.worker_group, ti.attempt, w.paused_step, w.agent
		), cp AS (
			INSERT INTO task_checkpoint (task_instance_id, step, attempt, output)
			SELECT id, CASE WHEN $2 = 'succeeded' THEN paused_step
				ELSE 'tool-rejection:' || substr(paused_step, length('tool-approval:') + 1) END, attempt, coalesce($3, '')
			FROM t WHERE state = 'queued'
			ON CONFLICT (task_instance_id, step) DO UPDATE
				SET attempt = EXCLUDED.attempt, output = EXCLUDED.output, usage = DEFAULT, created_at = now()
		), woken AS (
			SELECT CASE WHEN state = 'queued' THEN pg_notify($6, worker_group)
				ELSE pg_notify($5, workflow_instance_id::text) END FROM t
		)
		SELECT workflow_instance_id, state, CASE WHEN agent THEN paused_step END AS paused_step
		FROM t, (SELECT count(*) FROM woken) w`

// Signalled is what TaskEndIfWaiting did with a waiting task.
type Signalled struct {
	WorkflowInstanceID int64 `db:"workflow_instance_id"`
	// State is the task's state now: succeeded or failed, or queued for a paused agent
	// resumed.
	State TaskState `db:"state"`
	// PausedStep is the wait step of a paused agent, nil for a wait task.
	PausedStep *string `db:"paused_step"`
}

// TaskEndIfWaiting is the transitions "signalled" (an operator, the API) and "wait timed out"
// (a master): it ends the waiting task id as state (succeeded or failed) with output and
// errMsg (nil for none), and why as its end's reason ("" for a signal, EndTimeout for a
// timeout), and wakes the masters with its workflow instance. A paused agent
// that state succeeds is resumed instead: output is its wait step's checkpoint and it goes
// back to the queue, waking the workers (see endWaitingSQL). A task that is not waiting
// (signalled already, timed out, killed), or one that waits but is neither a wait task nor a
// paused agent, is a ConflictError.
// ev, unless nil, is the change's audit_event row, written in its transaction; for a paused
// agent its params name the step the signal ended (paused_step).
func (db *DB) TaskEndIfWaiting(ctx context.Context, id int64, state TaskState, output, errMsg *string, why EndReason, ev *AuditEvent) (Signalled, error) {
	var res Signalled
	err := db.Tx(ctx, func(q *Queries) error {
		var rows []Signalled
		if err := sqlxSelect(ctx, q, &rows, endWaitingSQL, id, state, output, errMsg, q.ch.master, q.ch.task, string(why)); err != nil {
			return fmt.Errorf("end waiting task instance %d: %w", id, err)
		}
		if len(rows) == 0 {
			return q.taskConflict(ctx, id, "signal")
		}
		res = rows[0]
		if ev != nil {
			ev.Target = fmt.Sprintf("task-instance/%d", id)
			if res.PausedStep != nil {
				// The row names the wait it ended, so that who approved a tool call, and when,
				// is read from the trail (AuditStepSignals).
				ev.Params = withAuditParam(ev.Params, "paused_step", *res.PausedStep)
			}
			return q.AuditInsert(ctx, *ev)
		}
		return nil
	})
	return res, err
}

// WaitingPastTimeout is a waiting task whose timeout has passed: its id and params (the task
// as stored, which says what its timeout makes of it), a paused agent's wait step, and when
// it began to wait.
type WaitingPastTimeout struct {
	ID         int64           `db:"id"`
	Params     json.RawMessage `db:"params"`
	PausedStep *string         `db:"paused_step"`
	StartedAt  *time.Time      `db:"started_at"`
}

// waitingPastTimeoutSQL is TaskListWaitingPastTimeout's statement: $1 the limit.
const waitingPastTimeoutSQL = `
		SELECT id, params, paused_step, started_at FROM task_instance
		WHERE state = 'waiting' AND wait_until IS NOT NULL AND wait_until <= now()
		  AND paused_step IS DISTINCT FROM 'sensor'
		ORDER BY wait_until LIMIT $1`

// TaskListWaitingPastTimeout returns at most limit waiting tasks whose timeout has passed by
// the database's clock, the longest past first; sensors due for their next check are
// TaskQueueSensorsDue's.
func (q *Queries) TaskListWaitingPastTimeout(ctx context.Context, limit int) ([]WaitingPastTimeout, error) {
	var out []WaitingPastTimeout
	if err := sqlxSelect(ctx, q, &out, waitingPastTimeoutSQL, limit); err != nil {
		return nil, fmt.Errorf("list waiting tasks past their timeout: %w", err)
	}
	return out, nil
}
