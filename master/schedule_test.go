package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// fakeGate is a Gate the test opens and closes.
type fakeGate struct {
	mu      sync.Mutex
	active  bool
	changed chan struct{}
	// gen counts the changes made by Set; taken is the gen of the last change channel handed
	// out by Changed, and took is signalled each time Changed hands one out.
	gen, taken int
	took       chan struct{}
}

func newGate(active bool) *fakeGate {
	return &fakeGate{active: active, changed: make(chan struct{}), took: make(chan struct{}, 1)}
}

func (g *fakeGate) Active() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active
}

func (g *fakeGate) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.taken = g.gen
	select {
	case g.took <- struct{}{}:
	default:
	}
	return g.changed
}

// Set opens or closes the gate and returns the change's number.
func (g *fakeGate) Set(active bool) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active = active
	close(g.changed)
	g.changed = make(chan struct{})
	g.gen++
	return g.gen
}

// waitTaken returns once a change channel was handed out after change gen: the loop that
// waits on the gate has seen the change and waits again.
func (g *fakeGate) waitTaken(t *testing.T, gen int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		g.mu.Lock()
		taken := g.taken
		g.mu.Unlock()
		if taken >= gen {
			return
		}
		select {
		case <-g.took:
		case <-deadline:
			t.Fatal("nothing looked at the gate after it changed")
		}
	}
}

type scheduleBundle struct {
	db    *dao.DB
	ctx   context.Context
	clock *clockwork.FakeClock
}

func setupSchedule(t *testing.T, now time.Time) *scheduleBundle {
	t.Helper()
	db, _ := daotest.New(t)
	return &scheduleBundle{db: db, ctx: context.Background(), clock: clockwork.NewFakeClockAt(now)}
}

// setClock moves the fake clock on to at.
func (b *scheduleBundle) setClock(t *testing.T, at time.Time) {
	t.Helper()
	d := at.Sub(b.clock.Now())
	if d < 0 {
		t.Fatalf("the clock cannot go back from %v to %v", b.clock.Now(), at)
	}
	b.clock.Advance(d)
}

// waiting returns once the scheduler waits on its timer: it has one on the fake clock only
// while it waits between two looks at the schedules (Run).
func (b *scheduleBundle) waiting(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err := b.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the scheduler never waited on its timer")
	}
}

// scheduler returns a scheduler named id on the bundle's clock, with a 1 minute misfire
// threshold.
func (b *scheduleBundle) scheduler(id string, gate Gate) *Scheduler {
	return NewScheduler(SchedulerConfig{ID: id, PollInterval: 50 * time.Millisecond, MisfireThreshold: time.Minute,
		Clock: b.clock, Log: zerolog.Nop()}, b.db, gate)
}

// submit stores a workflow file as `zksched submit` does, at the bundle's clock.
func (b *scheduleBundle) submit(t *testing.T, file string) *workflow.Spec {
	t.Helper()
	spec, err := workflow.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.Define(b.ctx, b.db, lifecycle.Definition{Spec: spec}, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	return spec
}

// fired returns the fires of a workflow, oldest first, as "kind@UTC time" (with "/skipped"
// for those that created no instance), and checks that every created fire has its own
// instance whose params carry its fire time.
func (b *scheduleBundle) fired(t *testing.T, name string) []string {
	t.Helper()
	fires, err := b.db.FireList(b.ctx, name, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(fires)
	var out []string
	instances := map[int64]bool{}
	for _, f := range fires {
		s := string(f.Kind) + "@" + f.FireTime.UTC().Format("01-02 15:04")
		if f.Outcome == dao.FireSkipped {
			out = append(out, s+"/skipped")
			continue
		}
		if f.WorkflowInstanceID == nil || instances[*f.WorkflowInstanceID] {
			t.Fatalf("fire %s has instance %v, want one of its own", s, f.WorkflowInstanceID)
		}
		instances[*f.WorkflowInstanceID] = true
		wf, err := b.db.WorkflowGet(b.ctx, *f.WorkflowInstanceID)
		if err != nil {
			t.Fatal(err)
		}
		var params map[string]string
		_ = json.Unmarshal(wf.Params, &params)
		got, err := time.Parse(time.RFC3339, params[workflow.ParamFireTime])
		if err != nil || !got.Equal(f.FireTime) {
			t.Errorf("instance %d of fire %s has fire_time %q", wf.ID, s, params[workflow.ParamFireTime])
		}
		out = append(out, s)
	}
	var n int
	if err := b.db.SQL().GetContext(b.ctx, &n, `SELECT count(*) FROM workflow_instance WHERE workflow_name = $1`, name); err != nil {
		t.Fatal(err)
	}
	if n != len(instances) {
		t.Errorf("%d instances of %s for %d fires that created one", n, name, len(instances))
	}
	return out
}

func (b *scheduleBundle) schedule(t *testing.T, name string) dao.Schedule {
	t.Helper()
	var s *dao.Schedule
	err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		var err error
		s, err = q.ScheduleLock(b.ctx, name)
		return err
	})
	if err != nil || s == nil {
		t.Fatalf("schedule of %s: %v, %v", name, s, err)
	}
	return *s
}

