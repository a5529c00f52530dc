package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// fields returns where Scan puts each column of a task_instance row as the statements that
// return TaskInstance give it, in their order; the intervals come as milliseconds.
func (t *TaskInstance) fields() []any {
	return []any{&t.ID, &t.WorkflowInstanceID, &t.Name, &t.Type, &t.Params, &t.State, &t.Priority, &t.WorkerGroup,
		&t.Pool, &t.WorkerID, &t.Attempt, &t.Retries, &t.MaxRetries, &t.RetryIntervalMs, &t.TimeoutMs,
		&t.NotBefore, &t.FailoverCount, &t.KillRequested, &t.Output, &t.Error, &t.ExitCode, &t.QueuedAt, &t.StartedAt, &t.EndedAt, &t.Usage,
		&t.PausedStep, &t.ItemCount, &t.EndReason, &t.OutputTruncated}
}

// queryTasks runs a hot statement that returns TaskInstance's columns, at most limit rows
// (which size the result, up to a page of 1,000).
func queryTasks(ctx context.Context, q *Queries, limit int, query string, args ...any) ([]TaskInstance, error) {
	return queryRows(ctx, q, limit, (*TaskInstance).fields, query, args...)
}

// queryRows runs a hot statement and scans each row into a T through fields, by hand: sqlx's
// reflection over every field of a TaskInstance would be a large share of what a worker
// spends reading the rows it claims. capHint, up to 1,000, sizes the result.
func queryRows[T any](ctx context.Context, q *Queries, capHint int, fields func(*T) []any, query string, args ...any) ([]T, error) {
	rows, err := queryHot(ctx, q, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]T, 0, max(0, min(capHint, 1000)))
	for rows.Next() {
		out = append(out, *new(T))
		if err := rows.Scan(fields(&out[len(out)-1])...); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}

// claimSQL is TaskClaimQueuedShare's statement: $1 the worker, $2 its groups, $3 the limit (its
// free slots), and its share's facts: $4 and $5 the other workers of the groups and their slots,
// $6 the worker's own slots, $7 how long a task stays fresh, in milliseconds (see Share).
//
// Its first part, share, says how many tasks the claim takes (n). With no other worker, with
// fewer than two claimable tasks (one task is no burst: the first to look takes it), or when
// one of the first two of a group's queue has waited longer than fresh (a backlog, or a share
// that its worker did not come for), it is $3: the claim is what it was before shares, and
// nothing more is read. Otherwise the worker takes its share of the burst: every worker of the groups with a
// free slot is to end with as many tasks running per slot, so its share is its slots' part of
// the claimable tasks and of those running on these workers, less what runs here already; but
// at least what the others' free slots cannot take and every task that has waited longer than
// fresh, and $3 when the claimable tasks fill every free slot. Both counts are bounded: the claimable tasks are
// counted up to the free slots of all ($3 and the others'), at most 1,000 (a burst larger
// than that is claimed as a backlog is), the running ones of each worker through
// task_instance_running. The share's reads lock nothing.
//
// The candidates are each of the worker's groups' queued tasks without a pool in claim order,
// up to n a group, straight off task_instance_queued (one "worker_group = ANY" would read
// every queued row of the groups to sort them), and those of every pool with room, up to its
// room; each is locked as it is read, skipping those another claimer holds, so that claimers
// at once take the next tasks down the queue instead of all finding the same ones taken. The
// best n of them become running under worker $1 with their next attempt, and each gets its
// task_attempt row. The columns returned are those TaskInstance.fields scans, in its order
// (TestStatementColumnsMatchTheirStructs).
//
// A task whose kill was requested is never claimed. No statement queues one (a requeue, retry
// or hand-back of such a task ends it killed, and so does migration 00012 for those older code
// queued), so the condition drops no row the index gives and needs no place in it: it guards
// against a row written otherwise, which would start only to be killed.
const claimSQL = `
		WITH open_pool AS MATERIALIZED (
			SELECT p.name, p.max_running - p.running AS free FROM task_pool p
			WHERE (p.max_running IS NULL OR p.running < p.max_running)
			  -- A scalar subquery rather than EXISTS, which the planner may turn into a scan
			  -- of every queued task; this probes the pool's own index once per pool.
			  AND (SELECT true FROM task_instance t
			       WHERE t.pool = p.name AND t.state = 'queued' AND t.worker_group = ANY($2)
			         AND (t.not_before IS NULL OR t.not_before <= now()) AND NOT t.kill_requested
			       LIMIT 1)
			ORDER BY p.name
			FOR UPDATE OF p
		), share AS MATERIALIZED (
			SELECT CASE
				WHEN cardinality($4::text[]) = 0 THEN $3::int
				WHEN (SELECT count(*) < 2 OR bool_or(head.stale) FROM unnest($2::text[]) AS g(name) CROSS JOIN LATERAL (
						SELECT greatest(t.queued_at, t.not_before) <= now() - $7::bigint * interval '1 millisecond' AS stale
						FROM task_instance t
						WHERE t.state = 'queued' AND t.worker_group = g.name
						  AND (t.pool IS NULL OR t.pool IN (SELECT name FROM open_pool))
						  AND (t.not_before IS NULL OR t.not_before <= now()) AND NOT t.kill_requested
						ORDER BY t.priority DESC, t.id
						LIMIT 2) head)
				THEN $3::int
				ELSE (
					SELECT least($3::int, CASE WHEN queue.claimable >= least($3::int + peer.free, 1000) THEN $3::int
						ELSE greatest(
							ceil((queue.claimable + peer.running + mine.running) * $6::int
								/ ($6::int + peer.slots)::numeric)::int - mine.running,
							queue.claimable - peer.free, queue.stale, 0) END)
					FROM (SELECT count(*)::int AS running FROM task_instance t
					      WHERE t.state = 'running' AND t.worker_id = $1) mine
					CROSS JOIN (
						SELECT coalesce(sum(p.slots) FILTER (WHERE r.n < p.slots), 0)::int AS slots,
							coalesce(sum(r.n) FILTER (WHERE r.n < p.slots), 0)::int AS running,
							coalesce(sum(greatest(p.slots - r.n, 0)), 0)::int AS free
						FROM unnest($4::text[], $5::int[]) AS p(id, slots) CROSS JOIN LATERAL (
							SELECT count(*)::int AS n FROM task_instance t
							WHERE t.state = 'running' AND t.worker_id = p.id) r) peer
					CROSS JOIN LATERAL (
						SELECT count(*)::int AS claimable, (count(*) FILTER (WHERE q.stale))::int AS stale FROM (
							SELECT q.stale FROM unnest($2::text[]) AS g(name) CROSS JOIN LATERAL (
								SELECT greatest(t.queued_at, t.not_before) <= now() - $7::bigint * interval '1 millisecond' AS stale
								FROM task_instance t
								WHERE t.state = 'queued' AND t.worker_group = g.name
								  AND (t.pool IS NULL OR t.pool IN (SELECT name FROM open_pool))
								  AND (t.not_before IS NULL OR t.not_before <= now()) AND NOT t.kill_requested
								ORDER BY t.priority DESC, t.id
								LIMIT least($3::int + peer.free, 1000)) q
							LIMIT least($3::int + peer.free, 1000)) q) queue)
			END AS n
		), candidate AS (
			SELECT c.id, c.priority FROM share CROSS JOIN unnest($2::text[]) AS g(name) CROSS JOIN LATERAL (
				SELECT t.id, t.priority FROM task_instance t
				WHERE t.state = 'queued' AND t.worker_group = g.name AND t.pool IS NULL
				  AND (t.not_before IS NULL OR t.not_before <= now()) AND NOT t.kill_requested
				ORDER BY t.priority DESC, t.id
				LIMIT share.n
				FOR UPDATE OF t SKIP LOCKED) c
			UNION ALL
			SELECT c.id, c.priority FROM share CROSS JOIN open_pool op CROSS JOIN LATERAL (
				SELECT t.id, t.priority FROM task_instance t
				WHERE t.pool = op.name AND t.state = 'queued' AND t.worker_group = ANY($2)
				  AND (t.not_before IS NULL OR t.not_before <= now()) AND NOT t.kill_requested
				ORDER BY t.priority DESC, t.id
				LIMIT least(op.free, share.n)
				FOR UPDATE OF t SKIP LOCKED) c
		), locked AS (
			-- The best n of the groups' and pools' candidates; the others are let go at commit.
			SELECT id FROM candidate ORDER BY priority DESC, id LIMIT (SELECT n FROM share)
		), claimed AS (
			UPDATE task_instance t
			SET state = 'running', worker_id = $1, attempt = t.attempt + 1, started_at = now(),
			    ended_at = NULL, error = NULL, exit_code = NULL, not_before = NULL
			-- By primary key: a join with locked may be planned as a scan of the whole table.
			WHERE t.id = ANY(ARRAY(SELECT id FROM locked))
			RETURNING t.*
		), opened AS (
			INSERT INTO task_attempt (task_instance_id, attempt, worker_id, started_at)
			SELECT id, attempt, worker_id, started_at FROM claimed
		)
		SELECT id, workflow_instance_id, name, type, params, state, priority, worker_group,
			pool, worker_id, attempt, retries, max_retries,
			(extract(epoch FROM retry_interval) * 1000)::bigint AS retry_interval_ms,
			(extract(epoch FROM timeout) * 1000)::bigint AS timeout_ms,
			not_before, failover_count, kill_requested, output, error, exit_code, queued_at, started_at, ended_at, usage,
			paused_step, item_count, end_reason, output_truncated
		FROM claimed ORDER BY priority DESC, id`

