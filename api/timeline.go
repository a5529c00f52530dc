package api

import (
	"fmt"
	"time"

	"github.com/zksched/zksched/dao"
)

// timeline is a workflow instance's tasks laid out as a Gantt chart for an SVG picture: a row
// per task, in the order they started, with a bar per attempt coloured by its outcome, the
// time it waited in the queue before it as a lighter bar, and a time axis.
type timeline struct {
	Rows []timelineRow
	// Ticks are the time axis' marks.
	Ticks []timelineTick
	// More is how many of the instance's tasks are not drawn: only the first
	// maxTimelineTasks by start are.
	More   int
	Width  int
	Height int
	// AxisY is where the time axis runs, below the rows.
	AxisY int
}

// maxTimelineTasks is the most tasks a timeline draws: the page stays small and fast
// whatever the size of the instance (its task list pages through the rest).
const maxTimelineTasks = 50

type timelineRow struct {
	TaskID int64
	Name   string
	// Label is Name cut to fit the label column.
	Label string
	State dao.TaskState
	Y     int
	Bars  []timelineBar
	// After is the worker of the row's last bar, an attempt's too narrow to name it, shown
	// right of it; "" otherwise.
	After  string
	AfterX int
}

// timelineBar is a span of one attempt of a task: Kind "queued" for the wait before it, else
// its outcome ("running" while it runs).
type timelineBar struct {
	Kind    string
	X, W    int
	Title   string
	Worker  string
	Attempt int
	// Label is the worker's name shown in the bar, "" when it does not fit.
	Label string
}

type timelineTick struct {
	X     int
	Label string
}

// Sizes of the timeline, in SVG units.
const (
	tlLabelW   = 180
	tlChartW   = 820
	tlRowH     = 22
	tlBarH     = 14
	tlTop      = 8
	tlAxisH    = 26
	tlRight    = 200 // the worker named right of a row's last bar
	tlLabelCut = 26
	// tlCharW is about the width of a character of the bars' labels.
	tlCharW = 6.5
)

// RowH and BarH are the row and bar heights, for the template.
func (timeline) RowH() int { return tlRowH }

// BarH is a bar's height.
func (timeline) BarH() int { return tlBarH }

// ChartX is where the time axis starts.
func (timeline) ChartX() int { return tlLabelW }

// ChartEnd is where the time axis ends.
func (timeline) ChartEnd() int { return tlLabelW + tlChartW }

