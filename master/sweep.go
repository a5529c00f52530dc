package master

import (
	"context"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/alarm"
	"github.com/zksched/zksched/internal/signal"
)

// sweepSlice is how many unowned running instances one step of the sweep looks at (each an
// index probe of its tasks): a step every poll bounds the sweep's cost whatever the backlog,
// and passes over 10,000 such instances in ten polls.
const sweepSlice = 1000

// Sweep finds the unowned running instances whose last task's wake-up no master heard (its
// worker died between the commit and the wake-up, or the master's listener was away) and has
// its Master claim and advance them. It takes a step of Config.SweepSlice instances every
// poll, and a whole pass, step after step, at start, at every change of the gate and at every
// Rescan wake-up the Master's listener hears; a whole pass skips the instances whose last
// task ended in the last dao.StrandedAfter (their wake-up may be on its way, or may have been
// what was missed), so a second whole pass follows once that has passed. A failed step waits
// for the next poll (or the next reason for a whole pass). It acts only while the gate is
// Active.
type Sweep struct {
	m *Master
	// sweptTo is where the sweep goes on from (an id; 0: the start). Only Run touches it.
	sweptTo int64

	// swept is a test signal: Run signals it each time the sweep has reached the last unowned
	// running instance.
	swept signal.Test[struct{}]
}

// NewSweep returns the sweep of m, on m's Config. A Master has at most one: m's listener
// forwards its Rescan wake-ups to it.
func NewSweep(m *Master) *Sweep { return &Sweep{m: m} }

// Run sweeps until ctx ends.
func (s *Sweep) Run(ctx context.Context) error {
	m := s.m
	clock := m.cfg.Clock
	tick := clock.NewTicker(m.cfg.PollInterval)
	defer tick.Stop()
	// whole asks for a whole pass, step for one step.
	whole, step := false, false
	again := alarm.New(clock)
	defer again.Stop()
	pass := func() { whole, s.sweptTo = true, 0 }
	passNow := func() {
		pass()
		again.Set(dao.StrandedAfter + time.Second)
	}
	passNow()
	for ctx.Err() == nil {
		active := m.gate.Active()
		if active && (whole || step) {
			// A failed step waits for the next poll.
			if done, ok := s.sweepOne(ctx); ok {
				whole = whole && !done
				if done {
					s.swept.Signal(struct{}{})
				}
			} else {
				whole = false
			}
			step = false
		}
		// In a whole pass, the next step follows at once.
		var now <-chan struct{}
		if active && whole {
			now = ready
		}
		select {
		case <-ctx.Done():
		case <-tick.Chan():
			step = true
		case <-m.gate.Changed():
			passNow()
		case <-m.rescans:
			passNow()
		case <-again.C():
			again.Fired()
			pass()
		case <-now:
		}
	}
	return nil
}

// sweepOne takes one step of the sweep: of the next sweepSlice unowned running instances, it
// claims and advances those with no task left queued or running, whose last task's wake-up
// no master heard (see dao.WorkflowClaimStranded). It reports whether the step reached the
// last such instance (the next step starts over), and success.
func (s *Sweep) sweepOne(ctx context.Context) (done, ok bool) {
	m := s.m
	slice := m.cfg.SweepSlice
	if slice <= 0 {
		slice = sweepSlice
	}
	st, upto, n, err := m.drive.SweepAndAdvance(ctx, s.sweptTo, slice)
	if err != nil {
		m.warn(ctx, err, "sweep unowned workflow instances")
		return false, false
	}
	m.record(st, true)
	if n < slice {
		s.sweptTo = 0
		return true, true
	}
	s.sweptTo = upto
	return false, true
}
