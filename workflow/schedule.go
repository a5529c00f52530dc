package workflow

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // a zone the machine lacks still resolves, the same on every master

	"github.com/robfig/cron/v3"
)

// Misfire policies: what a schedule does with fires that came due while no master could fire
// them (every master was stopped, or cut off from ZooKeeper), once a master is back.
const (
	// MisfireSkip drops missed fires; the schedule goes on from the next one.
	MisfireSkip = "skip"
	// MisfireRunOnce runs one instance for the latest missed fire. The default.
	MisfireRunOnce = "run-once"
	// MisfireRunAll runs every missed fire, the most recent MisfireLimit of them.
	MisfireRunAll = "run-all"
)

// Policies for a workflow at its max-active-instances.
const (
	// WhenFullQueue keeps a new instance waiting until an active one finishes. The default.
	WhenFullQueue = "queue"
	// WhenFullSkip creates no instance: a fire is recorded as skipped, a submit is refused.
	WhenFullSkip = "skip"
)

// Bounds of the workflow-level policies.
const (
	// DefaultMisfireLimit is the misfire-limit of a run-all schedule that names none.
	DefaultMisfireLimit = 10
	// MaxMisfireLimit is the largest misfire-limit: a longer catch-up is a backfill.
	MaxMisfireLimit = 1000
	// MaxActiveInstances is the largest max-active-instances.
	MaxActiveInstances = 10_000
)

// The params a fire gives its workflow instance, beside the workflow's own.
const (
	// ParamFireTime is the fire's logical time, RFC 3339 in the schedule's time zone.
	ParamFireTime = "fire_time"
	// ParamFireDate is the local date of the fire, 2006-01-02, in the schedule's time zone.
	ParamFireDate = "fire_date"
)

// Schedule is when a workflow runs by itself. Start and End are stored as written (see
// ParseTime), so the stored spec reads like the file; Timetable resolves them.
type Schedule struct {
	// Cron is a 5-field cron expression (minute hour day-of-month month day-of-week) or one
	// of @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly.
	Cron string `json:"cron" yaml:"cron"`
	// Timezone is the IANA zone the expression is read in; Parse sets "UTC" when the file
	// names none.
	Timezone string `json:"timezone" yaml:"timezone"`
	// Start is the earliest fire time; empty means from when the schedule is stored.
	Start string `json:"start,omitempty" yaml:"start,omitempty"`
	// End is the latest fire time; empty means none.
	End string `json:"end,omitempty" yaml:"end,omitempty"`
	// Enabled says whether the masters fire the schedule; Parse sets true when the file
	// does not say.
	Enabled bool `json:"enabled" yaml:"enabled"`
	// Misfire is MisfireSkip, MisfireRunOnce or MisfireRunAll; Parse sets MisfireRunOnce
	// when the file names none.
	Misfire string `json:"misfire" yaml:"misfire"`
	// MisfireLimit caps how many missed fires run-all runs; Parse sets
	// DefaultMisfireLimit for run-all when the file names none.
	MisfireLimit int `json:"misfire-limit,omitempty" yaml:"misfire-limit,omitempty"`
}

// Timetable is a resolved schedule: the fire times of a cron expression in a time zone,
// between a start and an end. Daylight-saving time follows the rules of the classic cron
// daemon:
//
//   - A wall-clock time that does not exist (the clocks jump over it) fires once, moved
//     forward by the length of the jump: 02:30 on a night that skips 02:00–03:00 fires at
//     03:30 (as Python's zoneinfo reads it). A fire time that lands on one that exists
//     already fires once.
//   - A wall-clock time that occurs twice (the clocks go back) fires at its first
//     occurrence only, unless the hour field is "*" (as in @hourly or */15 * * * *): a
//     schedule that runs every hour then also runs in the repeated hour, so it keeps its
//     real-time rhythm.
type Timetable struct {
	spec      *cron.SpecSchedule
	loc       *time.Location
	everyHour bool
	start     time.Time // zero: none
	end       time.Time // zero: none
}

