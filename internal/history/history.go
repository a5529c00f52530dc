// Package history judges a fault test by what really ran. zksched promises that a task is
// never lost, never runs twice at the same time, and has its result committed once, whatever
// happens to the nodes; its own tables say what it believes, so the tasks of a fault test also
// keep a run log of their own (Recorder, Command): a start before the task's body, a beat every
// 100 ms while it runs, an end when it has finished.
//
// Check compares the two once the scenario is over and fails the test, with a timeline of
// every task, when
//
//   - a task is lost: a workflow instance is not finished by the deadline, or did not succeed
//     when the scenario expects it to;
//   - a task has two committed results: more than one succeeded attempt, an attempt after the
//     committed one, a committed attempt whose body never ran to its end, or the body of an
//     uncommitted attempt that ran to its end as well (its work was done twice);
//   - two runs of one task overlapped: the intervals [start, last beat or end] of two
//     attempts intersect.
//
// Only the scenario of a frozen process may allow overlap (Options.AllowOverlap): the design
// accepts that a process frozen past its deadline overlaps the new run until it wakes. Then
// the overlap is reported instead.
//
// It also reports the figures of the scenario: per task the fault interrupted, the time from
// the fault to the next attempt's start; the overlaps; the attempts per task.
package history

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
)

// History is what zksched recorded and what the run log saw.
type History struct {
	Workflows []dao.WorkflowInstance
	Tasks     []dao.TaskInstance
	Attempts  []dao.TaskAttempt
	Events    []Event
}