func scheduled(name, schedule string, extra ...string) string {
	return fmt.Sprintf("name: %s\nschedule: %s\n%stasks:\n  - {name: t, type: noop}\n", name, schedule, strings.Join(extra, ""))
}

// TestSchedulerAcrossDST walks the clock minute by minute across New York's fall-back night
// and spring-forward night: an hourly schedule fires in both occurrences of the repeated hour
// and once for the skipped one, a daily 01:30 schedule fires once on the repeated night, and
// a daily 02:30 schedule fires at 03:30 on the skipped night.
func TestSchedulerAcrossDST(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, cron string
		from, to   string // UTC
		want       []string
	}{
		{"hourly-fall", "30 * * * *", "2026-11-01 04:00", "2026-11-01 08:00",
			[]string{"cron@11-01 04:30", "cron@11-01 05:30", "cron@11-01 06:30", "cron@11-01 07:30"}},
		{"daily-fall", "30 1 * * *", "2026-10-31 04:00", "2026-11-02 08:00",
			[]string{"cron@10-31 05:30", "cron@11-01 05:30", "cron@11-02 06:30"}},
		{"hourly-spring", "30 * * * *", "2026-03-08 05:00", "2026-03-08 09:00",
			[]string{"cron@03-08 05:30", "cron@03-08 06:30", "cron@03-08 07:30", "cron@03-08 08:30"}},
		{"daily-spring", "30 2 * * *", "2026-03-07 04:00", "2026-03-09 08:00",
			[]string{"cron@03-07 07:30", "cron@03-08 07:30", "cron@03-09 06:30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupSchedule(t, utcTime(tt.from))
			b.submit(t, scheduled(tt.name, fmt.Sprintf("{cron: %q, timezone: America/New_York}", tt.cron)))
			s := b.scheduler("m1", newGate(true))
			for b.clock.Now().Before(utcTime(tt.to)) {
				b.clock.Advance(time.Minute)
				s.FireDue(b.ctx)
			}
			if got := b.fired(t, tt.name); !slices.Equal(got, tt.want) {
				t.Errorf("fires:\n got  %v\n want %v", got, tt.want)
			}
		})
	}
}

