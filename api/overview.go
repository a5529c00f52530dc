package api

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/zksched/zksched/dao"
)

// The overview is the home page: charts of what the database already holds, drawn here as
// SVG so the page needs no script. Each chart says so in words when it has nothing to draw.

// chart is an SVG picture laid out for the template "chart": rectangles, lines and texts at
// their places, and a message in place of the data when there is none.
type chart struct {
	ID, Label     string
	Width, Height int
	Rects         []chartRect
	Lines         []chartLine
	Texts         []chartText
	// Empty, when set, is the message the chart shows instead of data.
	Empty string
	// Legend names the classes of the rectangles.
	Legend []chartKey
}

type chartRect struct {
	X, Y, W, H int
	// Class is "bar" and the kind of the bar, which colours it.
	Class, Title string
}

type chartLine struct {
	X1, Y1, X2, Y2 int
	Class          string
}

type chartText struct {
	X, Y int
	// Anchor is the SVG text-anchor: start, middle or end.
	Anchor, Class, Text string
}

type chartKey struct{ Class, Label string }

// Sizes of the overview's charts, in SVG units.
const (
	chartW      = 900
	chartLeft   = 56 // the y axis' labels
	chartRight  = 16
	chartTop    = 12
	chartBottom = 28 // the x axis' labels
	// barRowH is the height of a row of a chart of horizontal bars, barH of its bar.
	barRowH   = 30
	barH      = 16
	barLabelW = 170 // a horizontal bar chart's names
	barNoteW  = 250 // and its numbers, right of the bars
)

// Overview limits: how many workflows the durations chart shows, how many worker groups the
// load chart shows, and up to how many queued tasks a group's queue is counted.
const (
	overviewWorkflows = 10
	overviewGroups    = 20
	overviewQueueCap  = 100_000
)

type overviewPage struct {
	base
	Runs, Groups, Durations chart
	// Since is the start of the range of the runs and durations charts.
	Since time.Time
	// ClusterErr says why the workers' slots are unknown; "" when they were read.
	ClusterErr string
}

func (s *Server) pageOverview(w http.ResponseWriter, r *http.Request) error {
	// The task list was the home page: its bookmarks (/?state=failed) open it still.
	if r.URL.RawQuery != "" {
		http.Redirect(w, r, "/tasks?"+r.URL.RawQuery, http.StatusFound)
		return nil
	}
	ctx := r.Context()
	now := time.Now().UTC()
	since := now.Truncate(time.Hour).Add(-23 * time.Hour)
	p := &overviewPage{base: base{Title: "Overview", Nav: "overview"}, Since: since}
	runs, err := s.db.WorkflowRunsPerHour(ctx, since)
	if err != nil {
		return err
	}
	p.Runs = runsChart(runs, since)
	durations, err := s.db.WorkflowDurationPercentiles(ctx, since, overviewWorkflows)
	if err != nil {
		return err
	}
	p.Durations = durationsChart(durations)
	load, err := s.db.TaskGroupLoad(ctx, overviewQueueCap, overviewGroups)
	if err != nil {
		return err
	}
	var slots map[string]int
	if s.cfg.Cluster == nil {
		p.ClusterErr = "no registry client"
	} else if cl, err := s.cfg.Cluster.Cluster(ctx); err != nil {
		p.ClusterErr = err.Error()
		logFor(r).Warn().Err(err).Msg("overview: zookeeper not readable")
	} else {
		slots = map[string]int{}
		for _, w := range cl.Workers {
			if w.Info == nil {
				continue
			}
			for _, g := range w.Info.Groups {
				slots[g] += w.Info.Slots
			}
		}
	}
	p.Groups = groupsChart(load, slots)
	s.render(w, r, http.StatusOK, "overview", p)
	return nil
}