// claimUnpooledSQL is TaskClaimQueuedUnpooledShare's statement: claimSQL without its pools.
const claimUnpooledSQL = `
		WITH share AS MATERIALIZED (
			SELECT CASE
				WHEN cardinality($4::text[]) = 0 THEN $3::int
				WHEN (SELECT count(*) < 2 OR bool_or(head.stale) FROM unnest($2::text[]) AS g(name) CROSS JOIN LATERAL (
						SELECT greatest(t.queued_at, t.not_before) <= now() - $7::bigint * interval '1 millisecond' AS stale
						FROM task_instance t
						WHERE t.state = 'queued' AND t.worker_group = g.name AND t.pool IS NULL
						  AND (t.not_before IS NULL OR t.not_before <= now()) AND NOT t.kill_requested
						ORDER BY t.priority DESC, t.id
						LIMIT 2) head)
				THEN $3::int
				ELSE (
					SELECT least($3::int, CASE WHEN queue.claimable >= least($3::int + peer.free, 1000) THEN $3::int
						ELSE greatest(
							ceil((queue.claimable + peer.running + mine.running) * $6::int
								/ ($6::int + peer.slots)::numeric)::int - mine.running,
							queue.claimable - peer.free, queue.stale, 0) END)
					FROM (SELECT count(*)::int AS running FROM task_instance t
					      WHERE t.state = 'running' AND t.worker_id = $1) mine
					CROSS JOIN (
						SELECT coalesce(sum(p.slots) FILTER (WHERE r.n < p.slots), 0)::int AS slots,
							coalesce(sum(r.n) FILTER (WHERE r.n < p.slots), 0)::int AS running,
							coalesce(sum(greatest(p.slots - r.n, 0)), 0)::int AS free
						FROM unnest($4::text[], $5::int[]) AS p(id, slots) CROSS JOIN LATERAL (
							SELECT count(*)::int AS n FROM task_instance t
							WHERE t.state = 'running' AND t.worker_id = p.id) r) peer
					CROSS JOIN LATERAL (
						SELECT count(*)::int AS claimable, (count(*) FILTER (WHERE q.stale))::int AS stale FROM (
							SELECT q.stale FROM unnest($2::text[]) AS g(name) CROSS JOIN LATERAL (
								SELECT greatest(t.queued_at, t.not_before) <= now() - $7::bigint * interval '1 millisecond' AS stale
								FROM task_instance t
								WHERE t.state = 'queued' AND t.worker_group = g.name AND t.pool IS NULL
								  AND (t.not_before IS NULL OR t.not_before <= now()) AND NOT t.kill_requested
								ORDER BY t.priority DESC, t.id
								LIMIT least($3::int + peer.free, 1000)) q
							LIMIT least($3::int + peer.free, 1000)) q) queue)
			END AS n
		), candidate AS (
			SELECT c.id, c.priority FROM share CROSS JOIN unnest($2::text[]) AS g(name) CROSS JOIN LATERAL (
				SELECT t.id, t.priority FROM task_instance t
				WHERE t.state = 'queued' AND t.worker_group = g.name AND t.pool IS NULL
				  AND (t.not_before IS NULL OR t.not_before <= now()) AND NOT t.kill_requested
				ORDER BY t.priority DESC, t.id
				LIMIT share.n
				FOR UPDATE OF t SKIP LOCKED) c
		), locked AS (
			SELECT id FROM candidate ORDER BY priority DESC, id LIMIT (SELECT n FROM share)
		), claimed AS (
			UPDATE task_instance t
			SET state = 'running', worker_id = $1, attempt = t.attempt + 1, started_at = now(),
			    ended_at = NULL, error = NULL, exit_code = NULL, not_before = NULL
			-- By primary key: a join with locked may be planned as a scan of the whole table.
			WHERE t.id = ANY(ARRAY(SELECT id FROM locked))
			RETURNING t.*
		), opened AS (
			INSERT INTO task_attempt (task_instance_id, attempt, worker_id, started_at)
			SELECT id, attempt, worker_id, started_at FROM claimed
		)
		SELECT id, workflow_instance_id, name, type, params, state, priority, worker_group,
			pool, worker_id, attempt, retries, max_retries,
			(extract(epoch FROM retry_interval) * 1000)::bigint AS retry_interval_ms,
			(extract(epoch FROM timeout) * 1000)::bigint AS timeout_ms,
			not_before, failover_count, kill_requested, output, error, exit_code, queued_at, started_at, ended_at, usage,
			paused_step, item_count, end_reason, output_truncated
		FROM claimed ORDER BY priority DESC, id`