func utcTime(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestTwoSchedulersFireOnce runs two masters' schedulers against one schema, both firing at
// every step, so they race for each fire: each fire is made once, with one instance.
func TestTwoSchedulersFireOnce(t *testing.T) {
	t.Parallel()
	b := setupSchedule(t, utcTime("2026-11-20 10:00"))
	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		b.submit(t, scheduled(n, `{cron: "* * * * *"}`))
	}
	s1, s2 := b.scheduler("m1", newGate(true)), b.scheduler("m2", newGate(true))
	const steps = 30
	for range steps {
		b.clock.Advance(time.Minute)
		var wg sync.WaitGroup
		for _, s := range []*Scheduler{s1, s2, s1, s2} {
			wg.Add(1)
			go func() { defer wg.Done(); s.FireDue(b.ctx) }()
		}
		wg.Wait()
	}
	for _, n := range names {
		got := b.fired(t, n)
		if len(got) != steps {
			t.Errorf("%s fired %d times in %d minutes, want %d: %v", n, len(got), steps, steps, got)
		}
	}
	var by []string
	if err := b.db.SQL().SelectContext(b.ctx, &by, `SELECT DISTINCT fired_by FROM schedule_fire ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	t.Logf("fires made by %v", by)
}

// TestMisfireAfterClusterStop fires once, then moves the clock 10 minutes on without any
// master running (a cluster-wide stop), then fires again: each policy handles the 9 missed
// fires (more than the threshold of a minute late) its own way, and the on-time fire of the
// current minute runs in every case.
func TestMisfireAfterClusterStop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, misfire string
		want          []string
	}{
		{"skip", "misfire: skip", []string{"cron@11-20 10:01", "cron@11-20 10:11"}},
		{"once", "misfire: run-once", []string{"cron@11-20 10:01", "misfire@11-20 10:10", "cron@11-20 10:11"}},
		{"all", "misfire: run-all, misfire-limit: 3", []string{"cron@11-20 10:01", "misfire@11-20 10:08",
			"misfire@11-20 10:09", "misfire@11-20 10:10", "cron@11-20 10:11"}},
		{"all-default-limit", "misfire: run-all", []string{"cron@11-20 10:01", "misfire@11-20 10:02",
			"misfire@11-20 10:03", "misfire@11-20 10:04", "misfire@11-20 10:05", "misfire@11-20 10:06", "misfire@11-20 10:07",
			"misfire@11-20 10:08", "misfire@11-20 10:09", "misfire@11-20 10:10", "cron@11-20 10:11"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupSchedule(t, utcTime("2026-11-20 10:00").Add(30*time.Second))
			b.submit(t, scheduled(tt.name, `{cron: "* * * * *", `+tt.misfire+`}`))
			s := b.scheduler("m1", newGate(true))
			b.clock.Advance(time.Minute) // 10:01:30
			s.FireDue(b.ctx)
			b.clock.Advance(10 * time.Minute) // 10:11:30: 10:02..10:10 are missed, 10:11 is on time
			s.FireDue(b.ctx)
			if got := b.fired(t, tt.name); !slices.Equal(got, tt.want) {
				t.Errorf("fires:\n got  %v\n want %v", got, tt.want)
			}
			if next := b.schedule(t, tt.name).NextFireAt; next == nil || !next.Equal(utcTime("2026-11-20 10:12")) {
				t.Errorf("next fire = %v, want 10:12", next)
			}
		})
	}
}

func TestPlanFiresBoundsMemory(t *testing.T) {
	t.Parallel()
	tt, err := (&workflow.Schedule{Cron: "* * * * *", Timezone: "UTC"}).Timetable()
	if err != nil {
		t.Fatal(err)
	}
	from := utcTime("2026-01-01 00:00")
	now := from.Add(30 * 24 * time.Hour)
	p := planFires(tt, from, now, time.Minute, workflow.MisfireRunAll, 5)
	if len(p.fires) != 7 || p.missed != 30*24*60+1-7 {
		t.Errorf("a month of minutely misfires: %d fires, %d dropped; want the last 5 missed and 2 on time", len(p.fires), p.missed)
	}
	if p.fires[0].at != now.Add(-6*time.Minute) || p.fires[6].at != now || !p.next.Equal(now.Add(time.Minute)) {
		t.Errorf("fires %v .. %v, next %v", p.fires[0].at, p.fires[6].at, p.next)
	}
}

// TestSchedulerGate: an inactive gate fires nothing; once active, the due fire is made.
func TestSchedulerGate(t *testing.T) {
	t.Parallel()
	b := setupSchedule(t, utcTime("2026-11-20 10:00"))
	b.submit(t, scheduled("gated", `{cron: "* * * * *"}`))
	b.setClock(t, utcTime("2026-11-20 10:01"))
	gate := newGate(false)
	s := b.scheduler("m1", gate)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// Several polls go by for the inactive loop to do wrong: each wakes it, and it waits
	// again once it has looked.
	for range 5 {
		b.waiting(t)
		b.clock.Advance(50 * time.Millisecond) // the poll interval
	}
	b.waiting(t)
	if got := b.fired(t, "gated"); len(got) != 0 {
		t.Fatalf("fired %v while the gate was inactive", got)
	}
	// The scheduler fires what is due, then waits on the gate again.
	gate.waitTaken(t, gate.Set(true))
	if got := b.fired(t, "gated"); !slices.Equal(got, []string{"cron@11-20 10:01"}) {
		t.Fatalf("after the gate opened, fires = %v; want the one due", got)
	}
}

// TestWhenFullSkip: a schedule of a workflow at its max-active-instances with when-full skip
// records its fire as skipped, and fires again once a slot is free.
func TestWhenFullSkip(t *testing.T) {
	t.Parallel()
	b := setupSchedule(t, utcTime("2026-11-20 10:00"))
	b.submit(t, scheduled("full", `{cron: "* * * * *"}`, "max-active-instances: 1\nwhen-full: skip\n"))
	s := b.scheduler("m1", newGate(true))
	b.clock.Advance(time.Minute)
	s.FireDue(b.ctx)
	b.clock.Advance(time.Minute)
	s.FireDue(b.ctx)
	if got, want := b.fired(t, "full"), []string{"cron@11-20 10:01", "cron@11-20 10:02/skipped"}; !slices.Equal(got, want) {
		t.Fatalf("fires = %v, want %v", got, want)
	}
	fires, _ := b.db.FireList(b.ctx, "full", 1)
	if fires[0].Reason == nil || !strings.Contains(*fires[0].Reason, "max-active-instances 1") {
		t.Errorf("skip reason = %v", fires[0].Reason)
	}
	got, err := b.db.WorkflowAdmitIfUnderCap(b.ctx, "m1", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("admitted %d, %v; want the first instance", len(got), err)
	}
	if err := b.db.WorkflowFinishIfOwned(b.ctx, got[0].ID, "m1", dao.WorkflowSucceeded, ""); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	s.FireDue(b.ctx)
	if got := b.fired(t, "full"); len(got) != 3 || strings.HasSuffix(got[2], "skipped") {
		t.Errorf("after the slot freed, fires = %v; want a third that created an instance", got)
	}
	// A submit by hand is refused the same way while the workflow is full.
	err = b.db.Tx(b.ctx, func(q *dao.Queries) error {
		_, err := q.WorkflowCreate(b.ctx, dao.Submission{Name: "full", Version: 1})
		return err
	})
	if !errors.Is(err, dao.ErrWorkflowFull) {
		t.Errorf("create at the cap: %v, want ErrWorkflowFull", err)
	}
}

// TestBackfill creates the instances of a range, runs them two at a time (max-active 2,
// queue), and a second backfill of an overlapping range repeats none.
func TestBackfill(t *testing.T) {
	t.Parallel()
	b := setupSchedule(t, utcTime("2026-11-20 10:00"))
	b.submit(t, scheduled("bf", `{cron: "0 * * * *", timezone: Europe/Paris, enabled: false}`,
		"max-active-instances: 2\nwhen-full: skip\n"))
	from, to := utcTime("2026-11-01 00:00"), utcTime("2026-11-01 09:00")
	dry, err := lifecycle.Backfill(b.ctx, b.db, "bf", from, to, "test", true, nil)
	if err != nil || len(dry.Fires) != 10 {
		t.Fatalf("dry run = %d fires, %v; want 10 (both ends included)", len(dry.Fires), err)
	}
	if got := b.fired(t, "bf"); len(got) != 0 {
		t.Fatalf("a dry run fired %v", got)
	}
	res, err := lifecycle.Backfill(b.ctx, b.db, "bf", from, to, "test", false, nil)
	if err != nil || len(res.Fires) != 10 {
		t.Fatalf("backfill = %+v, %v", res, err)
	}
	for _, f := range res.Fires {
		if f.Instance == 0 {
			t.Errorf("fire %v created no instance (%s); a backfill queues even under when-full: skip", f.Time, f.Skipped)
		}
	}
	var ran []int64
	for round := 0; ; round++ {
		got, err := b.db.WorkflowAdmitIfUnderCap(b.ctx, "m1", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		if len(got) > 2 {
			t.Fatalf("round %d admitted %d instances; the cap is 2", round, len(got))
		}
		for _, wf := range got {
			ran = append(ran, wf.ID)
			if err := b.db.WorkflowFinishIfOwned(b.ctx, wf.ID, "m1", dao.WorkflowSucceeded, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(ran) != 10 || !slices.IsSorted(ran) {
		t.Errorf("ran %v; want all 10, oldest fire first", ran)
	}
	again, err := lifecycle.Backfill(b.ctx, b.db, "bf", from.Add(5*time.Hour), to.Add(2*time.Hour), "test", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	for _, f := range again.Fires {
		if f.Instance != 0 {
			created++
		}
	}
	if len(again.Fires) != 7 || created != 2 {
		t.Errorf("overlapping backfill: %d fires, %d created; want 7 and 2", len(again.Fires), created)
	}
	if _, err := lifecycle.Backfill(b.ctx, b.db, "bf", from, from.AddDate(3, 0, 0), "test", false, nil); err == nil ||
		!strings.Contains(err.Error(), "more than") {
		t.Errorf("a range of 26,000 fires: %v; want it refused", err)
	}
	if _, err := lifecycle.Backfill(b.ctx, b.db, "nope", from, to, "test", false, nil); !errors.Is(err, dao.ErrNoSchedule) {
		t.Errorf("backfill of a workflow without schedule: %v", err)
	}
}

// TestStoreSchedule: a resubmit of the same timetable keeps the schedule's progress, a
// changed one starts after now, disabling and enabling skip the disabled time, and a file
// without a schedule removes it.
func TestStoreSchedule(t *testing.T) {
	t.Parallel()
	b := setupSchedule(t, utcTime("2026-11-20 10:00"))
	b.submit(t, scheduled("st", `{cron: "*/10 * * * *"}`))
	if next := b.schedule(t, "st").NextFireAt; !next.Equal(utcTime("2026-11-20 10:10")) {
		t.Fatalf("next = %v, want 10:10", next)
	}
	b.setClock(t, utcTime("2026-11-20 10:25"))
	b.submit(t, scheduled("st", `{cron: "*/10 * * * *"}`, "description: same timetable\n"))
	if s := b.schedule(t, "st"); !s.NextFireAt.Equal(utcTime("2026-11-20 10:10")) || s.WorkflowVersion != 2 {
		t.Fatalf("after a resubmit: next %v version %d; want 10:10 (still due) and version 2", s.NextFireAt, s.WorkflowVersion)
	}
	b.submit(t, scheduled("st", `{cron: "*/15 * * * *"}`, "params: {extra: {}}\n"))
	if next := b.schedule(t, "st").NextFireAt; !next.Equal(utcTime("2026-11-20 10:30")) {
		t.Fatalf("after a new cron: next %v, want 10:30", next)
	}
	if _, err := lifecycle.SetScheduleEnabled(b.ctx, b.db, "st", false, b.clock.Now(), nil); err != nil {
		t.Fatal(err)
	}
	b.setClock(t, utcTime("2026-11-20 12:05"))
	s := b.scheduler("m1", newGate(true))
	s.FireDue(b.ctx)
	if got := b.fired(t, "st"); len(got) != 0 {
		t.Fatalf("a disabled schedule fired %v", got)
	}
	if _, err := lifecycle.SetScheduleEnabled(b.ctx, b.db, "st", true, b.clock.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if next := b.schedule(t, "st").NextFireAt; !next.Equal(utcTime("2026-11-20 12:15")) {
		t.Fatalf("after enabling: next %v, want 12:15, not the fires of the disabled time", next)
	}
	res, err := lifecycle.TriggerSchedule(b.ctx, b.db, "st", map[string]string{"extra": "1"}, "cli", b.clock.Now(), nil)
	if err != nil || res.Instance == 0 {
		t.Fatalf("trigger = %+v, %v", res, err)
	}
	if got := b.fired(t, "st"); !slices.Equal(got, []string{"trigger@11-20 12:05"}) {
		t.Errorf("fires after trigger = %v", got)
	}
	views, err := lifecycle.Schedules(b.ctx, b.db, 3)
	if err != nil || len(views) != 1 || len(views[0].Next) != 3 || !views[0].Next[0].Equal(utcTime("2026-11-20 12:15")) {
		t.Fatalf("Schedules = %+v, %v", views, err)
	}
	b.submit(t, "name: st\ntasks:\n  - {name: t, type: noop}\n")
	if views, _ := lifecycle.Schedules(b.ctx, b.db, 3); len(views) != 0 {
		t.Errorf("a file without a schedule left %d schedules", len(views))
	}
	if _, err := lifecycle.TriggerSchedule(b.ctx, b.db, "st", nil, "cli", b.clock.Now(), nil); !errors.Is(err, dao.ErrNoSchedule) {
		t.Errorf("trigger without a schedule: %v", err)
	}
}
