package master

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/faultinject"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// SchedulerConfig configures a Scheduler.
type SchedulerConfig struct {
	// ID is the node identity, recorded on the fires it makes.
	ID string
	// PollInterval is the longest the scheduler sleeps: it bounds how long a new, changed or
	// re-enabled schedule waits to be seen. Between polls it wakes at the next fire time.
	PollInterval time.Duration
	// MisfireThreshold is how late a fire may be handled and still count as on time; an
	// older one was missed (no master could fire it) and follows its schedule's misfire
	// policy.
	MisfireThreshold time.Duration
	// Clock is the time source of the fire times and of the waits between them; nil is the
	// real clock. Tests give it a fake one to walk across daylight-saving changes and
	// outages without waiting.
	Clock clockwork.Clock
	Log   zerolog.Logger
}

// Scheduler fires the cron schedules of workflows. Every master runs one: any of them may
// fire a schedule, and the idempotent record of each fire (dao.FireInsert, keyed by workflow
// and fire time) under the schedule's row lock decides who does, so two masters, a failover
// or a restart never create two instances for one fire. It fires only while its gate is
// active, like the rest of the master. A fire is made when the clock of the master that makes
// it reaches the fire time, so keep the masters' clocks synchronised (NTP): a master whose
// clock runs ahead fires early, though never twice.
type Scheduler struct {
	cfg  SchedulerConfig
	db   *dao.DB
	gate Gate
}

// NewScheduler returns a Scheduler.
func NewScheduler(cfg SchedulerConfig, db *dao.DB, gate Gate) *Scheduler {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	return &Scheduler{cfg: cfg, db: db, gate: gate}
}

// Run fires due schedules until ctx ends, sleeping until the next fire time or the poll
// interval, whichever comes first.
func (s *Scheduler) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		wait := s.cfg.PollInterval
		if s.gate.Active() {
			if next := s.FireDue(ctx); !next.IsZero() {
				wait = min(wait, max(next.Sub(s.cfg.Clock.Now()), 0))
			}
		}
		timer := s.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-timer.Chan():
		case <-s.gate.Changed():
		}
		timer.Stop()
	}
	return nil
}

// FireDue fires every schedule due now, once, and returns the earliest fire time still
// ahead (zero if none or on error; the next poll looks again).
func (s *Scheduler) FireDue(ctx context.Context) time.Time {
	now := s.cfg.Clock.Now()
	due, later, err := s.db.ScheduleListDue(ctx, now)
	if err != nil {
		s.warn(ctx, err, "list due schedules")
		return time.Time{}
	}
	for _, name := range due {
		if !s.gate.Active() || ctx.Err() != nil {
			return time.Time{}
		}
		next, err := s.fireSchedule(ctx, name, now)
		if err != nil {
			s.cfg.Log.Warn().Err(err).Str("workflow", name).Msg("firing schedule failed; retrying")
			continue
		}
		if !next.IsZero() && (later.IsZero() || next.Before(later)) {
			later = next
		}
	}
	return later
}

// fireSchedule fires one due schedule in one transaction: it locks the schedule (a master
// already firing it holds the lock, and this one moves on), plans the fires from the first
// not yet handled up to now, creates their instances and moves the schedule on. It returns
// the schedule's next fire time.
func (s *Scheduler) fireSchedule(ctx context.Context, name string, now time.Time) (time.Time, error) {
	var next time.Time
	var results []lifecycle.FireResult
	var missed int
	err := s.db.Tx(ctx, func(q *dao.Queries) error {
		results, missed = nil, 0
		sch, err := q.ScheduleLockIfDue(ctx, name, now)
		if err != nil {
			return err
		}
		if sch == nil {
			s.cfg.Log.Debug().Str("workflow", name).Msg("schedule no longer due, or another master is firing it")
			return nil
		}
		f, err := lifecycle.NewFirer(ctx, q, sch, s.cfg.ID, true)
		if err != nil {
			return err
		}
		p := planFires(f.Timetable(), *sch.NextFireAt, now, s.cfg.MisfireThreshold, sch.Misfire, sch.MisfireLimit)
		var last *time.Time
		for _, pf := range p.fires {
			r, err := f.Fire(ctx, pf.at, pf.kind, nil, false)
			if err != nil {
				return err
			}
			results = append(results, r)
			last = &pf.at
		}
		next, missed = p.next, p.missed
		var nextAt *time.Time
		if !p.next.IsZero() {
			nextAt = &p.next
		}
		if err := q.ScheduleAdvance(ctx, name, nextAt, last); err != nil {
			return err
		}
		// The fires and their instances are written, not committed: a master killed here
		// leaves nothing behind, and another master makes the same fires.
		faultinject.Point("schedule-before-commit")
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	for _, r := range results {
		ev := s.cfg.Log.Info().Str("workflow", name).Time("fire_time", r.Time).Str("kind", string(r.Kind))
		switch {
		case r.Instance != 0:
			ev.Int64("workflow_instance", r.Instance).Msg("schedule fired")
		default:
			ev.Str("reason", r.Skipped).Msg("schedule fire created no instance")
		}
	}
	if missed > 0 {
		s.cfg.Log.Warn().Str("workflow", name).Int("missed", missed).
			Msg("missed fires dropped by the schedule's misfire policy")
	}
	return next, nil
}

// plannedFire is one fire to make.
type plannedFire struct {
	at   time.Time
	kind dao.FireKind
}

// firePlan is what a master does with a due schedule.
type firePlan struct {
	fires []plannedFire
	// missed counts the missed fires the misfire policy drops.
	missed int
	// next is the first fire time after now; zero once past the end.
	next time.Time
}

// planFires decides which fires of tt from the first not yet handled (from) up to now to
// make. Fires at most threshold old are on time and all run. Older ones were missed — no
// master could fire them, as in a cluster-wide stop — and follow the policy: skip drops them,
// run-once runs the latest of them, run-all runs the latest limit of them. Fires run oldest
// first.
func planFires(tt *workflow.Timetable, from, now time.Time, threshold time.Duration, policy string, limit int) firePlan {
	var p firePlan
	keep := 1
	if policy == workflow.MisfireRunAll {
		keep = max(limit, 1)
	}
	// Only the latest keep missed fires can run; older ones are counted, not kept, so an
	// outage of a year on a minutely schedule costs time, not memory.
	var missed []time.Time
	var onTime []time.Time
	total := 0
	for t := tt.Next(from.Add(-time.Nanosecond)); !t.IsZero() && !t.After(now); t = tt.Next(t) {
		if now.Sub(t) <= threshold {
			onTime = append(onTime, t)
			continue
		}
		total++
		missed = append(missed, t)
		if len(missed) > keep {
			missed = missed[1:]
		}
	}
	if policy == workflow.MisfireSkip {
		missed = nil
	}
	for _, t := range missed {
		p.fires = append(p.fires, plannedFire{at: t, kind: dao.FireMisfire})
	}
	for _, t := range onTime {
		p.fires = append(p.fires, plannedFire{at: t, kind: dao.FireCron})
	}
	p.missed = total - len(missed)
	p.next = tt.Next(now)
	return p
}

func (s *Scheduler) warn(ctx context.Context, err error, what string) {
	if ctx.Err() != nil {
		return
	}
	s.cfg.Log.Warn().Err(err).Msg(what + " failed; retrying")
}
