package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// taskColumns reads a task_instance row into TaskInstance; the intervals come as milliseconds.
const taskColumns = `id, workflow_instance_id, name, type, params, state, priority, worker_group,
	pool, worker_id, attempt, retries, max_retries,
	(extract(epoch FROM retry_interval) * 1000)::bigint AS retry_interval_ms,
	(extract(epoch FROM timeout) * 1000)::bigint AS timeout_ms,
	not_before, failover_count, kill_requested, output, error, exit_code, queued_at, started_at, ended_at, usage`

// TaskClaim claims up to limit queued tasks of the given groups for worker, highest priority
// first, in one statement: the rows are locked with SKIP LOCKED so concurrent claimers never
// wait for or take the same task, each claimed task's attempt grows by one (the new fencing
// token), and a task_attempt row is opened for it.
//
// Tasks in a pool are claimed only while the pool has room, across all workers: the statement
// first locks the row of every pool with room that has claimable tasks here, in name order,
// and holds the locks until it commits. The row's running count is exact (triggers keep it in
// the same statement as each change of state, see 00003_llm_and_pools.sql), so claims in one
// pool are serialized and each sees the count the last one left; a full pool's tasks stay
// queued and do not stand in the way of other tasks.
func (q *Queries) TaskClaim(ctx context.Context, worker string, groups []string, limit int) ([]TaskInstance, error) {
	var tasks []TaskInstance
	err := sqlxSelect(ctx, q, &tasks, `
		WITH open_pool AS MATERIALIZED (
			SELECT p.name, p.max_running - p.running AS free FROM task_pool p
			WHERE (p.max_running IS NULL OR p.running < p.max_running)
			  -- A scalar subquery rather than EXISTS, which the planner may turn into a scan
			  -- of every queued task; this probes the pool's own index once per pool.
			  AND (SELECT true FROM task_instance t
			       WHERE t.pool = p.name AND t.state = 'queued' AND t.worker_group = ANY($2)
			         AND (t.not_before IS NULL OR t.not_before <= now())
			       LIMIT 1)
			ORDER BY p.name
			FOR UPDATE OF p
		), candidate AS (
			(SELECT id, priority FROM task_instance
			 WHERE state = 'queued' AND worker_group = ANY($2) AND pool IS NULL
			   AND (not_before IS NULL OR not_before <= now())
			 ORDER BY priority DESC, id
			 LIMIT $3)
			UNION ALL
			(SELECT c.id, c.priority FROM open_pool op CROSS JOIN LATERAL (
				SELECT t.id, t.priority FROM task_instance t
				WHERE t.pool = op.name AND t.state = 'queued' AND t.worker_group = ANY($2)
				  AND (t.not_before IS NULL OR t.not_before <= now())
				ORDER BY t.priority DESC, t.id
				LIMIT least(op.free, $3)) c)
		), locked AS (
			SELECT t.id FROM task_instance t
			WHERE t.id IN (SELECT id FROM candidate ORDER BY priority DESC, id LIMIT $3) AND t.state = 'queued'
			FOR UPDATE OF t SKIP LOCKED
		), claimed AS (
			UPDATE task_instance t
			SET state = 'running', worker_id = $1, attempt = t.attempt + 1, started_at = now(),
			    ended_at = NULL, error = NULL, exit_code = NULL, not_before = NULL
			FROM locked WHERE t.id = locked.id
			RETURNING t.*
		), opened AS (
			INSERT INTO task_attempt (task_instance_id, attempt, worker_id, started_at)
			SELECT id, attempt, worker_id, started_at FROM claimed
		)
		SELECT `+taskColumns+` FROM claimed ORDER BY priority DESC, id`,
		worker, pq.Array(groups), limit)
	if err != nil {
		return nil, fmt.Errorf("claim tasks for %s in groups %v: %w", worker, groups, err)
	}
	return tasks, nil
}

// AttemptResult is what a worker reports at the end of an attempt.
type AttemptResult struct {
	Outcome Outcome
	// Next is the task's next state: terminal, or queued for a retry or a hand-back.
	Next TaskState
	// Retry counts the attempt against the task's retries and delays the next claim by its
	// retry interval. Hand-backs and interruptions do not count.
	Retry    bool
	Output   *string
	Error    string
	ExitCode *int
	// AttemptUsage is the token usage of this attempt's own model calls (JSON), stored on
	// the attempt; nil for none.
	AttemptUsage json.RawMessage
	// TaskUsage is the token usage of the task's whole result (JSON; for an agent every step,
	// including those an earlier attempt checkpointed), stored on the task; nil keeps what
	// the task has.
	TaskUsage json.RawMessage
}