// runsChart is a bar per hour from since, of the instances that ended in it, stacked by how
// they ended.
func runsChart(runs []dao.HourRuns, since time.Time) chart {
	c := chart{ID: "chart-runs", Label: "workflow runs per hour", Width: chartW, Height: 220,
		Legend: []chartKey{{"succeeded", "succeeded"}, {"failed", "failed"}, {"stopped", "stopped"}}}
	byHour := map[time.Time]dao.HourRuns{}
	most := 0
	for _, h := range runs {
		byHour[h.Hour] = h
		most = max(most, h.Succeeded+h.Failed+h.Stopped)
	}
	const hours = 24
	plotW, plotH := chartW-chartLeft-chartRight, c.Height-chartTop-chartBottom
	baseY := chartTop + plotH
	top := niceCeil(max(most, 1))
	y := func(n int) int { return baseY - int(math.Round(float64(n)*float64(plotH)/float64(top))) }
	c.yAxis(top, y, func(n int) string { return fmt.Sprint(n) })
	slot := plotW / hours
	for i := range hours {
		hour := since.Add(time.Duration(i) * time.Hour)
		x := chartLeft + i*slot
		if i%3 == 0 {
			c.Texts = append(c.Texts, chartText{X: x + slot/2, Y: baseY + 18, Anchor: "middle", Class: "tick", Text: hour.Format("15:04")})
		}
		h := byHour[hour]
		at := 0
		for _, part := range []struct {
			kind string
			n    int
		}{{"succeeded", h.Succeeded}, {"failed", h.Failed}, {"stopped", h.Stopped}} {
			if part.n == 0 {
				continue
			}
			y0, y1 := y(at), y(at+part.n)
			c.Rects = append(c.Rects, chartRect{X: x + 3, Y: y1, W: slot - 6, H: max(y0-y1, 1), Class: "bar " + part.kind,
				Title: fmt.Sprintf("%s–%s UTC: %d %s of %s", hour.Format("15:04"), hour.Add(time.Hour).Format("15:04"),
					part.n, part.kind, runsOf(h.Succeeded+h.Failed+h.Stopped))})
			at += part.n
		}
	}
	c.Lines = append(c.Lines, chartLine{X1: chartLeft, Y1: baseY, X2: chartLeft + hours*slot, Y2: baseY, Class: "axis"})
	if most == 0 {
		c.Empty = "No runs in the last 24 h."
	}
	return c
}

// groupsChart is a row per worker group: its running tasks against its workers' slots (the
// track), and its queue, on one scale.
func groupsChart(load []dao.GroupLoad, slots map[string]int) chart {
	c := chart{ID: "chart-groups", Label: "queue depth and slots in use per worker group", Width: chartW,
		Legend: []chartKey{{"slots", "slots of its workers"}, {"running", "running"}, {"queued", "queued"}}}
	byGroup := map[string]dao.GroupLoad{}
	for _, l := range load {
		byGroup[l.Group] = l
	}
	for g := range slots {
		if _, ok := byGroup[g]; !ok && len(byGroup) < overviewGroups {
			byGroup[g] = dao.GroupLoad{Group: g}
		}
	}
	groups := make([]string, 0, len(byGroup))
	most := 1
	for g, l := range byGroup {
		groups = append(groups, g)
		most = max(most, l.Queued, l.Running, slots[g])
	}
	slices.Sort(groups)
	c.Height = chartTop + max(len(groups), 1)*barRowH + chartBottom
	plotW := chartW - barLabelW - barNoteW
	top := niceCeil(most)
	x := func(n int) int { return barLabelW + int(math.Round(float64(n)*float64(plotW)/float64(top))) }
	baseY := chartTop + max(len(groups), 1)*barRowH
	c.xAxis(top, x, baseY, func(n int) string { return fmt.Sprint(n) })
	for i, g := range groups {
		l := byGroup[g]
		y := chartTop + i*barRowH + (barRowH-barH)/2
		c.Texts = append(c.Texts, chartText{X: barLabelW - 8, Y: y + barH - 3, Anchor: "end", Class: "label", Text: cut(g, 24)})
		note := fmt.Sprintf("%d running, %d queued", l.Running, l.Queued)
		if l.Queued >= overviewQueueCap {
			note = fmt.Sprintf("%d running, %d+ queued", l.Running, l.Queued)
		}
		if n, ok := slots[g]; ok {
			note = fmt.Sprintf("%d of %d slots in use, %d queued", l.Running, n, l.Queued)
			c.Rects = append(c.Rects, chartRect{X: barLabelW, Y: y, W: x(n) - barLabelW, H: barH / 2, Class: "bar slots",
				Title: fmt.Sprintf("%s: its workers have %d slots", g, n)})
		} else if slots != nil {
			note += "; no worker serves it"
		}
		if l.Running > 0 {
			c.Rects = append(c.Rects, chartRect{X: barLabelW, Y: y, W: max(x(l.Running)-barLabelW, 2), H: barH / 2, Class: "bar running",
				Title: fmt.Sprintf("%s: %d tasks running", g, l.Running)})
		}
		if l.Queued > 0 {
			c.Rects = append(c.Rects, chartRect{X: barLabelW, Y: y + barH/2, W: max(x(l.Queued)-barLabelW, 2), H: barH / 2, Class: "bar queued",
				Title: fmt.Sprintf("%s: %d tasks queued", g, l.Queued)})
		}
		c.Texts = append(c.Texts, chartText{X: barLabelW + plotW + 8, Y: y + barH - 3, Anchor: "start", Class: "note", Text: note})
	}
	if len(groups) == 0 {
		c.Empty = "No task is queued or running, and no worker is registered."
	}
	return c
}