// Share is what a worker's claim needs to take no more than its share of a burst of tasks
// while other workers of its groups have free slots, rather than every task its free slots
// can hold while the others idle. The zero Share claims as a worker alone in its groups.
//
// The others are known from the registry (their live sessions, their slots); what runs on
// each, from PostgreSQL. A worker listed that is gone, or that does not come for its share,
// holds its share back for Fresh at most: a task that became claimable longer ago is claimed
// by whichever worker looks. So Fresh bounds the delay a burst's spread can add, and the
// claim of a backlog stays what it was.
type Share struct {
	// Slots is the claiming worker's own slots.
	Slots int
	// Peers are the other live workers that serve every one of the claim's groups (so that
	// they can take any task left to them): their slots, by worker id.
	Peers map[string]int
	// Fresh is how long a task, once claimable, counts as part of a burst.
	Fresh time.Duration
}

// args are the share's parameters of the claims, $4-$7.
func (s Share) args() []any {
	ids, slots := make([]string, 0, len(s.Peers)), make([]int64, 0, len(s.Peers))
	for id, n := range s.Peers {
		if n > 0 {
			ids, slots = append(ids, id), append(slots, int64(n))
		}
	}
	if s.Slots <= 0 {
		ids, slots = ids[:0], slots[:0]
	}
	return []any{pq.Array(ids), pq.Array(slots), s.Slots, s.Fresh.Milliseconds()}
}

// TaskClaimQueuedUnpooled is TaskClaimQueued for a database where no task names a pool
// (TaskPoolsExist says so): it claims the tasks without a pool only, with a statement that has
// neither the pools' CTE nor their lateral probe, and so is cheaper for PostgreSQL to plan and
// to run.
func (q *Queries) TaskClaimQueuedUnpooled(ctx context.Context, worker string, groups []string, limit int) ([]TaskInstance, error) {
	return q.TaskClaimQueuedUnpooledShare(ctx, worker, groups, limit, Share{})
}

// TaskClaimQueuedUnpooledShare is TaskClaimQueuedUnpooled taking no more than the worker's
// share (see TaskClaimQueuedShare).
func (q *Queries) TaskClaimQueuedUnpooledShare(ctx context.Context, worker string, groups []string, limit int, share Share) ([]TaskInstance, error) {
	return q.claim(ctx, claimUnpooledSQL, worker, groups, limit, share)
}

// claim runs a claim statement.
func (q *Queries) claim(ctx context.Context, query, worker string, groups []string, limit int, share Share) ([]TaskInstance, error) {
	tasks, err := queryTasks(ctx, q, limit, query, append([]any{worker, pq.Array(groups), limit}, share.args()...)...)
	if err != nil {
		return nil, fmt.Errorf("claim tasks for %s in groups %v: %w", worker, groups, err)
	}
	return tasks, nil
}

// TaskPoolsExist says whether any pool is known: a task instance named it, or a master's
// config limits it. Rows of task_pool are never deleted, so once true it stays true.
func (q *Queries) TaskPoolsExist(ctx context.Context) (bool, error) {
	var ok bool
	if err := sqlxGet(ctx, q, &ok, `SELECT EXISTS (SELECT 1 FROM task_pool)`); err != nil {
		return false, fmt.Errorf("look for task pools: %w", err)
	}
	return ok, nil
}

