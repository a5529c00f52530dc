package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// MaxBackfill is the most fires one backfill creates; a larger range is refused so that a
// typo in a bound cannot flood the cluster.
const MaxBackfill = 10_000

// timetable resolves a stored schedule. The start and end are the stored instants; bounded
// false leaves them out, for a backfill, which may reach before the start.
func timetable(s *dao.Schedule, bounded bool) (*workflow.Timetable, error) {
	sc := workflow.Schedule{Cron: s.Cron, Timezone: s.Timezone}
	if bounded {
		sc.Start = s.StartAt.Format(time.RFC3339Nano)
		if s.EndAt != nil {
			sc.End = s.EndAt.Format(time.RFC3339Nano)
		}
	}
	tt, err := sc.Timetable()
	if err != nil {
		return nil, fmt.Errorf("schedule of %q: %w", s.WorkflowName, err)
	}
	return tt, nil
}

// storeSchedule makes the schedule of the workflow spec (version) the one the masters fire,
// in the transaction of the submit that stored the definition; a spec without a schedule
// removes the workflow's schedule. It returns the stored schedule (nil for none), and whether
// a schedule was removed.
//
// The fire times already reached are kept when the timetable did not change, so a resubmit
// neither repeats nor misses a fire. A new or changed timetable, or a schedule being enabled,
// starts with the first fire time after now (and not before its start): fires before the
// schedule existed are not missed fires, and are run only by a backfill.
func storeSchedule(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int, now time.Time) (*dao.Schedule, bool, error) {
	old, err := q.ScheduleLock(ctx, spec.Name)
	if err != nil {
		return nil, false, err
	}
	if spec.Schedule == nil {
		if old == nil {
			return nil, false, nil
		}
		removed, err := q.ScheduleDelete(ctx, spec.Name)
		return nil, removed, err
	}
	tt, err := spec.Schedule.Timetable()
	if err != nil {
		return nil, false, fmt.Errorf("schedule of %q: %w", spec.Name, err)
	}
	s := &dao.Schedule{WorkflowName: spec.Name, WorkflowVersion: version, Cron: spec.Schedule.Cron,
		Timezone: spec.Schedule.Timezone, StartAt: tt.Start(), Enabled: spec.Schedule.Enabled,
		Misfire: spec.Schedule.Misfire, MisfireLimit: spec.Schedule.MisfireLimit}
	if s.StartAt.IsZero() {
		s.StartAt = now
		if old != nil && old.Cron == s.Cron && old.Timezone == s.Timezone {
			s.StartAt = old.StartAt
		}
	}
	if end := tt.End(); !end.IsZero() {
		s.EndAt = &end
	}
	same := old != nil && old.Cron == s.Cron && old.Timezone == s.Timezone && old.StartAt.Equal(s.StartAt) && old.Enabled
	if same {
		s.NextFireAt, s.LastFireAt = old.NextFireAt, old.LastFireAt
	} else {
		s.NextFireAt = timePtr(nextFire(s, now))
		if old != nil {
			s.LastFireAt = old.LastFireAt
		}
	}
	return s, false, q.SchedulePut(ctx, *s)
}

// nextFire is the first fire time of s after now, zero if there is none.
func nextFire(s *dao.Schedule, now time.Time) time.Time {
	tt, err := timetable(s, true)
	if err != nil {
		return time.Time{}
	}
	return tt.Next(now)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// SetScheduleEnabled enables or disables the schedule of a workflow. Enabling starts again
// with the first fire time after now: the fires of the time it was disabled are not missed
// fires. It returns dao.ErrNoSchedule for a workflow without one. audit, unless nil, is the
// change's audit_event row, written in its transaction.
func SetScheduleEnabled(ctx context.Context, db *dao.DB, name string, enabled bool, now time.Time, audit *dao.AuditEvent) (*dao.Schedule, error) {
	var s *dao.Schedule
	err := db.Tx(ctx, func(q *dao.Queries) error {
		var err error
		if s, err = lockSchedule(ctx, q, name); err != nil {
			return err
		}
		next := s.NextFireAt
		if enabled && !s.Enabled {
			next = timePtr(nextFire(s, now))
		}
		s.Enabled, s.NextFireAt = enabled, next
		if err := q.ScheduleSetEnabled(ctx, name, enabled, next); err != nil {
			return err
		}
		return auditIn(ctx, q, audit)
	})
	return s, err
}

// auditIn writes audit, unless nil, on the transaction's q.
func auditIn(ctx context.Context, q *dao.Queries, audit *dao.AuditEvent) error {
	if audit == nil {
		return nil
	}
	return q.AuditInsert(ctx, *audit)
}

func lockSchedule(ctx context.Context, q *dao.Queries, name string) (*dao.Schedule, error) {
	s, err := q.ScheduleLock(ctx, name)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("workflow %q: %w", name, dao.ErrNoSchedule)
	}
	return s, nil
}

