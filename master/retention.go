package master

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/signal"
)

// Leadership says whether this master leads the cluster (registry.Election).
type Leadership interface {
	IsLeader() bool
	// Changed is closed at the next change of leadership.
	Changed() <-chan struct{}
}

// RetentionConfig configures a Retention: how long each kind of history is kept (0: for
// ever), from conf.Retention.
type RetentionConfig struct {
	// Instances is how long finished workflow instances are kept, with everything of theirs.
	Instances time.Duration
	// Logs is how long the task logs of finished workflow instances are kept.
	Logs time.Duration
	// FailoverEvents is how long finished failover events are kept.
	FailoverEvents time.Duration
	// Fires is how long schedule fire records are kept, and hook deliveries' records, but
	// those never less than HookDedupeWindow, in which they keep a redelivery from running.
	Fires            time.Duration
	HookDedupeWindow time.Duration
	// AssetEvents is how long asset events no consumer waits on are kept, with their
	// consumption rows.
	AssetEvents time.Duration
	// Audit is how long audit rows are kept.
	Audit time.Duration
	// Interval is the time between two rounds.
	Interval time.Duration
	// BatchSize is how many rows a statement deletes.
	BatchSize int
	Log       zerolog.Logger
	// Clock is the time source of the rounds; nil is the real clock. The periods are measured
	// on the database's clock whatever this is.
	Clock clockwork.Clock
	// Purged, when set, is told the rows each batch deleted, by table (the metrics).
	Purged func(table string, rows int64)
}

// Retention is the leader's purge of the history of finished work: every Interval while this
// master leads, a round deletes batch after batch of what is past its period until nothing
// is, each batch a statement of its own (package dao's Purge statements). Losing the
// leadership stops a round at once: the statement under way is cancelled, and no other
// starts.
type Retention struct {
	cfg  RetentionConfig
	db   *dao.DB
	lead Leadership

	// waiting is a test signal: Run signals it each time it waits for the next round or a
	// change of leadership.
	waiting signal.Test[struct{}]
}

// NewRetention returns the leader's Retention.
func NewRetention(cfg RetentionConfig, db *dao.DB, lead Leadership) *Retention {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Purged == nil {
		cfg.Purged = func(string, int64) {}
	}
	return &Retention{cfg: cfg, db: db, lead: lead}
}

// Run purges until ctx ends: at once when this master becomes the leader, then every
// interval while it leads.
func (r *Retention) Run(ctx context.Context) error {
	tick := r.cfg.Clock.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	due := true // a round is due at once on becoming the leader
	for {
		changed := r.lead.Changed()
		if r.lead.IsLeader() && due {
			due = false
			r.round(ctx, changed)
		}
		r.waiting.Signal(struct{}{})
		select {
		case <-ctx.Done():
			return nil
		case <-tick.Chan():
			due = true
		case <-changed:
			// Becoming the leader purges at once; so does becoming it again after a loss.
			due = true
		}
	}
}

// round deletes, kind after kind, batch after batch, what is past its period, until nothing
// is or ctx ends or leadership changes (changed is closed). A kind that fails is logged and
// left to the next round.
func (r *Retention) round(ctx context.Context, changed <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-changed:
			if !r.lead.IsLeader() {
				cancel()
			}
		case <-ctx.Done():
		}
	}()
	batch := r.cfg.BatchSize
	total := dao.Purged{}
	add := func(p dao.Purged) {
		for table, n := range p {
			if n > 0 {
				r.cfg.Purged(table, n)
				total[table] += n
			}
		}
	}
	kinds := []struct {
		name string
		keep time.Duration
		// purge deletes a batch: done when nothing is left now.
		purge func() (done bool, err error)
	}{
		{"logs", r.cfg.Logs, func() (bool, error) {
			rows, instances, err := r.db.PurgeFinishedLogs(ctx, r.cfg.Logs, batch)
			add(dao.Purged{"task_log": rows})
			return instances < int64(batch), err
		}},
		{"instances", r.cfg.Instances, func() (bool, error) {
			p, err := r.db.PurgeFinishedInstances(ctx, r.cfg.Instances, batch)
			add(p)
			return p["workflow_instance"] < int64(batch), err
		}},
		{"failover events", r.cfg.FailoverEvents, func() (bool, error) {
			n, err := r.db.PurgeFailoverEvents(ctx, r.cfg.FailoverEvents, batch)
			add(dao.Purged{"failover_event": n})
			return n < int64(batch), err
		}},
		// A notification is of an instance's end (or of a failover) and goes with the
		// instances' period: sent or dead, it is only a record by then.
		{"notifications", r.cfg.Instances, func() (bool, error) {
			n, err := r.db.PurgeNotifications(ctx, r.cfg.Instances, batch)
			add(dao.Purged{"notification": n})
			return n < int64(batch), err
		}},
		{"fires", r.cfg.Fires, func() (bool, error) {
			n, err := r.db.PurgeFires(ctx, r.cfg.Fires, batch)
			add(dao.Purged{"schedule_fire": n})
			return n < int64(batch), err
		}},
		// A hook delivery's record is what keeps a redelivery from starting a run again, as a
		// fire's is for a fire: it goes with the fires' period.
		{"hook deliveries", r.cfg.Fires, func() (bool, error) {
			n, err := r.db.PurgeHookDeliveries(ctx, max(r.cfg.Fires, r.cfg.HookDedupeWindow), batch)
			add(dao.Purged{"hook_delivery": n})
			return n < int64(batch), err
		}},
		{"asset events", r.cfg.AssetEvents, func() (bool, error) {
			p, err := r.db.PurgeAssetEvents(ctx, r.cfg.AssetEvents, batch)
			add(p)
			return p["asset_event"] < int64(batch), err
		}},
		{"audit", r.cfg.Audit, func() (bool, error) {
			n, err := r.db.PurgeAudit(ctx, r.cfg.Audit, batch)
			add(dao.Purged{"audit_event": n})
			return n < int64(batch), err
		}},
	}
	start := r.cfg.Clock.Now()
	for _, k := range kinds {
		if k.keep <= 0 {
			continue
		}
		for {
			if ctx.Err() != nil || !r.lead.IsLeader() {
				r.logRound(total, start, "no longer the leader")
				return
			}
			done, err := k.purge()
			if err != nil {
				if ctx.Err() == nil {
					r.cfg.Log.Warn().Err(err).Str("kind", k.name).Msg("retention: purge failed; the next round tries again")
				}
				break
			}
			if done {
				break
			}
		}
	}
	r.logRound(total, start, "")
}

// logRound logs what a round deleted, if anything; why is set when it stopped early.
func (r *Retention) logRound(total dao.Purged, start time.Time, why string) {
	var n int64
	d := zerolog.Dict()
	for table, rows := range total {
		n += rows
		d.Int64(table, rows)
	}
	if n == 0 && why == "" {
		return
	}
	ev := r.cfg.Log.Info().Dict("purged", d).Dur("took", r.cfg.Clock.Since(start))
	if why != "" {
		ev = ev.Str("stopped", why)
	}
	ev.Msg("retention: purged the history past its period")
}
