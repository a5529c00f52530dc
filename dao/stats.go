package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// WorkflowCreateMany creates n submitted instances of a stored definition in one statement
// and wakes the masters once. It is for bulk loads (benchmarks, backfills).
func (q *Queries) WorkflowCreateMany(ctx context.Context, name string, version int, params json.RawMessage, n int) error {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	_, err := q.q.ExecContext(ctx, `
		INSERT INTO workflow_instance (workflow_name, workflow_version, params)
		SELECT $1, $2, $3::jsonb FROM generate_series(1, $4)`,
		name, version, string(params), n)
	if err != nil {
		return fmt.Errorf("create %d instances of %q: %w", n, name, err)
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
