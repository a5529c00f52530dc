package master

import (
	"context"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/signal"
	"github.com/zksched/zksched/lifecycle"
)

// waitsBatch is how many waiting tasks past their timeout one look ends at most.
const waitsBatch = 1000

// WaitTimeouts ends the waiting tasks (wait tasks, approvals, sensors…) past their timeout,
// as lifecycle.EndWaitsPastTimeout decides; the ends wake the masters as a signal does. It
// also queues again the agents whose workflow tool's child ended while they paused
// (dao.TaskResumeIfToolChildEnded), and ends the workflow sensors whose run ended while they
// were created, which the master that created one looks for itself unless it died first
// (lifecycle.EndRunWaits). It
// looks at start and every poll, a batch at a time until a batch is not full; a failed look
// waits for the next poll. It acts only while the gate is Active: a look due meanwhile is
// taken when the gate changes.
type WaitTimeouts struct {
	cfg  Config
	db   *dao.DB
	gate Gate

	// waiting is a test signal: Run signals it each time it has looked and waits.
	waiting signal.Test[struct{}]
}

// NewWaitTimeouts returns the part of a master that ends waits past their timeout.
func NewWaitTimeouts(cfg Config, db *dao.DB, gate Gate) *WaitTimeouts {
	return &WaitTimeouts{cfg: withClock(cfg), db: db, gate: gate}
}

// Run ends waits past their timeout until ctx ends.
func (w *WaitTimeouts) Run(ctx context.Context) error {
	everyPoll(ctx, w.cfg, w.gate, w.endWaits, &w.waiting)
	return nil
}

// endWaits ends the waiting tasks past their timeout, a batch at a time. It reports whether a
// full batch was ended, so more may be due.
func (w *WaitTimeouts) endWaits(ctx context.Context) bool {
	n, err := lifecycle.EndWaitsPastTimeout(ctx, w.db, waitsBatch)
	if err != nil {
		// The claim of the same poll has said the database is away; this says it at debug.
		if ctx.Err() == nil {
			w.cfg.Log.Debug().Err(err).Msg("could not end the waiting tasks past their timeout; trying again at the next poll")
		}
		return false
	}
	if n > 0 {
		w.cfg.Log.Info().Int("tasks", n).Msg("ended waiting tasks past their timeout")
	}
	resumed, err := w.db.TaskResumeIfToolChildEnded(ctx, 0, waitsBatch)
	switch {
	case err != nil && ctx.Err() == nil:
		w.cfg.Log.Debug().Err(err).Msg("could not look for agents whose tool's child ended; trying again at the next poll")
	case resumed > 0:
		w.cfg.Log.Info().Int("tasks", resumed).Msg("queued again agents whose tool's child ended while they paused")
	}
	runs, err := lifecycle.EndRunWaits(ctx, w.db, waitsBatch)
	switch {
	case err != nil && ctx.Err() == nil:
		w.cfg.Log.Debug().Err(err).Msg("could not look for workflow sensors whose run ended; trying again at the next poll")
	case runs > 0:
		w.cfg.Log.Info().Int("tasks", runs).Msg("ended workflow sensors whose run ended while they were created")
	}
	return n == waitsBatch || resumed == waitsBatch || runs == waitsBatch
}