// Load reads the history of workflow instances (every instance in the schema if none are
// given) from zksched's database and the run log.
func Load(ctx context.Context, db *dao.DB, rec *Recorder, workflows []int64) (*History, error) {
	if len(workflows) == 0 {
		if err := db.SQL().SelectContext(ctx, &workflows, `SELECT id FROM workflow_instance ORDER BY id`); err != nil {
			return nil, fmt.Errorf("list workflow instances: %w", err)
		}
	}
	h := &History{}
	for _, id := range workflows {
		wf, err := db.WorkflowGet(ctx, id)
		if err != nil {
			return nil, err
		}
		h.Workflows = append(h.Workflows, *wf)
		tasks, err := db.TaskListByWorkflow(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, t := range tasks {
			as, err := db.AttemptList(ctx, t.ID)
			if err != nil {
				return nil, err
			}
			h.Tasks = append(h.Tasks, t)
			h.Attempts = append(h.Attempts, as...)
		}
	}
	evs, err := rec.Events(ctx)
	if err != nil {
		return nil, err
	}
	h.Events = evs
	return h, nil
}

// Options say what a scenario expects.
type Options struct {
	// Workflows are the workflow instances to judge; every one in the schema if empty.
	Workflows []int64
	// Deadline bounds Check's wait for the workflow instances to finish. Defaults to 60 s.
	Deadline time.Duration
	// AllowUnsuccessful accepts a workflow instance that finished without succeeding; by
	// default each must succeed.
	AllowUnsuccessful bool
	// FaultAt is when the scenario injected its fault; the figures count from it. Zero when
	// there was none.
	FaultAt time.Time
	// AllowOverlap accepts runs of one task that overlap, and the uncommitted run of a task
	// that ran to its end, reporting them instead. Only for a process frozen past its
	// deadline.
	AllowOverlap bool
}

// Failover is a task whose run the fault interrupted, and the run that took over.
type Failover struct {
	TaskID int64
	Task   string
	// From is the run that was alive at the fault; To is the next attempt's run.
	From, To Run
	// Stopped is from the fault to From's last sign of life.
	Stopped time.Duration
	// Elsewhere is from the fault to To's start: how long the task was not running.
	Elsewhere time.Duration
}

// Overlap is two runs of one task that were alive at the same time.
type Overlap struct {
	TaskID int64
	Task   string
	A, B   Run
	Dur    time.Duration
}

// Report is the verdict and the figures.
type Report struct {
	// Problems make the test fail.
	Problems []string
	// Notes are what the options allowed but a reader should know.
	Notes     []string
	Failovers []Failover
	Overlaps  []Overlap
	// AttemptsPerTask maps a number of attempts to the number of tasks that had it.
	AttemptsPerTask map[int]int
	// Timeline shows every task's attempts and runs.
	Timeline string
}

// MaxOverlap is the longest overlap, zero if none.
func (r *Report) MaxOverlap() time.Duration {
	var m time.Duration
	for _, o := range r.Overlaps {
		m = max(m, o.Dur)
	}
	return m
}

// MaxElsewhere is the longest time from the fault to a failed-over task's next start, zero if
// no task was failed over.
func (r *Report) MaxElsewhere() time.Duration {
	var m time.Duration
	for _, f := range r.Failovers {
		m = max(m, f.Elsewhere)
	}
	return m
}

// Summary is one line of figures.
func (r *Report) Summary() string {
	var b strings.Builder
	keys := make([]int, 0, len(r.AttemptsPerTask))
	tasks := 0
	for k, n := range r.AttemptsPerTask {
		keys = append(keys, k)
		tasks += n
	}
	sort.Ints(keys)
	per := make([]string, len(keys))
	for i, k := range keys {
		per[i] = fmt.Sprintf("%d×%d", r.AttemptsPerTask[k], k)
	}
	fmt.Fprintf(&b, "history: %d tasks, attempts per task [%s], %d failed over", tasks, strings.Join(per, " "), len(r.Failovers))
	if len(r.Failovers) > 0 {
		lo := r.Failovers[0].Elsewhere
		for _, f := range r.Failovers {
			lo = min(lo, f.Elsewhere)
		}
		fmt.Fprintf(&b, ", fault → running elsewhere %s..%s", ms(lo), ms(r.MaxElsewhere()))
	}
	fmt.Fprintf(&b, ", overlap %s in %d pair(s), %d problem(s)", ms(r.MaxOverlap()), len(r.Overlaps), len(r.Problems))
	return b.String()
}

// resultLine is the output of a task built with Command.
var resultLine = regexp.MustCompile(`^ran task (\d+) attempt (\d+) on (\S+)$`)

// Judge checks the history against the options.
func (h *History) Judge(opts Options) *Report {
	rep := &Report{AttemptsPerTask: map[int]int{}}
	problem := func(format string, args ...any) { rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...)) }

	wanted := map[int64]bool{}
	for _, id := range opts.Workflows {
		wanted[id] = true
	}
	seen := map[int64]bool{}
	for _, wf := range h.Workflows {
		if len(wanted) > 0 && !wanted[wf.ID] {
			continue
		}
		seen[wf.ID] = true
		switch {
		case !wf.State.Terminal():
			problem("lost: workflow instance %d (%s) is %s, not finished by the deadline", wf.ID, wf.WorkflowName, wf.State)
		case wf.State != dao.WorkflowSucceeded && !opts.AllowUnsuccessful:
			problem("lost: workflow instance %d (%s) ended %s, want succeeded (error: %s)", wf.ID, wf.WorkflowName, wf.State, deref(wf.Error))
		}
	}
	for _, id := range opts.Workflows {
		if !seen[id] {
			problem("lost: workflow instance %d does not exist", id)
		}
	}

	attempts := map[int64][]dao.TaskAttempt{}
	for _, a := range h.Attempts {
		attempts[a.TaskInstanceID] = append(attempts[a.TaskInstanceID], a)
	}
	runs := map[int64][]Run{}
	for _, r := range RunsOf(h.Events) {
		runs[r.TaskID] = append(runs[r.TaskID], r)
	}
	judged := map[int64]bool{}
	for _, t := range h.Tasks {
		if len(wanted) > 0 && !wanted[t.WorkflowInstanceID] {
			continue
		}
		judged[t.ID] = true
		h.judgeTask(rep, opts, t, attempts[t.ID], runs[t.ID], problem)
	}
	// With a list of workflow instances, runs of the others are not ours to judge.
	if len(wanted) == 0 {
		ids := slices.Sorted(maps.Keys(runs))
		for _, id := range ids {
			if !judged[id] {
				problem("task instance %d ran (%d run(s) in the run log) but zksched has no such task", id, len(runs[id]))
			}
		}
	}
	rep.Timeline = h.timeline(opts, attempts, runs)
	return rep
}