// Timetable resolves s; it fails on an invalid expression, an unknown time zone, an
// unreadable start or end, or an end before the start.
func (s *Schedule) Timetable() (*Timetable, error) {
	loc, err := LoadLocation(s.Timezone)
	if err != nil {
		return nil, err
	}
	spec, err := ParseCron(s.Cron)
	if err != nil {
		return nil, err
	}
	tt := &Timetable{spec: spec, loc: loc, everyHour: spec.Hour&allHours == allHours}
	if s.Start != "" {
		if tt.start, err = ParseTime(s.Start, loc); err != nil {
			return nil, fmt.Errorf("start: %w", err)
		}
	}
	if s.End != "" {
		if tt.end, err = ParseEnd(s.End, loc); err != nil {
			return nil, fmt.Errorf("end: %w", err)
		}
	}
	if !tt.start.IsZero() && !tt.end.IsZero() && tt.end.Before(tt.start) {
		return nil, fmt.Errorf("end %s is before start %s", s.End, s.Start)
	}
	return tt, nil
}

const allHours = 1<<24 - 1

// LoadLocation resolves an IANA time zone name, with a message that says what is expected.
// The zone database is compiled into the binary (time/tzdata) as a fallback, so a zone the
// machine lacks still resolves.
func LoadLocation(name string) (*time.Location, error) {
	// time.LoadLocation reads "" as UTC and "Local" as the machine's zone: neither is a
	// name every master resolves alike.
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("timezone %s is not an IANA time zone name such as \"UTC\", \"Europe/Berlin\" or \"America/New_York\"", quote(name))
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("timezone %s is not a known IANA time zone (such as \"UTC\", \"Europe/Berlin\" or \"America/New_York\")", quote(name))
	}
	return loc, nil
}

// ParseCron reads a 5-field cron expression or an @-descriptor. It refuses what the cron
// library accepts but a schedule cannot honour: @every (not tied to the clock) and a TZ=
// prefix (the zone is the schedule's timezone field).
func ParseCron(expr string) (*cron.SpecSchedule, error) {
	expr = strings.TrimSpace(expr)
	switch {
	case expr == "":
		return nil, errors.New("cron is required: 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily")
	case strings.HasPrefix(expr, "@every"):
		return nil, fmt.Errorf("cron %s: @every is not supported; write a cron expression such as \"*/10 * * * *\"", quote(expr))
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return nil, fmt.Errorf("cron %s: set the time zone with the schedule's timezone field, not in the expression", quote(expr))
	}
	sched, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("cron %s is invalid: %s (write 5 fields: minute hour day-of-month month day-of-week, or a descriptor such as @daily)", quote(expr), clip(err.Error()))
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("cron %s is not a calendar expression", quote(expr))
	}
	return spec, nil
}

// timeLayouts are the forms ParseTime accepts without an offset, read in the schedule's zone.
var timeLayouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"}