// buildTimeline lays out tasks (as TaskTimelineOfWorkflow reads them) up to now; total is
// how many tasks the instance has.
func buildTimeline(tasks []dao.TimelineTask, total int, now time.Time) timeline {
	g := timeline{More: max(total-len(tasks), 0)}
	type span struct {
		kind     string
		from, to time.Time
		worker   string
		attempt  int
	}
	spans := make([][]span, len(tasks))
	var start, end time.Time
	see := func(t time.Time) {
		if start.IsZero() || t.Before(start) {
			start = t
		}
		if t.After(end) {
			end = t
		}
	}
	for i, t := range tasks {
		var prevEnd *time.Time
		for j, a := range t.Attempts {
			// The wait before an attempt: from the end of the one before it (a retry, a
			// failover: the task was queued again then), or for the first attempt from when
			// the task was queued, if it was not queued again since.
			var queued *time.Time
			switch {
			case prevEnd != nil:
				queued = prevEnd
			case j == 0 && len(t.Attempts) == 1 && !t.QueuedAt.After(a.StartedAt):
				queued = &t.QueuedAt
			}
			if queued != nil && a.StartedAt.After(*queued) {
				spans[i] = append(spans[i], span{kind: "queued", from: *queued, to: a.StartedAt, attempt: a.Attempt})
				see(*queued)
			}
			kind, to := "running", now
			if a.Outcome != nil {
				kind = string(*a.Outcome)
			}
			if a.EndedAt != nil {
				to = *a.EndedAt
			}
			spans[i] = append(spans[i], span{kind: kind, from: a.StartedAt, to: to, worker: a.WorkerID, attempt: a.Attempt})
			see(a.StartedAt)
			see(to)
			prevEnd = a.EndedAt
		}
		if t.State == dao.TaskQueued {
			from := t.QueuedAt
			if prevEnd != nil && prevEnd.Before(from) {
				from = *prevEnd
			}
			spans[i] = append(spans[i], span{kind: "queued", from: from, to: now, attempt: len(t.Attempts) + 1})
			see(from)
			see(now)
		}
	}
	if start.IsZero() {
		start, end = now, now
	}
	if end.Sub(start) < time.Second {
		end = start.Add(time.Second)
	}
	ticks, step := axisTicks(start, end)
	// The axis ends on a tick, so the last bar ends inside it.
	end = start.Truncate(step).Add(step * time.Duration((end.Sub(start.Truncate(step))+step-1)/step))
	start = start.Truncate(step)
	scale := float64(tlChartW) / float64(end.Sub(start))
	x := func(t time.Time) int { return tlLabelW + int(float64(t.Sub(start))*scale) }
	for _, tk := range ticks {
		if tk.Before(start) || tk.After(end) {
			continue
		}
		g.Ticks = append(g.Ticks, timelineTick{X: x(tk), Label: tickLabel(tk, step)})
	}
	for i, t := range tasks {
		row := timelineRow{TaskID: t.ID, Name: t.Name, Label: cut(t.Name, tlLabelCut), State: t.State,
			Y: tlTop + i*tlRowH}
		for _, s := range spans[i] {
			b := timelineBar{Kind: s.kind, X: x(s.from), W: max(x(s.to)-x(s.from), 2), Worker: s.worker, Attempt: s.attempt}
			took := humanDuration(s.to.Sub(s.from))
			if s.kind == "queued" {
				b.Title = fmt.Sprintf("%s: attempt %d queued %s → %s (%s)", t.Name, s.attempt, clock(s.from), clock(s.to), took)
			} else {
				b.Title = fmt.Sprintf("%s: attempt %d on %s, %s, %s → %s (%s)", t.Name, s.attempt, s.worker,
					outcomeWords(s.kind), clock(s.from), clock(s.to), took)
				if float64(b.W) >= tlCharW*float64(len(s.worker))+8 {
					b.Label = s.worker
				}
			}
			row.Bars = append(row.Bars, b)
		}
		if n := len(row.Bars); n > 0 && row.Bars[n-1].Kind != "queued" && row.Bars[n-1].Label == "" {
			last := row.Bars[n-1]
			row.After, row.AfterX = last.Worker, last.X+last.W+4
		}
		g.Rows = append(g.Rows, row)
	}
	g.AxisY = tlTop + len(tasks)*tlRowH + 4
	g.Height = g.AxisY + tlAxisH
	g.Width = tlLabelW + tlChartW + tlRight
	return g
}

// outcomeWords says an attempt's outcome as a phrase.
func outcomeWords(kind string) string {
	switch kind {
	case string(dao.OutcomeFailedOver):
		return "failed over (its worker was lost)"
	case "timed_out":
		return "timed out"
	case "handed_back":
		return "handed back"
	}
	return kind
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05") }

// tickSteps are the time axis' possible steps between ticks.
var tickSteps = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
	30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// axisTicks are the ticks of an axis from start to end: the first step of tickSteps that
// makes no more than 8 of them (a day's step beyond), at its multiples.
func axisTicks(start, end time.Time) ([]time.Time, time.Duration) {
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if end.Sub(start)/s <= 8 {
			step = s
			break
		}
	}
	for end.Sub(start)/step > 8 {
		step *= 2
	}
	var ticks []time.Time
	for t := start.Truncate(step); !t.After(end.Add(step)); t = t.Add(step) {
		ticks = append(ticks, t)
	}
	return ticks, step
}

// tickLabel is a tick's time of day in UTC, to the second when the step is under a minute.
func tickLabel(t time.Time, step time.Duration) string {
	if step < time.Minute {
		return t.UTC().Format("15:04:05")
	}
	if step >= 24*time.Hour {
		return t.UTC().Format("01-02")
	}
	return t.UTC().Format("15:04")
}
