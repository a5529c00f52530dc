package master

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/tracing"
)

// TraceExportConfig configures a TraceExport.
type TraceExportConfig struct {
	// PollInterval is how often the outbox is looked at.
	PollInterval time.Duration
	Log          zerolog.Logger
	// Clock is the time source of the polls; nil is the real clock.
	Clock clockwork.Clock
}

// traceBatch is how many outbox rows one take emits.
const traceBatch = 500

// TraceExport emits the spans of the trace outbox (migration 00023): the span of each traced
// workflow instance once it has ended, and of each attempt the leader failed over. The
// transaction that ends the work queues them, whatever statement ends it, so any master with
// tracing on may emit them; each is taken by one (dao.TraceOutboxTakeUnsent).
type TraceExport struct {
	cfg    TraceExportConfig
	db     *dao.DB
	tracer *tracing.Tracer
}

// NewTraceExport returns the TraceExport of a master whose tracer is tracer (not nil).
func NewTraceExport(cfg TraceExportConfig, db *dao.DB, tracer *tracing.Tracer) *TraceExport {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	return &TraceExport{cfg: cfg, db: db, tracer: tracer}
}

// Run emits the outbox's spans every poll interval until ctx ends.
func (e *TraceExport) Run(ctx context.Context) error {
	tick := e.cfg.Clock.NewTicker(e.cfg.PollInterval)
	defer tick.Stop()
	for {
		for ctx.Err() == nil && e.Emit(ctx) == traceBatch {
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.Chan():
		}
	}
}

// Emit takes one batch of the outbox and emits its spans; it returns how many it took.
func (e *TraceExport) Emit(ctx context.Context) int {
	rows, err := e.db.TraceOutboxTakeUnsent(ctx, traceBatch)
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Log.Warn().Err(err).Msg("tracing: reading the trace outbox failed; retrying at the next poll")
		}
		return 0
	}
	for i := range rows {
		r := &rows[i]
		if r.TaskInstanceID == 0 {
			e.tracer.EmitInstance(ctx, tracing.Instance{ID: r.WorkflowInstanceID, Workflow: r.WorkflowName,
				Version: r.WorkflowVersion, Traceparent: r.Traceparent, State: r.State, Error: orEmpty(r.Error),
				CreatedAt: r.CreatedAt, EndedAt: r.EndedAt})
			continue
		}
		if r.AttemptStartedAt == nil {
			continue // its task was deleted (a rerun recreates tasks that never ran), and its attempt with it
		}
		ended := time.Now()
		if r.AttemptEndedAt != nil {
			ended = *r.AttemptEndedAt
		}
		e.tracer.EmitAttempt(ctx, tracing.FinishedAttempt{
			AttemptInfo: tracing.AttemptInfo{WorkflowInstance: r.WorkflowInstanceID, Task: r.TaskInstanceID,
				Name: orEmpty(r.TaskName), Type: orEmpty(r.TaskType), Attempt: r.Attempt, Worker: orEmpty(r.WorkerID)},
			Traceparent: r.Traceparent, Outcome: orEmpty(r.Outcome), Error: orEmpty(r.AttemptError),
			StartedAt: *r.AttemptStartedAt, EndedAt: ended})
	}
	return len(rows)
}

// orEmpty is *s, "" for nil.
func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