func (h *History) judgeTask(rep *Report, opts Options, t dao.TaskInstance, as []dao.TaskAttempt, rs []Run, problem func(string, ...any)) {
	name := fmt.Sprintf("task %d %q (workflow instance %d)", t.ID, t.Name, t.WorkflowInstanceID)
	rep.AttemptsPerTask[len(as)]++
	byAttempt := map[int]dao.TaskAttempt{}
	var succeeded []int
	for _, a := range as {
		byAttempt[a.Attempt] = a
		if a.Outcome != nil && *a.Outcome == dao.OutcomeSucceeded {
			succeeded = append(succeeded, a.Attempt)
		}
	}
	if len(succeeded) > 1 {
		problem("committed twice: %s has succeeded attempts %v", name, succeeded)
	}
	for _, r := range rs {
		a, ok := byAttempt[r.Attempt]
		switch {
		case !ok:
			problem("%s: attempt %d ran on %s but zksched never recorded that attempt", name, r.Attempt, r.Worker)
		case a.WorkerID != r.Worker:
			problem("%s: attempt %d ran on %s but zksched gave it to %s", name, r.Attempt, r.Worker, a.WorkerID)
		}
		if !r.Started {
			problem("%s: attempt %d left beats but no start record (the run log is incomplete)", name, r.Attempt)
		}
	}

	committed := 0
	if t.State == dao.TaskSucceeded {
		committed = t.Attempt
		if a, ok := byAttempt[committed]; !ok || a.Outcome == nil || *a.Outcome != dao.OutcomeSucceeded {
			problem("%s succeeded under attempt %d, whose attempt record says %s", name, committed, outcomeOf(byAttempt, committed))
		}
		var run *Run
		for i := range rs {
			if rs[i].Attempt == committed {
				run = &rs[i]
			}
		}
		if run == nil || !run.Ended {
			problem("committed result without a run: %s committed attempt %d, whose body never ran to its end", name, committed)
		}
		if t.Output != nil {
			if m := resultLine.FindStringSubmatch(*t.Output); m != nil && m[2] != strconv.Itoa(committed) {
				problem("%s committed attempt %d with the output of attempt %s: %q", name, committed, m[2], *t.Output)
			}
		}
		for _, a := range as {
			if a.Attempt > committed {
				problem("ran after its commit: %s has attempt %d on %s after its committed attempt %d", name, a.Attempt, a.WorkerID, committed)
			}
		}
		for _, r := range rs {
			if r.Ended && r.Attempt != committed {
				msg := fmt.Sprintf("done twice: the body of %s ran to its end in attempt %d on %s, whose result was not committed (attempt %d was)",
					name, r.Attempt, r.Worker, committed)
				if opts.AllowOverlap {
					rep.Notes = append(rep.Notes, msg)
				} else {
					problem("%s", msg)
				}
			}
		}
	}

	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			a, b := rs[i], rs[j]
			ov := minTime(a.Last, b.Last).Sub(maxTime(a.Start, b.Start))
			if ov <= 0 {
				continue
			}
			rep.Overlaps = append(rep.Overlaps, Overlap{TaskID: t.ID, Task: t.Name, A: a, B: b, Dur: ov})
			msg := fmt.Sprintf("overlap of %s: %s: attempt %d on %s alive %s..%s, attempt %d on %s alive %s..%s",
				ms(ov), name, a.Attempt, a.Worker, rel(a.Start, opts, h), rel(a.Last, opts, h),
				b.Attempt, b.Worker, rel(b.Start, opts, h), rel(b.Last, opts, h))
			if opts.AllowOverlap {
				rep.Notes = append(rep.Notes, msg)
			} else {
				problem("%s", msg)
			}
		}
	}

	if !opts.FaultAt.IsZero() {
		for i, r := range rs {
			// A run the fault interrupted: alive before the fault, and not finished by then.
			if !r.Start.Before(opts.FaultAt) || (r.Ended && r.Last.Before(opts.FaultAt)) || r.Attempt == committed {
				continue
			}
			for _, next := range rs[i+1:] {
				if next.Attempt > r.Attempt {
					rep.Failovers = append(rep.Failovers, Failover{TaskID: t.ID, Task: t.Name, From: r, To: next,
						Stopped: r.Last.Sub(opts.FaultAt), Elsewhere: next.Start.Sub(opts.FaultAt)})
					break
				}
			}
		}
	}
}