// TaskClaimQueued claims up to limit queued tasks of the given groups for worker, highest priority
// first, in one statement: the rows are locked with SKIP LOCKED so concurrent claimers never
// wait for or take the same task, each claimed task's attempt grows by one (the new fencing
// token), and a task_attempt row is opened for it. It never claims a task whose kill was
// requested, so no claimed task comes back with KillRequested set.
//
// Tasks in a pool are claimed only while the pool has room, across all workers: the statement
// first locks the row of every pool with room that has claimable tasks here, in name order,
// and holds the locks until it commits. The row's running count is exact (triggers keep it in
// the same statement as each change of state, see 00003_llm_and_pools.sql), so claims in one
// pool are serialized and each sees the count the last one left; a full pool's tasks stay
// queued and do not stand in the way of other tasks.
func (q *Queries) TaskClaimQueued(ctx context.Context, worker string, groups []string, limit int) ([]TaskInstance, error) {
	return q.TaskClaimQueuedShare(ctx, worker, groups, limit, Share{})
}

// TaskClaimQueuedShare is TaskClaimQueued taking no more than the worker's share of a burst
// (see Share and claimSQL): of 4 tasks queued at once for 2 idle workers of 4 slots each,
// each takes 2; of 6 for 3 such workers, each 2, whichever claims first and whether their
// claims run at once or one after the other. A claim that takes less than its free slots
// leaves the rest queued for the others, woken by the same notification; what none of them
// took is claimed at a later look once it has waited Fresh. The tasks of a pool with room count
// among the claimable ones however little room it has, which can make a share larger, never
// smaller.
func (q *Queries) TaskClaimQueuedShare(ctx context.Context, worker string, groups []string, limit int, share Share) ([]TaskInstance, error) {
	return q.claim(ctx, claimSQL, worker, groups, limit, share)
}

// AttemptResult is what a worker reports at the end of an attempt.
type AttemptResult struct {
	Outcome Outcome
	// Next is the task's next state: terminal, or queued for a retry or a hand-back. A task
	// whose kill was requested is never queued again: queued then means killed.
	Next TaskState
	// Retry counts the attempt against the task's retries and delays the next claim by
	// RetryWait. Hand-backs and interruptions do not count.
	Retry    bool
	Output   *string
	Error    string
	ExitCode *int

	// RetryWait is the wait before the retry (lifecycle.EndOf), stored as the task's
	// not_before; 0 waits the task's retry interval.
	RetryWait time.Duration
	// AttemptUsage is the token usage of this attempt's own model calls (JSON), stored on
	// the attempt; nil for none.
	AttemptUsage json.RawMessage
	// TaskUsage is the token usage of the task's whole result (JSON; for an agent every step,
	// including those an earlier attempt checkpointed), stored on the task; nil keeps what
	// the task has.
	TaskUsage json.RawMessage
	// PausedStep is, with Next TaskWaiting (outcome paused), the agent's wait step the task
	// waits at; WaitFor bounds that wait (0: without end).
	PausedStep string
	WaitFor    time.Duration
	// OutputTruncated marks Output as the first bytes of a longer output (output-overflow:
	// truncate).
	OutputTruncated bool
	// Produces are the assets the task produces (its spec's produces): a success writes an
	// event of each, with its output, in the statement that records it.
	Produces []string
}

// TaskFinishIfRunning ends the attempt held by tok: the task moves to res.Next and the attempt
// row records the outcome, both only if the task is still running under tok. It returns
// ErrTokenRefused when it is not, and then writes nothing. A task whose kill was requested
// (TaskKillIfQueuedOrRunning, WorkflowStopIfActive, a workflow's timeout) that res would put back in the queue, or
// make wait (a paused agent), ends killed instead. The owning master is woken when the task
// reached a terminal state, the workers of its group when it went back to the queue; a task
// that waits wakes no one.
func (q *Queries) TaskFinishIfRunning(ctx context.Context, tok Token, res AttemptResult) error {
	done, err := q.TaskFinishManyIfRunning(ctx, []Finish{{Token: tok, Result: res}})
	if err != nil {
		return err
	}
	if !done[0].Recorded {
		return tok.refusedFinish()
	}
	return nil
}

// refusedFinish is the error of a finish that tok no longer holds the task for.
func (tok Token) refusedFinish() error {
	return fmt.Errorf("finish task %d attempt %d of %s: %w", tok.TaskID, tok.Attempt, tok.WorkerID, ErrTokenRefused)
}

// Refused is the error a batched finish (TaskFinishManyIfRunning) stands for when done is false:
// the one TaskFinishIfRunning returns.
func (f Finish) Refused() error { return f.Token.refusedFinish() }

// Finish is one attempt's end, for TaskFinishManyIfRunning.
type Finish struct {
	Token  Token
	Result AttemptResult
}

// wakeIDsPerPayload keeps a master wake-up's payload, a comma-separated list of workflow
// instance ids, under NOTIFY's 8000-byte limit whatever the ids' size (at most 20 bytes each).
const wakeIDsPerPayload = 300

