package dao

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lib/pq"
)

// WorkflowCreateMany creates n instances of sub in one statement, each as WorkflowCreate with
// sub.Queue would (a capped or keyed one waits for admission, none is skipped), and wakes the
// masters and workers once. It is for bulk loads (benchmarks).
func (q *Queries) WorkflowCreateMany(ctx context.Context, sub Submission, n int) error {
	if n <= 0 {
		return nil
	}
	name, version, roots := sub.Name, sub.Version, sub.Roots
	sub.Queue, sub.Audit = true, nil
	subs := make([]Submission, n)
	for i := range subs {
		subs[i] = sub
	}
	got, err := q.createMany(ctx, subs)
	if err != nil {
		return fmt.Errorf("create %d instances of %q: %w", n, name, err)
	}
	if got[0] == nil {
		return fmt.Errorf("create %d instances of %q version %d: no such definition stored: %w", n, name, version, sql.ErrNoRows)
	}
	q.notifyCreated(got[0], roots) // every instance is alike, of one key if any
	return nil
}

// WorkflowLastID returns the id of the newest workflow instance, 0 for none: the instances
// created after it have greater ids, which is how a benchmark tells its own from those
// before it (a range of the primary key; no index on created_at is kept for it).
func (q *Queries) WorkflowLastID(ctx context.Context) (int64, error) {
	var id int64
	if err := sqlxGet(ctx, q, &id, `SELECT coalesce(max(id), 0) FROM workflow_instance`); err != nil {
		return 0, fmt.Errorf("read the newest workflow instance id: %w", err)
	}
	return id, nil
}

// WorkflowCountFinished counts the finished instances of workflow (every workflow for "")
// with an id above after (WorkflowLastID).
func (q *Queries) WorkflowCountFinished(ctx context.Context, workflow string, after int64) (int, error) {
	var n int
	if err := sqlxGet(ctx, q, &n, `SELECT count(*) FROM workflow_instance
		WHERE id > $1 AND state IN ('succeeded', 'failed', 'stopped')
		  AND ($2 = '' OR workflow_name = $2)`, after, workflow); err != nil {
		return 0, fmt.Errorf("count finished workflow instances: %w", err)
	}
	return n, nil
}

// Percentiles are latency percentiles in milliseconds.
type Percentiles struct {
	P50 float64 `db:"p50" json:"p50_ms"`
	P95 float64 `db:"p95" json:"p95_ms"`
	P99 float64 `db:"p99" json:"p99_ms"`
	Max float64 `db:"max" json:"max_ms"`
}

// LatencyStats are the percentiles of the finished workflow instances created at or after
// since: Queued is submit → first task queued (the master's part), Start is submit → first
// task started, Finish is submit → instance finished.
type LatencyStats struct {
	Queued Percentiles `json:"queued"`
	Start  Percentiles `json:"start"`
	Finish Percentiles `json:"finish"`
}

// WorkflowLatencyFrom measures the instances ids from when their clients sent them: sent[i]
// is when the submission of ids[i] was called, in microseconds since the Unix epoch (on the
// database host's clock: the benchmark runs there). Unlike WorkflowLatency it counts what a
// submission waited before its statement started (for a connection of the client's pool),
// which created_at does not see.
func (q *Queries) WorkflowLatencyFrom(ctx context.Context, ids []int64, sent []int64) (*LatencyStats, error) {
	var st LatencyStats
	for _, c := range []struct {
		into  *Percentiles
		query string
	}{{&st.Finish, finishLatencyFromSQL}, {&st.Start, startLatencyFromSQL}, {&st.Queued, queuedLatencyFromSQL}} {
		if err := sqlxGet(ctx, q, c.into, c.query, pq.Array(ids), pq.Array(sent)); err != nil {
			return nil, fmt.Errorf("latency: %w", err)
		}
	}
	return &st, nil
}

// finishLatencyFromSQL, startLatencyFromSQL and queuedLatencyFromSQL are WorkflowLatencyFrom's
// statements: $1 the instances, $2 when each was sent. Each reads Percentiles of its ms.
const (
	finishLatencyFromSQL = `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
			coalesce(max(ms), 0) AS max
		FROM (
			SELECT extract(epoch FROM w.ended_at - to_timestamp(x.sent / 1e6)) * 1000 AS ms
			FROM unnest($1::bigint[], $2::bigint[]) AS x(id, sent)
			JOIN workflow_instance w ON w.id = x.id) m
		WHERE ms IS NOT NULL`
	startLatencyFromSQL = `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
			coalesce(max(ms), 0) AS max
		FROM (
			SELECT extract(epoch FROM (SELECT min(t.started_at) FROM task_instance t WHERE t.workflow_instance_id = w.id)
				- to_timestamp(x.sent / 1e6)) * 1000 AS ms
			FROM unnest($1::bigint[], $2::bigint[]) AS x(id, sent)
			JOIN workflow_instance w ON w.id = x.id) m
		WHERE ms IS NOT NULL`
	queuedLatencyFromSQL = `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
			coalesce(max(ms), 0) AS max
		FROM (
			SELECT extract(epoch FROM (SELECT min(t.queued_at) FROM task_instance t WHERE t.workflow_instance_id = w.id)
				- to_timestamp(x.sent / 1e6)) * 1000 AS ms
			FROM unnest($1::bigint[], $2::bigint[]) AS x(id, sent)
			JOIN workflow_instance w ON w.id = x.id) m
		WHERE ms IS NOT NULL`
)

