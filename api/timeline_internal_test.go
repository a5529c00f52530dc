package api

import (
	"slices"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

// TestBuildTimeline lays out a task failed over, retried and running again, and a task still
// queued: a bar per attempt by outcome, the waits between them, every bar on the axis, the
// last attempt's worker named, and ticks in order.
func TestBuildTimeline(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time {
		return time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC).Add(time.Duration(s) * time.Second)
	}
	ptr := func(v time.Time) *time.Time { return &v }
	outcome := func(o dao.Outcome) *dao.Outcome { return &o }
	tasks := []dao.TimelineTask{
		{ID: 1, Name: "flaky", State: dao.TaskRunning, QueuedAt: at(60), StartedAt: ptr(at(65)), Attempts: []dao.TaskAttempt{
			{Attempt: 1, WorkerID: "w1", StartedAt: at(0), EndedAt: ptr(at(30)), Outcome: outcome(dao.OutcomeFailedOver)},
			{Attempt: 2, WorkerID: "w2", StartedAt: at(40), EndedAt: ptr(at(60)), Outcome: outcome(dao.OutcomeFailed)},
			{Attempt: 3, WorkerID: "127.0.0.1:5679_1795577134245", StartedAt: at(65)},
		}},
		{ID: 2, Name: "after", State: dao.TaskQueued, QueuedAt: at(50)},
	}
	g := buildTimeline(tasks, 12, at(68))
	if len(g.Rows) != 2 || g.More != 10 {
		t.Fatalf("rows %d, more %d; want 2 and 10", len(g.Rows), g.More)
	}
	var kinds []string
	for _, b := range g.Rows[0].Bars {
		kinds = append(kinds, b.Kind)
	}
	if want := []string{"failed_over", "queued", "failed", "queued", "running"}; !slices.Equal(kinds, want) {
		t.Errorf("flaky's bars = %v, want %v", kinds, want)
	}
	// The running attempt is too short to hold its worker's name: it is named right of it.
	if r := g.Rows[0]; r.After != "127.0.0.1:5679_1795577134245" || r.AfterX <= r.Bars[len(r.Bars)-1].X {
		t.Errorf("flaky's row names %q at %d after its bars, want the running attempt's worker right of it", r.After, r.AfterX)
	}
	if b := g.Rows[1].Bars; len(b) != 1 || b[0].Kind != "queued" || b[0].Attempt != 1 {
		t.Errorf("the queued task's bars = %+v, want one wait for its first attempt", b)
	}
	for _, r := range g.Rows {
		for _, b := range r.Bars {
			if b.X < tlLabelW || b.X+b.W > tlLabelW+tlChartW+2 || b.W < 2 {
				t.Errorf("bar %+v is off the axis [%d, %d]", b, tlLabelW, tlLabelW+tlChartW)
			}
		}
	}
	if first := g.Rows[0].Bars[0]; first.Title != "flaky: attempt 1 on w1, failed over (its worker was lost), 10:00:00 → 10:00:30 (30.0s)" {
		t.Errorf("first bar's title = %q", first.Title)
	}
	if len(g.Ticks) < 2 || !slices.IsSortedFunc(g.Ticks, func(a, b timelineTick) int { return a.X - b.X }) || g.Ticks[0].Label != "10:00:00" {
		t.Errorf("ticks = %+v, want them in order from 10:00:00", g.Ticks)
	}
}

// TestBuildTimelineOfNothing: an instance without tasks has no rows, and an axis of a second.
func TestBuildTimelineOfNothing(t *testing.T) {
	t.Parallel()
	g := buildTimeline(nil, 0, time.Now())
	if len(g.Rows) != 0 || g.More != 0 || len(g.Ticks) == 0 {
		t.Errorf("empty timeline = %+v", g)
	}
}

// TestAxisTicks: at most nine ticks for any span, at a step from tickSteps.
func TestAxisTicks(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 28, 10, 0, 7, 0, time.UTC)
	for _, span := range []time.Duration{time.Second, 45 * time.Second, 7 * time.Minute, 5 * time.Hour, 30 * time.Hour, 40 * 24 * time.Hour} {
		ticks, step := axisTicks(start, start.Add(span))
		if n := span / step; n > 8 {
			t.Errorf("span %v: step %v makes %d ticks", span, step, n)
		}
		if len(ticks) < 2 {
			t.Errorf("span %v: ticks %v", span, ticks)
		}
	}
}

// TestNiceCeil: an axis' top is at least its value, and its half is whole.
func TestNiceCeil(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{0: 2, 1: 2, 3: 4, 7: 8, 9: 10, 11: 20, 45: 60, 101: 200} {
		if got := niceCeil(n); got != want {
			t.Errorf("niceCeil(%d) = %d, want %d", n, got, want)
		}
	}
}