// finishManySQL is TaskFinishManyIfRunning's statement: the attempts' columns as arrays ($1-$15),
// and $16 the assets each task produces, a JSON array (NULL for a task that produces none).
//
// Its CTE pools locks, in name order, the pools of the tasks it ends, before any task row, in
// the order the claim takes them: the row trigger that keeps task_pool.running (migration
// 00008) would otherwise lock them in the order the statement changes its tasks, and two such
// statements could wait for each other. The task update waits for those locks by its
// condition "(SELECT count(*) FROM pools) >= 0", which runs the CTE first.
// TaskRequeueIfRunningOnWorker does the same.
const finishManySQL = `
		WITH x AS (
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::bool[], $6::text[],
				$7::text[], $8::int[], $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::bigint[], $15::bool[],
				$16::text[])
				AS x(id, worker, attempt, next, retry, output, err, exit_code, outcome, attempt_usage, task_usage,
					paused_step, wait_ms, retry_ms, truncated, produces)
		), pools AS (
			SELECT p.name FROM task_pool p WHERE p.name = ANY(ARRAY(
				-- One probe of the primary key per task, whatever the statistics say (see
				-- listByWorkflowsSQL); none while the database knows no pool.
				SELECT ti.pool FROM unnest($1::bigint[]) AS y(id) CROSS JOIN LATERAL (
					SELECT ti.pool FROM task_instance ti WHERE ti.id = y.id OFFSET 0) ti
				WHERE EXISTS (SELECT 1 FROM task_pool) AND ti.pool IS NOT NULL))
			ORDER BY p.name
			FOR UPDATE
		), t AS (
			-- A task whose kill was requested (by an operator, or by its workflow's stop or
			-- timeout) never goes back to the queue, nor waits: where the attempt's end would
			-- requeue it (a retry, a hand-back, an interruption) or pause it (an agent at a
			-- wait step) it ends killed instead, the attempt keeping its own outcome. Queued,
			-- it would wait for ever: the claim skips it (claimSQL). Its retry is not counted:
			-- none is taken. A paused agent waits from now, at its wait step, until its
			-- wait_until if the step has a timeout. A task killed keeps the reason its kill
			-- request gave (end_reason), which its error says: the worker knows only that
			-- the kill was asked for; a last attempt that timed out ends it for its timeout.
			UPDATE task_instance ti SET
				state = CASE WHEN x.next IN ('queued', 'waiting') AND ti.kill_requested THEN 'killed' ELSE x.next END,
				retries = ti.retries + CASE WHEN x.retry AND NOT ti.kill_requested THEN 1 ELSE 0 END,
				not_before = CASE WHEN x.retry AND NOT ti.kill_requested
					THEN now() + coalesce(x.retry_ms * interval '1 millisecond', ti.retry_interval) END,
				output = CASE WHEN x.next IN ('queued', 'waiting') THEN ti.output ELSE x.output END,
				output_truncated = CASE WHEN x.next IN ('queued', 'waiting') THEN ti.output_truncated ELSE x.truncated END,
				error = CASE WHEN (x.next IN ('queued', 'waiting') AND ti.kill_requested) OR x.next = 'killed'
					THEN killed_error(ti.end_reason)
					WHEN x.next = 'waiting' THEN NULL ELSE x.err END,
				end_reason = CASE WHEN (x.next IN ('queued', 'waiting') AND ti.kill_requested) OR x.next = 'killed'
					THEN ti.end_reason
					WHEN x.next = 'failed' AND x.outcome = 'timed_out' THEN 'timeout' END,
				exit_code = x.exit_code,
				started_at = CASE WHEN x.next = 'waiting' AND NOT ti.kill_requested THEN now() ELSE ti.started_at END,
				ended_at = CASE WHEN x.next IN ('queued', 'waiting') AND NOT ti.kill_requested THEN NULL ELSE now() END,
				queued_at = CASE WHEN x.next = 'queued' AND NOT ti.kill_requested THEN now() ELSE ti.queued_at END,
				usage = COALESCE(x.task_usage::jsonb, ti.usage),
				paused_step = CASE WHEN x.next = 'waiting' AND NOT ti.kill_requested THEN x.paused_step END,
				wait_until = CASE WHEN x.next = 'waiting' AND NOT ti.kill_requested
					THEN now() + x.wait_ms * interval '1 millisecond' END
			FROM x
			-- The token's worker and attempt compared with IS NOT DISTINCT FROM (x.worker is
			-- never NULL, and a running task always has a worker): as equalities, the generic
			-- plan would join x with the running tasks on worker_id, one value for a whole
			-- batch, and compare every result with every running task of the worker.
			WHERE ti.id = x.id AND ti.worker_id IS NOT DISTINCT FROM x.worker AND ti.attempt IS NOT DISTINCT FROM x.attempt
			  AND ti.state = 'running' AND (SELECT count(*) FROM pools) >= 0
			RETURNING ti.id, ti.attempt, ti.workflow_instance_id, ti.name, ti.state, ti.worker_group,
				x.outcome, x.exit_code, x.err, x.attempt_usage,
				-- What a task that produces assets needs for their events; NULL for any other.
				CASE WHEN ti.state = 'succeeded' THEN x.produces END AS produces,
				CASE WHEN ti.state = 'succeeded' AND x.produces IS NOT NULL THEN x.output END AS output,
				x.truncated
		), a AS (
			UPDATE task_attempt ta SET ended_at = now(), outcome = t.outcome, exit_code = t.exit_code,
				error = t.err, usage = t.attempt_usage::jsonb
			FROM t WHERE ta.task_instance_id = t.id AND ta.attempt = t.attempt
		), events AS (
			-- The asset events of the tasks that succeeded and produce assets (migration
			-- 00036), each queued for the consumers of its asset: none, and no row read, for
			-- any other task.
			INSERT INTO asset_event (asset, task_instance_id, workflow_instance_id, output, output_truncated)
			SELECT p.asset, t.id, t.workflow_instance_id, left(t.output, 65536), t.truncated OR length(t.output) > 65536
			FROM t CROSS JOIN LATERAL jsonb_array_elements_text(t.produces::jsonb) AS p(asset)
			WHERE t.produces IS NOT NULL
			RETURNING id, asset
		), queued AS (
			INSERT INTO asset_pending (consumer, asset, event_id)
			SELECT c.workflow_name, e.asset, e.id FROM events e
			JOIN asset_consumer c ON c.assets @> ARRAY[e.asset]
		), ending AS (
			-- The instances these ends end by themselves (migration 00007): of one task, which
			-- is terminal now, driven by no master, without a cap, a key or a timeout, started
			-- by no task (a child's end ends its parent task: a master's, TaskEndIfChildEnded). SKIP LOCKED:
			-- whoever holds one (a stop, a master) locked it before its tasks, and waiting here
			-- for it while holding the task rows could deadlock. A skipped one is the masters'.
			-- One probe of the primary key per task (a lateral subquery that locks is never
			-- flattened into a join), whatever the statistics say: tested with IS NOT DISTINCT
			-- FROM, the conditions match no other index (see lockUnownedSQL), such as
			-- workflow_instance_state_id, whose running entries (a whole backlog) a bitmap
			-- scan would read. Each carries its task's end, for ended.
			SELECT w.id, y.state, y.name FROM t y
			CROSS JOIN LATERAL (
				SELECT w.id FROM workflow_instance w
				WHERE w.id = y.workflow_instance_id AND w.owner IS NOT DISTINCT FROM NULL
				  AND w.state IS NOT DISTINCT FROM 'running' AND w.task_count IS NOT DISTINCT FROM 1
				  AND w.max_active IS NOT DISTINCT FROM NULL AND w.concurrency_key IS NOT DISTINCT FROM NULL
				  AND w.has_timeout IS NOT DISTINCT FROM false
				  AND w.parent_task_instance_id IS NOT DISTINCT FROM NULL
				FOR NO KEY UPDATE SKIP LOCKED) w
			WHERE y.state IN ('succeeded', 'failed', 'killed')
		), ended AS (
			-- The end lifecycle.Decide gives a workflow whose tasks are all terminal. Joined
			-- with ending alone, by primary key: a join with t as well is planned as a loop
			-- over t that reads every ended instance again for each task (an index scan of
			-- id = ANY over all the batch's ids, once per task).
			UPDATE workflow_instance w SET
				state = CASE WHEN e.state = 'succeeded' THEN 'succeeded' ELSE 'failed' END,
				error = CASE WHEN e.state <> 'succeeded' THEN 'tasks did not succeed: ' || e.name || ' ' || e.state END,
				ended_at = now()
			FROM ending e
			WHERE w.id = e.id
			RETURNING w.id, w.state
		)
		-- The tasks, then the instances they ended (id NULL), paired up by the caller: a join
		-- of the two is planned as a nested loop, every task against every instance.
		SELECT id, attempt, workflow_instance_id, state, worker_group, NULL AS workflow_state FROM t
		UNION ALL
		SELECT NULL, NULL, id, NULL, NULL, state FROM ended`

