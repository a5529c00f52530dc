package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// WorkflowCreateMany creates n instances of a stored definition in one statement, each with
// the root task instances given (as WorkflowCreateWithTasks; none leaves them submitted for a
// master to start), and wakes the masters and workers once. It is for bulk loads
// (benchmarks): the definition's max-active-instances is not applied.
func (q *Queries) WorkflowCreateMany(ctx context.Context, name string, version int, params json.RawMessage, n int, roots []NewTask) error {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	var groups pq.StringArray
	args := append([]any{name, version, string(params), n}, taskArrays(roots)[1:]...)
	err := sqlxGet(ctx, q, &groups, `
		WITH created AS (
			INSERT INTO workflow_instance (workflow_name, workflow_version, params, state, started_at)
			SELECT $1, $2, $3::jsonb,
				CASE WHEN cardinality($5::text[]) > 0 THEN 'running' ELSE 'submitted' END,
				CASE WHEN cardinality($5::text[]) > 0 THEN now() END
			FROM generate_series(1, $4)
			RETURNING id
		), roots AS (
			INSERT INTO task_instance (workflow_instance_id, name, type, params, state, priority,
				worker_group, pool, max_retries, retry_interval, timeout, ended_at)
			SELECT c.id, nm, ty, p::jsonb, st, pr, g, pl, r, rm * interval '1 millisecond',
				tm * interval '1 millisecond', CASE WHEN st = 'skipped' THEN now() END
			FROM created c, unnest($5::text[], $6::text[], $7::text[], $8::text[], $9::int[],
				$10::text[], $11::text[], $12::int[], $13::bigint[], $14::bigint[])
				AS x(nm, ty, p, st, pr, g, pl, r, rm, tm)
			ORDER BY c.id
			RETURNING worker_group, state
		)
		SELECT coalesce(array_agg(DISTINCT worker_group) FILTER (WHERE state = 'queued'), '{}') FROM roots`,
		args...)
	if err != nil {
		return fmt.Errorf("create %d instances of %q: %w", n, name, err)
	}
	for _, g := range groups {
		q.notify(q.ch.task, g)
	}
	q.notify(q.ch.master, "")
	return nil
}

// WorkflowCountFinished counts the finished instances of workflow (every workflow for "")
// created at or after since.
func (q *Queries) WorkflowCountFinished(ctx context.Context, workflow string, since time.Time) (int, error) {
	var n int
	if err := sqlxGet(ctx, q, &n, `SELECT count(*) FROM workflow_instance
		WHERE state IN ('succeeded', 'failed', 'stopped') AND created_at >= $1
		  AND ($2 = '' OR workflow_name = $2)`, since, workflow); err != nil {
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
	const pct = `coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
		coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
		coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
		coalesce(max(ms), 0) AS max`
	var st LatencyStats
	for _, c := range []struct {
		into *Percentiles
		expr string
	}{
		{&st.Finish, "w.ended_at"},
		{&st.Start, "(SELECT min(t.started_at) FROM task_instance t WHERE t.workflow_instance_id = w.id)"},
		{&st.Queued, "(SELECT min(t.queued_at) FROM task_instance t WHERE t.workflow_instance_id = w.id)"},
	} {
		err := sqlxGet(ctx, q, c.into, `SELECT `+pct+` FROM (
			SELECT extract(epoch FROM `+c.expr+` - to_timestamp(x.sent / 1e6)) * 1000 AS ms
			FROM unnest($1::bigint[], $2::bigint[]) AS x(id, sent)
			JOIN workflow_instance w ON w.id = x.id) m WHERE ms IS NOT NULL`, pq.Array(ids), pq.Array(sent))
		if err != nil {
			return nil, fmt.Errorf("latency: %w", err)
		}
	}
	return &st, nil
}

// WorkflowLatency measures the finished instances of workflow (every workflow for "")
// created at or after since.
func (q *Queries) WorkflowLatency(ctx context.Context, workflow string, since time.Time) (*LatencyStats, error) {
	const pct = `coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
		coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
		coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
		coalesce(max(ms), 0) AS max`
	var st LatencyStats
	err := sqlxGet(ctx, q, &st.Finish, `SELECT `+pct+` FROM (
		SELECT extract(epoch FROM ended_at - created_at) * 1000 AS ms FROM workflow_instance
		WHERE ended_at IS NOT NULL AND created_at >= $1 AND ($2 = '' OR workflow_name = $2)) x`, since, workflow)
	if err != nil {
		return nil, fmt.Errorf("finish latency: %w", err)
	}
	for _, c := range []struct {
		into *Percentiles
		col  string
	}{{&st.Start, "started_at"}, {&st.Queued, "queued_at"}} {
		err = sqlxGet(ctx, q, c.into, `SELECT `+pct+` FROM (
			SELECT extract(epoch FROM min(t.`+c.col+`) - w.created_at) * 1000 AS ms
			FROM workflow_instance w JOIN task_instance t ON t.workflow_instance_id = w.id
			WHERE w.ended_at IS NOT NULL AND w.created_at >= $1 AND t.`+c.col+` IS NOT NULL
			  AND ($2 = '' OR w.workflow_name = $2)
			GROUP BY w.id, w.created_at) x`, since, workflow)
		if err != nil {
			return nil, fmt.Errorf("%s latency: %w", c.col, err)
		}
	}
	return &st, nil
}
