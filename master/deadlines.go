package master

import (
	"context"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/signal"
)

// deadlinesBatch is how many passed deadlines one look queues at most.
const deadlinesBatch = 1000

// Deadlines queues the deadline events (notifications) of the workflow instances and tasks
// whose deadline has passed. It looks at start and every poll, a batch at a time until a
// batch is not full; a failed look waits for the next poll. It acts only while the gate is
// Active: a look due meanwhile is taken when the gate changes.
type Deadlines struct {
	cfg  Config
	db   *dao.DB
	gate Gate

	// waiting is a test signal: Run signals it each time it has looked and waits.
	waiting signal.Test[struct{}]
}

// NewDeadlines returns the part of a master that queues the events of passed deadlines.
func NewDeadlines(cfg Config, db *dao.DB, gate Gate) *Deadlines {
	return &Deadlines{cfg: withClock(cfg), db: db, gate: gate}
}

// Run queues the events of passed deadlines until ctx ends.
func (d *Deadlines) Run(ctx context.Context) error {
	everyPoll(ctx, d.cfg, d.gate, d.queueDeadlines, &d.waiting)
	return nil
}

// queueDeadlines queues the deadline event of the workflow instances and tasks whose deadline
// has passed, a batch at a time; the notification's unique key makes two masters looking at
// once queue each once. It reports whether a full batch was queued, so more may be due.
func (d *Deadlines) queueDeadlines(ctx context.Context) bool {
	n, err := d.db.DeadlineQueuePassed(ctx, deadlinesBatch)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Log.Debug().Err(err).Msg("could not queue the passed deadlines; trying again at the next poll")
		}
		return false
	}
	if n > 0 {
		d.cfg.Log.Info().Int("deadlines", n).Msg("queued the deadline events of instances and tasks past their deadline")
	}
	return n >= deadlinesBatch
}