// TaskFinishManyIfRunning is TaskFinishIfRunning for many attempts in one statement, the worker's
// batching completer's write: each task moves to its result's next state, and its attempt row
// records the outcome, only if the task still runs under that attempt's token. out[i] says
// what became of fins[i]: not recorded is a refused token (nothing written for it). A
// kill-requested task is never requeued nor paused: it ends killed, as in TaskFinishIfRunning. A task
// whose end ends its workflow instance (one task, no master driving it, no cap, key or timeout)
// ends the instance in the same statement, unless a workflow task started it (a master ends
// a child, and its parent task with it). Once it has committed, the masters get one wake-up
// per 300 workflow instances whose tasks ended (those it ended need none), the workers one per
// group whose tasks went back to the queue.
func (q *Queries) TaskFinishManyIfRunning(ctx context.Context, fins []Finish) (out []Finished, err error) {
	n := len(fins)
	if n == 0 {
		return nil, nil
	}
	ids, attempts, exits := make([]int64, n), make([]int64, n), make([]*int64, n)
	workers, nexts, outcomes := make([]string, n), make([]string, n), make([]string, n)
	outputs, errs, attemptUsage, taskUsage := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	retry, truncated := make([]bool, n), make([]bool, n)
	paused, waitMs, retryMs := make([]*string, n), make([]*int64, n), make([]*int64, n)
	produces := make([]*string, n)
	for i, f := range fins {
		r := &fins[i].Result
		if len(r.Produces) > 0 && r.Next == TaskSucceeded {
			raw, err := json.Marshal(r.Produces)
			if err != nil {
				return nil, fmt.Errorf("assets of task %d: %w", f.Token.TaskID, err)
			}
			text := string(raw)
			produces[i] = &text
		}
		if r.RetryWait > 0 {
			ms := r.RetryWait.Milliseconds()
			retryMs[i] = &ms
		}
		if r.PausedStep != "" {
			paused[i] = &r.PausedStep
		}
		if r.WaitFor > 0 {
			ms := r.WaitFor.Milliseconds()
			waitMs[i] = &ms
		}
		ids[i], workers[i], attempts[i] = f.Token.TaskID, f.Token.WorkerID, int64(f.Token.Attempt)
		nexts[i], outcomes[i], retry[i], outputs[i] = string(r.Next), string(r.Outcome), r.Retry, r.Output
		truncated[i] = r.OutputTruncated
		if r.Error != "" {
			errs[i] = &r.Error
		}
		if r.ExitCode != nil {
			c := int64(*r.ExitCode)
			exits[i] = &c
		}
		attemptUsage[i], taskUsage[i] = jsonText(r.AttemptUsage), jsonText(r.TaskUsage)
	}
	recorded, err := queryRows(ctx, q, 2*n, (*finishRow).fields, finishManySQL, pq.Array(ids), pq.Array(workers), pq.Array(attempts), pq.Array(nexts),
		pq.Array(retry), pq.Array(outputs), pq.Array(errs), pq.Array(exits), pq.Array(outcomes),
		pq.Array(attemptUsage), pq.Array(taskUsage), pq.Array(paused), pq.Array(waitMs), pq.Array(retryMs), pq.Array(truncated),
		pq.Array(produces))
	if err != nil {
		if n == 1 {
			return nil, fmt.Errorf("finish task %d attempt %d: %w", fins[0].Token.TaskID, fins[0].Token.Attempt, err)
		}
		return nil, fmt.Errorf("finish %d task attempts: %w", n, err)
	}
	type key struct {
		id      int64
		attempt int
	}
	endedWith := map[int64]WorkflowState{}
	for _, r := range recorded {
		if r.ID == nil && r.Ended != nil {
			endedWith[r.Workflow] = *r.Ended
		}
	}
	got := make(map[key]Finished, len(recorded))
	ended, requeued := map[int64]struct{}{}, map[string]bool{}
	for _, r := range recorded {
		if r.ID == nil {
			continue // an instance's row, read above
		}
		f := Finished{Recorded: true, Workflow: endedWith[r.Workflow]}
		switch {
		case f.Workflow != "":
		case *r.State == string(TaskWaiting):
			// A paused agent: nothing for a master or a worker to do until it is signalled.
		case *r.State == string(TaskQueued):
			if !requeued[*r.Group] {
				requeued[*r.Group] = true
				q.wake(q.ch.task, *r.Group)
			}
		default:
			ended[r.Workflow] = struct{}{}
		}
		got[key{*r.ID, *r.Attempt}] = f
	}
	q.wakeEnded(ended)
	out = make([]Finished, n)
	produced := false
	for i, f := range fins {
		out[i] = got[key{f.Token.TaskID, f.Token.Attempt}]
		produced = produced || (out[i].Recorded && produces[i] != nil)
	}
	if produced {
		q.wake(q.ch.master, WakeupAssets)
	}
	return out, nil
}