// ParseTime reads a schedule time (start, end, a backfill bound): RFC 3339 with an offset
// ("2026-11-01T02:00:00+01:00", "2026-11-01T01:00:00Z"), or a local time in loc
// ("2026-11-01T02:00", "2026-11-01 02:00:00", "2026-11-01" for midnight). A local time that
// does not exist in loc (skipped by a daylight-saving change) is moved forward by the change.
func ParseTime(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range timeLayouts {
		wall, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		t := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), 0, loc)
		if _, off := t.Zone(); !naive(t, off).Equal(wall) {
			// The wall time does not exist: read it with the offset from before the jump,
			// which moves it forward by the jump as Timetable does.
			_, before := t.Add(-24 * time.Hour).Zone()
			t = wall.Add(-time.Duration(before) * time.Second).In(loc)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s is not a time: write 2026-11-01, 2026-11-01T02:00 (in the schedule's timezone) or RFC 3339 such as 2026-11-01T02:00:00Z", quote(s))
}

// ParseEnd reads the last time of a range (a schedule's end, a backfill's --to) as ParseTime
// does, except that a date alone means the whole of that day: its last nanosecond, so that
// "--to 2026-10-31" includes the fires of the 31st.
func ParseEnd(s string, loc *time.Location) (time.Time, error) {
	t, err := ParseTime(s, loc)
	if err != nil {
		return t, err
	}
	if _, derr := time.Parse("2006-01-02", s); derr == nil {
		next := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
		t = next.Add(-time.Nanosecond)
	}
	return t, nil
}

// Location returns the time zone the timetable is read in.
func (tt *Timetable) Location() *time.Location { return tt.loc }

// Start returns the earliest fire time; zero when there is no start.
func (tt *Timetable) Start() time.Time { return tt.start }

// End returns the latest fire time; zero when there is no end.
func (tt *Timetable) End() time.Time { return tt.end }

// Next returns the first fire time strictly after t, within the start and end; zero when
// there is none.
func (tt *Timetable) Next(t time.Time) time.Time {
	if !tt.start.IsZero() && t.Before(tt.start) {
		t = tt.start.Add(-time.Nanosecond)
	}
	next := tt.next(t)
	if next.IsZero() || (!tt.end.IsZero() && next.After(tt.end)) {
		return time.Time{}
	}
	return next.In(tt.loc)
}

// Between returns the fire times in [from, to], at most limit of them (limit <= 0: no limit),
// and whether there were more.
func (tt *Timetable) Between(from, to time.Time, limit int) ([]time.Time, bool) {
	var out []time.Time
	for t := tt.Next(from.Add(-time.Nanosecond)); !t.IsZero() && !t.After(to); t = tt.Next(t) {
		if limit > 0 && len(out) == limit {
			return out, true
		}
		out = append(out, t)
	}
	return out, false
}

// next finds the first fire time after t, one zone period (a stretch of constant UTC offset)
// at a time. Within a period, wall-clock time and instants map one to one, so the cron
// library can search wall-clock times written as UTC times ("naive" walls) without ever
// seeing a daylight-saving change. At the edges of a period, the walls a period owns are
// adjusted for the rules in Timetable's comment: the walls of a forward jump belong to the
// period before it, mapped with its offset; the repeated walls after a backward jump belong
// to the period after it only when the hour field is "*".
func (tt *Timetable) next(after time.Time) time.Time {
	var best time.Time
	// Start a day early: the walls of a forward jump belong to the period before it, so a
	// time just after the jump may still have a moved fire ahead of it.
	t := after.Add(-25 * time.Hour)
	// A period lasts months in practice; the bound only stops a pathological zone.
	for range 1000 {
		local := t.In(tt.loc)
		start, end := local.ZoneBounds()
		_, off := local.Zone()
		lo, hi := naive(start, off), naive(end, off)
		if !start.IsZero() && !tt.everyHour {
			if _, prev := start.Add(-time.Nanosecond).In(tt.loc).Zone(); prev > off {
				lo = naive(start, prev)
			}
		}
		if !end.IsZero() {
			if _, nxt := end.In(tt.loc).Zone(); nxt > off {
				hi = naive(end, nxt)
			}
		}
		from := naive(after, off)
		if !start.IsZero() && from.Before(lo) {
			from = lo.Add(-time.Nanosecond)
		}
		w := tt.spec.Next(from)
		if w.IsZero() {
			return best
		}
		if end.IsZero() || w.Before(hi) {
			inst := w.Add(-time.Duration(off) * time.Second)
			if best.IsZero() || inst.Before(best) {
				best = inst
			}
		}
		if end.IsZero() || (!best.IsZero() && best.Before(end)) {
			return best
		}
		t = end
	}
	return best
}

// naive returns the wall-clock time of t at UTC offset off (seconds), written as a UTC time.
func naive(t time.Time, off int) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Add(time.Duration(off) * time.Second)
}

// FireParams returns the params a fire at t gives its workflow instance.
func (tt *Timetable) FireParams(t time.Time) map[string]string {
	local := t.In(tt.loc)
	return map[string]string{ParamFireTime: local.Format(time.RFC3339), ParamFireDate: local.Format(time.DateOnly)}
}