// TaskFinishIfRunning ends the attempt held by tok: the task moves to res.Next and the attempt
// row records the outcome, both only if the task is still running under tok. It returns
// ErrTokenRefused when it is not, and then writes nothing. The owning master is woken when the
// task reached a terminal state, the workers of its group when it went back to the queue.
func (q *Queries) TaskFinishIfRunning(ctx context.Context, tok Token, res AttemptResult) error {
	var errMsg *string
	if res.Error != "" {
		errMsg = &res.Error
	}
	rows, err := q.q.QueryContext(ctx, `
		WITH t AS (
			UPDATE task_instance SET
				state = $4,
				retries = retries + CASE WHEN $5 THEN 1 ELSE 0 END,
				not_before = CASE WHEN $5 THEN now() + retry_interval END,
				output = CASE WHEN $4 = 'queued' THEN output ELSE $6 END,
				error = $7,
				exit_code = $8,
				ended_at = CASE WHEN $4 = 'queued' THEN NULL ELSE now() END,
				queued_at = CASE WHEN $4 = 'queued' THEN now() ELSE queued_at END,
				usage = COALESCE($13::jsonb, usage)
			WHERE id = $1 AND worker_id = $2 AND attempt = $3 AND state = 'running'
			RETURNING id, attempt, workflow_instance_id, state, worker_group
		), a AS (
			UPDATE task_attempt SET ended_at = now(), outcome = $9, exit_code = $8, error = $7, usage = $12::jsonb
			FROM t WHERE task_attempt.task_instance_id = t.id AND task_attempt.attempt = t.attempt
		)
		SELECT t.id FROM t, LATERAL pg_notify(
			CASE WHEN t.state = 'queued' THEN $10 ELSE $11 END,
			CASE WHEN t.state = 'queued' THEN t.worker_group ELSE t.workflow_instance_id::text END) n`,
		tok.TaskID, tok.WorkerID, tok.Attempt, string(res.Next), res.Retry, res.Output, errMsg,
		res.ExitCode, string(res.Outcome), q.ch.task, q.ch.master, jsonOrNil(res.AttemptUsage), jsonOrNil(res.TaskUsage))
	if err != nil {
		return fmt.Errorf("finish task %d attempt %d: %w", tok.TaskID, tok.Attempt, err)
	}
	return expectOneRow(rows, tok)
}

// NewTask is a task instance the master creates when its dependencies are met.
type NewTask struct {
	WorkflowInstanceID int64
	Name               string
	Type               string
	Params             json.RawMessage
	// State is TaskQueued, or TaskSkipped for a task whose upstream failed.
	State         TaskState
	Priority      int
	Group         string
	Pool          string
	MaxRetries    int
	RetryInterval time.Duration
	Timeout       time.Duration
}