// origin is the timeline's zero: the fault, or the first thing that happened.
func (h *History) origin(opts Options) time.Time {
	if !opts.FaultAt.IsZero() {
		return opts.FaultAt
	}
	var o time.Time
	for _, e := range h.Events {
		if o.IsZero() || e.At.Before(o) {
			o = e.At
		}
	}
	for _, a := range h.Attempts {
		if o.IsZero() || a.StartedAt.Before(o) {
			o = a.StartedAt
		}
	}
	return o
}

func rel(t time.Time, opts Options, h *History) string {
	return fmt.Sprintf("%+.3fs", t.Sub(h.origin(opts)).Seconds())
}

func (h *History) timeline(opts Options, attempts map[int64][]dao.TaskAttempt, runs map[int64][]Run) string {
	var b strings.Builder
	o := h.origin(opts)
	at := func(t time.Time) string { return fmt.Sprintf("%+.3fs", t.Sub(o).Seconds()) }
	zero := "the first record"
	if !opts.FaultAt.IsZero() {
		zero = "the fault"
	}
	fmt.Fprintf(&b, "timeline (0 = %s, %s):\n", zero, o.Format("15:04:05.000"))
	for _, wf := range h.Workflows {
		if len(opts.Workflows) > 0 && !slices.Contains(opts.Workflows, wf.ID) {
			continue
		}
		fmt.Fprintf(&b, "workflow instance %d %q: %s, owner %s\n", wf.ID, wf.WorkflowName, wf.State, deref(wf.Owner))
		for _, t := range h.Tasks {
			if t.WorkflowInstanceID != wf.ID {
				continue
			}
			fmt.Fprintf(&b, "  task %d %q: %s, attempt %d, failover_count %d, retries %d, output %q\n",
				t.ID, t.Name, t.State, t.Attempt, t.FailoverCount, t.Retries, deref(t.Output))
			byAttempt := map[int]*Run{}
			for i, r := range runs[t.ID] {
				byAttempt[r.Attempt] = &runs[t.ID][i]
			}
			for _, a := range attempts[t.ID] {
				end := "-"
				if a.EndedAt != nil {
					end = at(*a.EndedAt)
				}
				fmt.Fprintf(&b, "    attempt %d on %s: claimed %s, ended %s %s", a.Attempt, a.WorkerID, at(a.StartedAt), end,
					outcomeOf(map[int]dao.TaskAttempt{a.Attempt: a}, a.Attempt))
				if r := byAttempt[a.Attempt]; r != nil {
					fmt.Fprintf(&b, " | ran %s..%s, %d beats, %s", at(r.Start), at(r.Last), r.Beats, map[bool]string{true: "to its end", false: "no end"}[r.Ended])
					delete(byAttempt, a.Attempt)
				} else {
					b.WriteString(" | no run recorded")
				}
				b.WriteString("\n")
			}
			for _, r := range byAttempt {
				fmt.Fprintf(&b, "    attempt %d on %s (not in task_attempt) | ran %s..%s, %d beats\n", r.Attempt, r.Worker, at(r.Start), at(r.Last), r.Beats)
			}
		}
	}
	return b.String()
}

func outcomeOf(byAttempt map[int]dao.TaskAttempt, n int) string {
	a, ok := byAttempt[n]
	switch {
	case !ok:
		return "no attempt record"
	case a.Outcome == nil:
		return "still running"
	}
	return string(*a.Outcome)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
