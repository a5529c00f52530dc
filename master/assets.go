package master

import (
	"context"

	"github.com/zksched/zksched/internal/signal"
	"github.com/zksched/zksched/lifecycle"
)

// AssetFirer starts the runs of the workflows that declare on-assets once their assets have
// had the events they wait for (lifecycle.FireAssets). Every master runs one: the consumer's
// row lock makes one of them at a time start a consumer's runs, and the taking of the events
// commits with the runs, so a master killed in between leaves the events for the next look.
// It looks at start, at every poll, and when its Master hears of new asset events
// (dao.WakeupAssets), while the gate is Active.
type AssetFirer struct {
	m *Master

	// Started, unless nil, is told how many runs each look started (the metrics). Set it
	// before Run.
	Started func(runs int)

	// waiting is a test signal: Run signals it each time it has looked and waits.
	waiting signal.Test[struct{}]
}

// NewAssetFirer returns the part of the master m that starts asset-triggered runs, woken by
// m's wake-ups.
func NewAssetFirer(m *Master) *AssetFirer { return &AssetFirer{m: m} }

// Run starts asset-triggered runs until ctx ends.
func (f *AssetFirer) Run(ctx context.Context) error {
	m := f.m
	tick := m.cfg.Clock.NewTicker(m.cfg.PollInterval)
	defer tick.Stop()
	due := true
	for ctx.Err() == nil {
		active := m.gate.Active()
		if active && due {
			due = f.fire(ctx)
		}
		var now <-chan struct{}
		if active && due {
			now = ready
		} else {
			f.waiting.Signal(struct{}{})
		}
		select {
		case <-ctx.Done():
		case <-tick.Chan():
			due = true
		case <-m.assets:
			due = true
		case <-m.gate.Changed():
		case <-now:
		}
	}
	return nil
}

// fire starts the runs every consumer with queued events can start. It reports whether one
// may have more to start at once (it started as many as one fire starts).
func (f *AssetFirer) fire(ctx context.Context) (more bool) {
	log := f.m.cfg.Log
	names, err := f.m.db.AssetConsumersPending(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Debug().Err(err).Msg("could not list the asset consumers with events; trying again at the next poll")
		}
		return false
	}
	for _, name := range names {
		if !f.m.gate.Active() || ctx.Err() != nil {
			return false
		}
		runs, err := lifecycle.FireAssets(ctx, f.m.db, name)
		if err != nil {
			log.Warn().Err(err).Str("workflow", name).Msg("starting asset-triggered runs failed; retrying at the next poll")
			continue
		}
		if f.Started != nil && len(runs) > 0 {
			f.Started(len(runs))
		}
		for _, r := range runs {
			ids := make([]int64, len(r.Events))
			for i, e := range r.Events {
				ids[i] = e.ID
			}
			log.Info().Str("workflow", name).Int64("workflow_instance", r.Instance).Ints64("asset_events", ids).
				Msg("assets started a run")
		}
		more = more || len(runs) == lifecycle.MaxAssetRunsPerFire
	}
	return more
}