// finishRow is a row of finishManySQL: a task recorded, or (ID NULL) an instance ended.
type finishRow struct {
	ID       *int64
	Attempt  *int
	Workflow int64
	State    *string
	Group    *string
	Ended    *WorkflowState
}

// fields returns where Scan puts each column of a finishManySQL row.
func (r *finishRow) fields() []any {
	return []any{&r.ID, &r.Attempt, &r.Workflow, &r.State, &r.Group, &r.Ended}
}

// Finished is what TaskFinishManyIfRunning did with one Finish.
type Finished struct {
	// Recorded is false when the token was refused: nothing was written for it.
	Recorded bool
	// Workflow is the state the task's end ended its workflow instance in, "" when it did not
	// end it (a master decides what follows).
	Workflow WorkflowState
}

// jsonText passes JSON as an element of a text[] parameter cast to jsonb, and nothing as NULL.
func jsonText(raw json.RawMessage) *string {
	if len(raw) == 0 {
		return nil
	}
	s := string(raw)
	return &s
}

// NewTask is a task instance created when its dependencies are met: by the master, or for a
// root by the submission (WorkflowCreate).
type NewTask struct {
	WorkflowInstanceID int64
	Name               string
	Type               string
	Params             json.RawMessage
	// State is TaskQueued, or TaskWaiting for a wait task; TaskSkipped for a task that does not run (its trigger or its
	// condition said so); or TaskFailed for one whose condition could not be decided, with
	// Error saying why (TaskCreateMany only: a root is always queued).
	State         TaskState
	Priority      int
	Group         string
	Pool          string
	MaxRetries    int
	RetryInterval time.Duration
	Timeout       time.Duration
	Error         string
	// EndReason is why a task created skipped does not run: EndUpstream or EndCondition
	// (TaskCreateMany only).
	EndReason EndReason
	// Output is the output of a task created succeeded: a for-each task with no items (TaskCreateMany only).
	Output *string
	// Items are the items of the parent of a for-each task's items, created waiting, or
	// succeeded when there are none; nil for any other task (TaskCreateMany only). The parent
	// records how many there are and keeps them, for the items max-parallel holds back.
	Items []string
}

// insertManySQL is TaskCreateMany's statement: $1-$11 the new rows' columns, as arrays
// (taskArrays), $12 their errors and $13 their outputs (NULL for none), $14 the items of a
// for-each task's parent as JSON arrays and $15 how many (NULL for every other task), $16
// their end reasons (NULL for none). The
// roots of createSQL are inserted from the first eleven columns the same way; a root has none
// of the others.
const insertManySQL = `
		INSERT INTO task_instance (workflow_instance_id, name, type, params, state, priority,
			worker_group, pool, max_retries, retry_interval, timeout, error, output, items, item_count,
			started_at, wait_until, ended_at, end_reason)
		SELECT w, nm, ty, p::jsonb, st, pr, g, pl, rt, rm * interval '1 millisecond',
			tm * interval '1 millisecond', er, o, its::jsonb, ic, CASE WHEN st = 'waiting' THEN now() END,
			CASE WHEN st = 'waiting' THEN now() + tm * interval '1 millisecond' END,
			CASE WHEN st IN ('skipped', 'failed', 'succeeded') THEN now() END, why::end_reason
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[],
			$7::text[], $8::text[], $9::int[], $10::bigint[], $11::bigint[], $12::text[], $13::text[],
			$14::text[], $15::int[], $16::text[])
			AS x(w, nm, ty, p, st, pr, g, pl, rt, rm, tm, er, o, its, ic, why)
		ON CONFLICT (workflow_instance_id, name) DO NOTHING
		RETURNING name, state, worker_group`