// durationsChart is a row per workflow: a bar to its p50, p90 and p99 durations, on a
// logarithmic scale so that a workflow of seconds and one of hours both read.
func durationsChart(ds []dao.WorkflowDurations) chart {
	c := chart{ID: "chart-durations", Label: "duration percentiles per workflow", Width: chartW,
		Legend: []chartKey{{"p50", "p50"}, {"p90", "p90"}, {"p99", "p99"}}}
	c.Height = chartTop + max(len(ds), 1)*barRowH + chartBottom
	plotW := chartW - barLabelW - barNoteW
	lo, hi := math.Inf(1), 1.0
	for _, d := range ds {
		lo, hi = min(lo, max(d.P50, 1)), max(hi, d.P99)
	}
	// Whole decades of milliseconds, at least one.
	from, to := 0.0, 3.0
	if len(ds) > 0 {
		from, to = math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if to <= from {
			to = from + 1
		}
	}
	x := func(ms float64) int {
		v := (math.Log10(max(ms, 1)) - from) / (to - from)
		return barLabelW + int(math.Round(min(max(v, 0), 1)*float64(plotW)))
	}
	baseY := chartTop + max(len(ds), 1)*barRowH
	for d := from; d <= to; d++ {
		tx := x(math.Pow(10, d))
		c.Lines = append(c.Lines, chartLine{X1: tx, Y1: chartTop, X2: tx, Y2: baseY, Class: "grid"},
			chartLine{X1: tx, Y1: baseY, X2: tx, Y2: baseY + 4, Class: "axis"})
		c.Texts = append(c.Texts, chartText{X: tx, Y: baseY + 18, Anchor: "middle", Class: "tick",
			Text: humanDuration(time.Duration(math.Pow(10, d)) * time.Millisecond)})
	}
	c.Lines = append(c.Lines, chartLine{X1: barLabelW, Y1: baseY, X2: barLabelW + plotW, Y2: baseY, Class: "axis"})
	ms := func(v float64) string { return humanDuration(time.Duration(v * float64(time.Millisecond))) }
	for i, d := range ds {
		y := chartTop + i*barRowH + (barRowH-barH)/2
		c.Texts = append(c.Texts, chartText{X: barLabelW - 8, Y: y + barH - 3, Anchor: "end", Class: "label", Text: cut(d.Name, 24)})
		// Longest first, so each shorter one is drawn over it.
		for _, p := range []struct {
			kind string
			v    float64
		}{{"p99", d.P99}, {"p90", d.P90}, {"p50", d.P50}} {
			c.Rects = append(c.Rects, chartRect{X: barLabelW, Y: y, W: max(x(p.v)-barLabelW, 2), H: barH, Class: "bar " + p.kind,
				Title: fmt.Sprintf("%s: %s of %s took %s or less", d.Name, p.kind, runsOf(d.Runs), ms(p.v))})
		}
		c.Texts = append(c.Texts, chartText{X: barLabelW + plotW + 8, Y: y + barH - 3, Anchor: "start", Class: "note",
			Text: fmt.Sprintf("p50 %s · p90 %s · p99 %s · %s", ms(d.P50), ms(d.P90), ms(d.P99), runsOf(d.Runs))})
	}
	if len(ds) == 0 {
		c.Empty = "No runs in the last 24 h."
	}
	return c
}

// runsOf is "1 run", "2 runs".
func runsOf(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

// yAxis draws a vertical axis at chartLeft from 0 to top, with a grid line at each tick.
func (c *chart) yAxis(top int, y func(int) int, label func(int) string) {
	for _, n := range []int{0, top / 2, top} {
		c.Lines = append(c.Lines, chartLine{X1: chartLeft, Y1: y(n), X2: c.Width - chartRight, Y2: y(n), Class: "grid"})
		c.Texts = append(c.Texts, chartText{X: chartLeft - 6, Y: y(n) + 4, Anchor: "end", Class: "tick", Text: label(n)})
	}
	c.Lines = append(c.Lines, chartLine{X1: chartLeft, Y1: chartTop, X2: chartLeft, Y2: y(0), Class: "axis"})
}

// xAxis draws a horizontal axis at baseY from 0 to top, with a grid line at each tick.
func (c *chart) xAxis(top int, x func(int) int, baseY int, label func(int) string) {
	for _, n := range []int{0, top / 2, top} {
		c.Lines = append(c.Lines, chartLine{X1: x(n), Y1: chartTop, X2: x(n), Y2: baseY, Class: "grid"},
			chartLine{X1: x(n), Y1: baseY, X2: x(n), Y2: baseY + 4, Class: "axis"})
		c.Texts = append(c.Texts, chartText{X: x(n), Y: baseY + 18, Anchor: "middle", Class: "tick", Text: label(n)})
	}
	c.Lines = append(c.Lines, chartLine{X1: x(0), Y1: baseY, X2: x(top), Y2: baseY, Class: "axis"})
}

// niceCeil is the least of 2, 4, 6, 8 or 10 times a power of ten that is at least n: an
// axis' top, whose half is whole.
func niceCeil(n int) int {
	for p := 1; ; p *= 10 {
		for _, m := range []int{2, 4, 6, 8, 10} {
			if m*p >= n {
				return m * p
			}
		}
	}
}
