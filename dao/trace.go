package dao

import (
	"context"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// The statements of tracing (migration 00023): the instances' trace contexts, and the outbox
// of the spans that the process ending the work cannot emit itself.

// WorkflowTraceparentsOf returns the traceparent of each of the instances ids that has one:
// a worker with tracing on reads those of the tasks it claimed, once per claim. The claim
// itself does not read them, so that it costs the same with tracing off.
func (q *Queries) WorkflowTraceparentsOf(ctx context.Context, ids []int64) (map[int64]string, error) {
	var rows []struct {
		ID          int64  `db:"id"`
		Traceparent string `db:"traceparent"`
	}
	if err := sqlxSelect(ctx, q, &rows, `SELECT workflow_instance_id AS id, traceparent FROM trace_context
		WHERE workflow_instance_id = ANY($1)`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("read the traceparents of %d workflow instances: %w", len(ids), err)
	}
	out := make(map[int64]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Traceparent
	}
	return out, nil
}

// TraceSpan is a row of the trace outbox with what its span says: an ended instance's
// (TaskInstanceID 0), or an attempt the leader failed over.
type TraceSpan struct {
	WorkflowInstanceID int64      `db:"workflow_instance_id"`
	TaskInstanceID     int64      `db:"task_instance_id"`
	Attempt            int        `db:"attempt"`
	Traceparent        string     `db:"traceparent"`
	WorkflowName       string     `db:"workflow_name"`
	WorkflowVersion    int        `db:"workflow_version"`
	State              string     `db:"state"`
	Error              *string    `db:"error"`
	CreatedAt          time.Time  `db:"created_at"`
	EndedAt            time.Time  `db:"ended_at"`
	TaskName           *string    `db:"task_name"`
	TaskType           *string    `db:"task_type"`
	WorkerID           *string    `db:"worker_id"`
	AttemptStartedAt   *time.Time `db:"attempt_started_at"`
	AttemptEndedAt     *time.Time `db:"attempt_ended_at"`
	Outcome            *string    `db:"outcome"`
	AttemptError       *string    `db:"attempt_error"`
}

// TraceOutboxTakeUnsent marks up to limit rows of the trace outbox sent and returns them, for
// the caller to emit their spans. Rows another master is taking are skipped (SKIP LOCKED), so
// each is taken once. A span is taken before it is emitted: one whose master dies in between
// is lost, as a span is whose exporter drops it; never emitted twice. An instance that a rerun
// reopened before its end was emitted has no end: its span ends now.
func (q *Queries) TraceOutboxTakeUnsent(ctx context.Context, limit int) ([]TraceSpan, error) {
	var out []TraceSpan
	err := sqlxSelect(ctx, q, &out, `
		WITH taken AS (
			UPDATE trace_outbox o SET sent = true
			WHERE (o.workflow_instance_id, o.task_instance_id, o.attempt) IN (
				SELECT workflow_instance_id, task_instance_id, attempt FROM trace_outbox
				WHERE NOT sent
				ORDER BY workflow_instance_id
				LIMIT $1
				FOR UPDATE SKIP LOCKED)
			RETURNING o.workflow_instance_id, o.task_instance_id, o.attempt
		)
		SELECT k.workflow_instance_id, k.task_instance_id, k.attempt, c.traceparent, w.workflow_name,
			w.workflow_version, w.state, w.error, w.created_at, coalesce(w.ended_at, now()) AS ended_at,
			t.name AS task_name, t.type AS task_type, a.worker_id, a.started_at AS attempt_started_at,
			a.ended_at AS attempt_ended_at, a.outcome, a.error AS attempt_error
		FROM taken k
		JOIN workflow_instance w ON w.id = k.workflow_instance_id
		JOIN trace_context c ON c.workflow_instance_id = k.workflow_instance_id
		LEFT JOIN task_instance t ON t.id = k.task_instance_id
		LEFT JOIN task_attempt a ON a.task_instance_id = k.task_instance_id AND a.attempt = k.attempt`, limit)
	if err != nil {
		return nil, fmt.Errorf("take unsent trace spans: %w", err)
	}
	return out, nil
}