// TaskCreateMany creates task instances in one statement. A task that already exists (same
// workflow instance and name) is left as it is, so a master that advances a workflow twice, or
// a second master after a failover, creates nothing twice. It returns the names created and
// wakes the workers of every group that got queued tasks.
func (q *Queries) TaskCreateMany(ctx context.Context, tasks []NewTask) ([]string, error) {
	if len(tasks) == 0 {
		return nil, nil
	}
	var created []struct {
		Name  string `db:"name"`
		State string `db:"state"`
		Group string `db:"worker_group"`
	}
	errs, outputs, items := make([]*string, len(tasks)), make([]*string, len(tasks)), make([]*string, len(tasks))
	counts, whys := make([]*int64, len(tasks)), make([]*string, len(tasks))
	for i := range tasks {
		if tasks[i].Error != "" {
			errs[i] = &tasks[i].Error
		}
		if tasks[i].EndReason != "" {
			why := string(tasks[i].EndReason)
			whys[i] = &why
		}
		outputs[i] = tasks[i].Output
		if tasks[i].Items != nil {
			raw, err := json.Marshal(tasks[i].Items)
			if err != nil {
				return nil, fmt.Errorf("items of task %s: %w", tasks[i].Name, err)
			}
			n, text := int64(len(tasks[i].Items)), string(raw)
			items[i], counts[i] = &text, &n
		}
	}
	// Prepared: the master creates tasks in every claim and advance transaction.
	err := selectHot(ctx, q, &created, insertManySQL, append(taskArrays(tasks), pq.Array(errs), pq.Array(outputs),
		pq.Array(items), pq.Array(counts), pq.Array(whys))...)
	if err != nil {
		return nil, fmt.Errorf("create %d task instances: %w", len(tasks), err)
	}
	out := make([]string, len(created))
	woken := map[string]bool{}
	for i, c := range created {
		out[i] = c.Name
		if c.State == string(TaskQueued) && !woken[c.Group] {
			woken[c.Group] = true
			q.wake(q.ch.task, c.Group)
		}
	}
	return out, nil
}

// taskArrays is tasks as the 11 array parameters of insertManySQL, in its order: workflow
// instance, name, type, params, state, priority, group, pool, retries, retry interval and
// timeout (in milliseconds). createSQL and createManySQL take the last ten.
func taskArrays(tasks []NewTask) []any {
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
	return []any{pq.Array(wf), pq.Array(names), pq.Array(types), pq.Array(params), pq.Array(states),
		pq.Array(prio), pq.Array(groups), pq.Array(pools), pq.Array(retries), pq.Array(retryMs),
		pq.Array(timeoutMs)}
}

// taskListByWorkflowSQL is TaskListByWorkflow's statement: $1 the workflow instance.
const taskListByWorkflowSQL = `
		SELECT id, workflow_instance_id, name, type, params, state, priority, worker_group,
			pool, worker_id, attempt, retries, max_retries,
			(extract(epoch FROM retry_interval) * 1000)::bigint AS retry_interval_ms,
			(extract(epoch FROM timeout) * 1000)::bigint AS timeout_ms,
			not_before, failover_count, kill_requested, output, error, exit_code, queued_at, started_at, ended_at, usage,
			paused_step, item_count, end_reason, output_truncated
		FROM task_instance
		WHERE workflow_instance_id = $1 ORDER BY id`

// TaskListByWorkflow returns every task instance of a workflow instance, by id.
func (q *Queries) TaskListByWorkflow(ctx context.Context, workflowID int64) ([]TaskInstance, error) {
	var tasks []TaskInstance
	if err := sqlxSelect(ctx, q, &tasks, taskListByWorkflowSQL, workflowID); err != nil {
		return nil, fmt.Errorf("list tasks of workflow instance %d: %w", workflowID, err)
	}
	return tasks, nil
}

// taskGetSQL is TaskGet's statement: $1 the task instance.
const taskGetSQL = `
		SELECT id, workflow_instance_id, name, type, params, state, priority, worker_group,
			pool, worker_id, attempt, retries, max_retries,
			(extract(epoch FROM retry_interval) * 1000)::bigint AS retry_interval_ms,
			(extract(epoch FROM timeout) * 1000)::bigint AS timeout_ms,
			not_before, failover_count, kill_requested, output, error, exit_code, queued_at, started_at, ended_at, usage,
			paused_step, item_count, end_reason, output_truncated
		FROM task_instance WHERE id = $1`

// TaskGet returns one task instance.
func (q *Queries) TaskGet(ctx context.Context, id int64) (*TaskInstance, error) {
	var t TaskInstance
	if err := sqlxGet(ctx, q, &t, taskGetSQL, id); err != nil {
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

// listByWorkflowsSQL is TaskListByWorkflows's statement: $1 the workflow instance ids.
const listByWorkflowsSQL = `SELECT t.id, t.workflow_instance_id, t.name, t.state, t.output, t.kill_requested, t.item_count
	FROM unnest($1::bigint[]) AS w(wf)
	CROSS JOIN LATERAL (SELECT * FROM task_instance WHERE workflow_instance_id = w.wf OFFSET 0) t
	ORDER BY t.id`

// TaskOutcome is what a master reads of a task instance to advance its workflow: where the
// task stands, and its output for the tasks downstream.
type TaskOutcome struct {
	ID                 int64     `db:"id"`
	WorkflowInstanceID int64     `db:"workflow_instance_id"`
	Name               string    `db:"name"`
	State              TaskState `db:"state"`
	Output             *string   `db:"output"`
	KillRequested      bool      `db:"kill_requested"`
	// ItemCount is set on the parent of a for-each task's items alone: how many it has.
	ItemCount *int `db:"item_count"`
}

// TaskListByWorkflows returns the outcome of every task instance of the given workflow
// instances, by id. It reads no params: a task's carry its whole definition and the
// instance's params (kilobytes for an agent), which an advance never needs.
func (q *Queries) TaskListByWorkflows(ctx context.Context, workflowIDs []int64) ([]TaskOutcome, error) {
	var tasks []TaskOutcome
	// One index probe per instance, whatever the statistics say: with none yet (a table that
	// filled since the last ANALYZE, as after a burst of submissions) "= ANY" of a hundred ids
	// is planned as a scan of the whole table. OFFSET 0 keeps the planner from flattening the
	// probe back into that scan.
	if err := selectHot(ctx, q, &tasks, listByWorkflowsSQL, pq.Array(workflowIDs)); err != nil {
		return nil, fmt.Errorf("list tasks of %d workflow instances: %w", len(workflowIDs), err)
	}
	return tasks, nil
}