// FireResult is what one fire did.
type FireResult struct {
	Time time.Time
	Kind dao.FireKind
	// Instance is the workflow instance created; 0 when none was.
	Instance int64
	// Skipped says why no instance was created: the workflow was full (when-full: skip), or
	// the fire was handled before (Duplicate).
	Skipped   string
	Duplicate bool
}

// A Firer creates the instances of fires of one locked schedule, in its transaction: the
// masters' Scheduler, TriggerSchedule and Backfill fire through it.
type Firer struct {
	q    *dao.Queries
	s    *dao.Schedule
	spec *workflow.Spec
	tt   *workflow.Timetable
	by   string
}

// NewFirer returns the Firer of the schedule s, locked in q's transaction, recording by on
// its fires. bounded keeps the fires within the schedule's start and end; a backfill's and a
// trigger's are not.
func NewFirer(ctx context.Context, q *dao.Queries, s *dao.Schedule, by string, bounded bool) (*Firer, error) {
	raw, err := q.DefinitionGet(ctx, s.WorkflowName, s.WorkflowVersion)
	if err != nil {
		return nil, err
	}
	spec := new(workflow.Spec)
	if err := json.Unmarshal(raw, spec); err != nil {
		return nil, fmt.Errorf("definition %s version %d: %w", s.WorkflowName, s.WorkflowVersion, err)
	}
	tt, err := timetable(s, bounded)
	if err != nil {
		return nil, err
	}
	return &Firer{q: q, s: s, spec: spec, tt: tt, by: by}, nil
}

// lockFirer locks the schedule of the workflow name in q's transaction and returns its
// Firer for fires by hand (a trigger's, a backfill's), not bounded by its start and end.
func lockFirer(ctx context.Context, q *dao.Queries, name, by string) (*Firer, error) {
	s, err := lockSchedule(ctx, q, name)
	if err != nil {
		return nil, err
	}
	return NewFirer(ctx, q, s, by, false)
}

// Timetable is the schedule's timetable.
func (f *Firer) Timetable() *workflow.Timetable { return f.tt }

// Fire handles the fire at t once: it records it (a fire recorded before is left alone and
// reported as a duplicate) and creates its workflow instance with the fire's params, given
// params on top. queue makes the instance wait for a slot even under when-full: skip.
func (f *Firer) Fire(ctx context.Context, t time.Time, kind dao.FireKind, params map[string]string, queue bool) (FireResult, error) {
	res := FireResult{Time: t, Kind: kind}
	ok, err := f.q.FireInsert(ctx, f.s.WorkflowName, t, kind, f.by)
	if err != nil {
		return res, err
	}
	if !ok {
		res.Duplicate, res.Skipped = true, "fired before"
		return res, nil
	}
	p := f.tt.FireParams(t)
	maps.Copy(p, params)
	raw, err := json.Marshal(p)
	if err != nil {
		return res, err
	}
	id, err := Submit(ctx, f.q, Submission{Spec: f.spec, Version: f.s.WorkflowVersion, Params: raw,
		Priority: f.spec.Priority, Queue: queue})
	switch {
	case errors.Is(err, dao.ErrKeyFull):
		res.Skipped = fmt.Sprintf("concurrency key at its max %d (when-full: skip)", f.spec.Concurrency.Max)
		return res, f.q.FireResolve(ctx, f.s.WorkflowName, t, nil, res.Skipped)
	case errors.Is(err, dao.ErrWorkflowFull):
		res.Skipped = fmt.Sprintf("max-active-instances %d reached (when-full: skip)", f.spec.MaxActiveInstances)
		return res, f.q.FireResolve(ctx, f.s.WorkflowName, t, nil, res.Skipped)
	case err != nil:
		return res, err
	}
	res.Instance = id
	return res, f.q.FireResolve(ctx, f.s.WorkflowName, t, &id, "")
}

// TriggerSchedule fires the schedule of a workflow now, by hand, whether it is enabled or not: one
// instance whose fire time is now, params on top of the fire's. It follows the workflow's
// when-full policy. It returns dao.ErrNoSchedule for a workflow without a schedule. audit,
// unless nil, is the trigger's audit_event row, written in its transaction whether or not the
// fire created an instance.
func TriggerSchedule(ctx context.Context, db *dao.DB, name string, params map[string]string, by string, now time.Time, audit *dao.AuditEvent) (FireResult, error) {
	var res FireResult
	if err := workflow.CheckParams(params); err != nil {
		return res, fmt.Errorf("trigger of %q: %w", name, err)
	}
	err := db.Tx(ctx, func(q *dao.Queries) error {
		f, err := lockFirer(ctx, q, name, by)
		if err != nil {
			return err
		}
		// PostgreSQL keeps microseconds: the recorded fire time is the one in the params.
		if res, err = f.Fire(ctx, now.Truncate(time.Microsecond), dao.FireTrigger, params, false); err != nil {
			return err
		}
		return auditIn(ctx, q, audit)
	})
	return res, err
}