// TaskInsertMany creates task instances in one statement. A task that already exists (same
// workflow instance and name) is left as it is, so a master that advances a workflow twice, or
// a second master after a failover, creates nothing twice. It returns the names created and
// wakes the workers of every group that got queued tasks.
func (q *Queries) TaskInsertMany(ctx context.Context, tasks []NewTask) ([]string, error) {
	if len(tasks) == 0 {
		return nil, nil
	}
	n := len(tasks)
	wf, prio, retries := make([]int64, n), make([]int64, n), make([]int64, n)
	retryMs, timeoutMs := make([]int64, n), make([]*int64, n)
	names, types, params, states, groups, pools := make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	for i, t := range tasks {
		wf[i], names[i], types[i], states[i], groups[i] = t.WorkflowInstanceID, t.Name, t.Type, string(t.State), t.Group
		prio[i], retries[i], retryMs[i] = int64(t.Priority), int64(t.MaxRetries), t.RetryInterval.Milliseconds()
		params[i] = "{}"
		if len(t.Params) > 0 {
			params[i] = string(t.Params)
		}
		if t.Pool != "" {
			pools[i] = &tasks[i].Pool
		}
		if t.Timeout > 0 {
			ms := t.Timeout.Milliseconds()
			timeoutMs[i] = &ms
		}
	}
	var created []struct {
		Name  string `db:"name"`
		State string `db:"state"`
		Group string `db:"worker_group"`
	}
	err := sqlxSelect(ctx, q, &created, `
		WITH ins AS (
			INSERT INTO task_instance (workflow_instance_id, name, type, params, state, priority,
				worker_group, pool, max_retries, retry_interval, timeout, ended_at)
			SELECT w, nm, ty, p::jsonb, st, pr, g, pl, r, rm * interval '1 millisecond',
				tm * interval '1 millisecond', CASE WHEN st = 'skipped' THEN now() END
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[],
				$7::text[], $8::text[], $9::int[], $10::bigint[], $11::bigint[])
				AS x(w, nm, ty, p, st, pr, g, pl, r, rm, tm)
			ON CONFLICT (workflow_instance_id, name) DO NOTHING
			RETURNING name, state, worker_group
		), woken AS (
			SELECT pg_notify($12, g) FROM (SELECT DISTINCT worker_group AS g FROM ins WHERE state = 'queued') d
		)
		SELECT name, state, worker_group FROM ins, (SELECT count(*) FROM woken) w`,
		pq.Array(wf), pq.Array(names), pq.Array(types), pq.Array(params), pq.Array(states),
		pq.Array(prio), pq.Array(groups), pq.Array(pools), pq.Array(retries), pq.Array(retryMs),
		pq.Array(timeoutMs), q.ch.task)
	if err != nil {
		return nil, fmt.Errorf("create %d task instances: %w", n, err)
	}
	out := make([]string, len(created))
	for i, c := range created {
		out[i] = c.Name
	}
	return out, nil
}

// TaskListByWorkflow returns every task instance of a workflow instance, by id.
func (q *Queries) TaskListByWorkflow(ctx context.Context, workflowID int64) ([]TaskInstance, error) {
	var tasks []TaskInstance
	if err := sqlxSelect(ctx, q, &tasks, `SELECT `+taskColumns+` FROM task_instance
		WHERE workflow_instance_id = $1 ORDER BY id`, workflowID); err != nil {
		return nil, fmt.Errorf("list tasks of workflow instance %d: %w", workflowID, err)
	}
	return tasks, nil
}

// TaskGet returns one task instance.
func (q *Queries) TaskGet(ctx context.Context, id int64) (*TaskInstance, error) {
	var t TaskInstance
	if err := sqlxGet(ctx, q, &t, `SELECT `+taskColumns+` FROM task_instance WHERE id = $1`, id); err != nil {
		return nil, fmt.Errorf("get task instance %d: %w", id, err)
	}
	return &t, nil
}

// TaskListRunningOnWorker returns the tokens of the tasks running under worker. A worker
// compares them with the attempts it really runs: a claim whose reply was lost (the database
// restarted mid-statement) leaves tasks running under its name that it never started.
func (q *Queries) TaskListRunningOnWorker(ctx context.Context, worker string) ([]Token, error) {
	var rows []struct {
		ID      int64 `db:"id"`
		Attempt int   `db:"attempt"`
	}
	if err := sqlxSelect(ctx, q, &rows, `SELECT id, attempt FROM task_instance
		WHERE worker_id = $1 AND state = 'running'`, worker); err != nil {
		return nil, fmt.Errorf("list tasks running on %s: %w", worker, err)
	}
	toks := make([]Token, len(rows))
	for i, r := range rows {
		toks[i] = Token{TaskID: r.ID, WorkerID: worker, Attempt: r.Attempt}
	}
	return toks, nil
}

// TaskListByWorkflows returns every task instance of the given workflow instances, by id.
func (q *Queries) TaskListByWorkflows(ctx context.Context, workflowIDs []int64) ([]TaskInstance, error) {
	var tasks []TaskInstance
	if err := sqlxSelect(ctx, q, &tasks, `SELECT `+taskColumns+` FROM task_instance
		WHERE workflow_instance_id = ANY($1) ORDER BY id`, pq.Array(workflowIDs)); err != nil {
		return nil, fmt.Errorf("list tasks of %d workflow instances: %w", len(workflowIDs), err)
	}
	return tasks, nil
}