// WorkflowLatency measures the finished instances of workflow (every workflow for "") with an
// id above after (WorkflowLastID).
func (q *Queries) WorkflowLatency(ctx context.Context, workflow string, after int64) (*LatencyStats, error) {
	var st LatencyStats
	for _, c := range []struct {
		into        *Percentiles
		name, query string
	}{{&st.Finish, "finish", finishLatencySQL}, {&st.Start, "started_at", startLatencySQL}, {&st.Queued, "queued_at", queuedLatencySQL}} {
		if err := sqlxGet(ctx, q, c.into, c.query, after, workflow); err != nil {
			return nil, fmt.Errorf("%s latency: %w", c.name, err)
		}
	}
	return &st, nil
}

// finishLatencySQL, startLatencySQL and queuedLatencySQL are WorkflowLatency's statements: $1
// the id after which instances count, $2 the workflow ("" for every one). Each reads
// Percentiles of its ms.
const (
	finishLatencySQL = `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
			coalesce(max(ms), 0) AS max
		FROM (
			SELECT extract(epoch FROM ended_at - created_at) * 1000 AS ms FROM workflow_instance
			WHERE id > $1 AND ended_at IS NOT NULL AND ($2 = '' OR workflow_name = $2)) x`
	startLatencySQL = `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
			coalesce(max(ms), 0) AS max
		FROM (
			SELECT extract(epoch FROM min(t.started_at) - w.created_at) * 1000 AS ms
			FROM workflow_instance w JOIN task_instance t ON t.workflow_instance_id = w.id
			WHERE w.id > $1 AND w.ended_at IS NOT NULL AND t.started_at IS NOT NULL
			  AND ($2 = '' OR w.workflow_name = $2)
			GROUP BY w.id, w.created_at) x`
	queuedLatencySQL = `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
			coalesce(max(ms), 0) AS max
		FROM (
			SELECT extract(epoch FROM min(t.queued_at) - w.created_at) * 1000 AS ms
			FROM workflow_instance w JOIN task_instance t ON t.workflow_instance_id = w.id
			WHERE w.id > $1 AND w.ended_at IS NOT NULL AND t.queued_at IS NOT NULL
			  AND ($2 = '' OR w.workflow_name = $2)
			GROUP BY w.id, w.created_at) x`
)

// SignalLatencyFrom measures the signalled wait tasks tasks from when their signals were
// called: sent[i] is when the signal of tasks[i] was, in microseconds since the Unix epoch
// (on the database host's clock: the benchmark runs there). Queued is signal → the next task
// of its workflow instance created, Start signal → it started, Finish signal → the instance
// finished. The next task is the first one of the instance created after the wait ended.
func (q *Queries) SignalLatencyFrom(ctx context.Context, tasks []int64, sent []int64) (*LatencyStats, error) {
	var st LatencyStats
	for _, c := range []struct {
		into  *Percentiles
		query string
	}{{&st.Finish, signalFinishLatencySQL}, {&st.Start, signalStartLatencySQL}, {&st.Queued, signalQueuedLatencySQL}} {
		if err := sqlxGet(ctx, q, c.into, c.query, pq.Array(tasks), pq.Array(sent)); err != nil {
			return nil, fmt.Errorf("signal latency: %w", err)
		}
	}
	return &st, nil
}

// signalFinishLatencySQL, signalStartLatencySQL and signalQueuedLatencySQL are
// SignalLatencyFrom's statements: $1 the signalled tasks, $2 when each signal was called.
const (
	signalFinishLatencySQL = `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
			coalesce(max(ms), 0) AS max
		FROM (
			SELECT extract(epoch FROM w.ended_at - to_timestamp(x.sent / 1e6)) * 1000 AS ms
			FROM unnest($1::bigint[], $2::bigint[]) AS x(id, sent)
			JOIN task_instance t ON t.id = x.id
			JOIN workflow_instance w ON w.id = t.workflow_instance_id) m
		WHERE ms IS NOT NULL`
	signalStartLatencySQL = `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
			coalesce(max(ms), 0) AS max
		FROM (
			SELECT extract(epoch FROM (SELECT n.started_at FROM task_instance n
					WHERE n.workflow_instance_id = t.workflow_instance_id AND n.queued_at >= t.ended_at
					ORDER BY n.queued_at, n.id LIMIT 1)
				- to_timestamp(x.sent / 1e6)) * 1000 AS ms
			FROM unnest($1::bigint[], $2::bigint[]) AS x(id, sent)
			JOIN task_instance t ON t.id = x.id) m
		WHERE ms IS NOT NULL`
	signalQueuedLatencySQL = `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
			coalesce(max(ms), 0) AS max
		FROM (
			SELECT extract(epoch FROM (SELECT min(n.queued_at) FROM task_instance n
					WHERE n.workflow_instance_id = t.workflow_instance_id AND n.queued_at >= t.ended_at)
				- to_timestamp(x.sent / 1e6)) * 1000 AS ms
			FROM unnest($1::bigint[], $2::bigint[]) AS x(id, sent)
			JOIN task_instance t ON t.id = x.id) m
		WHERE ms IS NOT NULL`
)

// SignalledUnfinished counts the unfinished workflow instances of the tasks tasks.
func (q *Queries) SignalledUnfinished(ctx context.Context, tasks []int64) (int, error) {
	var n int
	if err := sqlxGet(ctx, q, &n, `SELECT count(*) FROM task_instance t JOIN workflow_instance w ON w.id = t.workflow_instance_id
		WHERE t.id = ANY($1) AND w.ended_at IS NULL`, pq.Array(tasks)); err != nil {
		return 0, fmt.Errorf("count unfinished signalled workflow instances: %w", err)
	}
	return n, nil
}