// BackfillResult is what a backfill did, fire by fire in time order.
type BackfillResult struct {
	Fires []FireResult
	// Location is the schedule's time zone, to show the fire times in.
	Location *time.Location
}

// Backfill creates the instances of every fire time of a workflow's schedule in [from, to],
// whether the schedule is enabled or not, and also before its start or after its end. A fire
// time handled before (by the masters, a trigger or an earlier backfill) is left alone, so a
// backfill can be repeated. The instances respect max-active-instances: they wait for slots
// and run as many at a time as the cap allows, oldest fire first; under when-full: skip they
// wait too, since every run was asked for. dryRun lists the fire times and creates nothing.
// audit, unless nil, is the backfill's audit_event row, written in its transaction (not for a
// dry run, which changes nothing).
func Backfill(ctx context.Context, db *dao.DB, name string, from, to time.Time, by string, dryRun bool, audit *dao.AuditEvent) (BackfillResult, error) {
	var res BackfillResult
	if to.Before(from) {
		return res, fmt.Errorf("backfill of %q: --to %s is before --from %s", name, to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	err := db.Tx(ctx, func(q *dao.Queries) error {
		res.Fires = nil
		f, err := lockFirer(ctx, q, name, by)
		if err != nil {
			return err
		}
		res.Location = f.tt.Location()
		times, more := f.tt.Between(from, to, MaxBackfill)
		if more {
			return fmt.Errorf("backfill of %q: the range holds more than %d fire times; split it", name, MaxBackfill)
		}
		for _, t := range times {
			if dryRun {
				res.Fires = append(res.Fires, FireResult{Time: t, Kind: dao.FireBackfill})
				continue
			}
			r, err := f.Fire(ctx, t, dao.FireBackfill, nil, true)
			if err != nil {
				return err
			}
			res.Fires = append(res.Fires, r)
		}
		if dryRun {
			return nil
		}
		return auditIn(ctx, q, audit)
	})
	return res, err
}

// ScheduleView is a schedule as the CLI, the API and the UI show it.
type ScheduleView struct {
	dao.ScheduleRow
	// Next are the next fire times, in the schedule's time zone; empty for a disabled or
	// finished schedule.
	Next     []time.Time
	Location *time.Location
	// Problem is set when the stored schedule no longer resolves (a zone removed from the
	// zone database): the masters cannot fire it.
	Problem string
}

// ScheduleJSON is a schedule as the API and `zksched schedule list --json` show it.
type ScheduleJSON struct {
	Workflow     string      `json:"workflow"`
	Version      int         `json:"version"`
	Cron         string      `json:"cron"`
	Timezone     string      `json:"timezone"`
	Enabled      bool        `json:"enabled"`
	Misfire      string      `json:"misfire"`
	MisfireLimit int         `json:"misfire_limit,omitempty"`
	Start        time.Time   `json:"start"`
	End          *time.Time  `json:"end,omitempty"`
	LastFire     *time.Time  `json:"last_fire,omitempty"`
	Next         []time.Time `json:"next"`
	Active       int         `json:"active"`
	Problem      string      `json:"problem,omitempty"`
}

// JSON returns the view in its JSON form.
func (v ScheduleView) JSON() ScheduleJSON {
	out := ScheduleJSON{Workflow: v.WorkflowName, Version: v.WorkflowVersion, Cron: v.Cron, Timezone: v.Timezone,
		Enabled: v.Enabled, Misfire: v.Misfire, MisfireLimit: v.MisfireLimit, Start: v.StartAt, End: v.EndAt,
		LastFire: v.LastFireAt, Next: v.Next, Active: v.Active, Problem: v.Problem}
	if out.Next == nil {
		out.Next = []time.Time{}
	}
	return out
}

// Schedules returns every schedule with its next n fire times, starting with the one due but
// not yet handled (in the past when no master has fired it yet).
func Schedules(ctx context.Context, db *dao.DB, n int) ([]ScheduleView, error) {
	rows, err := db.ScheduleList(ctx)
	if err != nil {
		return nil, err
	}
	views := make([]ScheduleView, len(rows))
	for i, r := range rows {
		v := ScheduleView{ScheduleRow: r}
		tt, err := timetable(&r.Schedule, true)
		if err != nil {
			v.Problem = err.Error()
			views[i] = v
			continue
		}
		v.Location = tt.Location()
		if r.Enabled && r.NextFireAt != nil {
			// A fire due but not yet handled comes first.
			for t := tt.Next(r.NextFireAt.Add(-time.Nanosecond)); !t.IsZero() && len(v.Next) < n; t = tt.Next(t) {
				v.Next = append(v.Next, t)
			}
		}
		views[i] = v
	}
	return views, nil
}
