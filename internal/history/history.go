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
// the overlap is reported instead. A scenario with many faults names its whole-process freezes
// instead (Options.Freezes), so that only the overlaps they explain are allowed.
//
// A scenario that acts as an operator does tells Judge what it did (Options.Kills,
// Options.Reruns): a task killed, or a task of a workflow instance stopped, must not start a
// new attempt until it is rerun, and the runs before a rerun are not competing results.
//
// It also reports the figures of the scenario: per task the fault interrupted, the time from
// the fault to the next attempt's start; the overlaps; the attempts per task.
package history

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
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
	// AtLeastOnce is for scenarios whose faults may land between a body's end and the commit
	// of its result (kill -9, a cut database link): the task then runs again, as it must. A
	// body that ran to its end uncommitted is done twice only if it ended after zksched had
	// closed its attempt, when the task was no longer its to run.
	AtLeastOnce bool
	// MayFail are workflow instances that may end without succeeding (the scenario killed,
	// stopped or timed out tasks of theirs); the others must succeed unless AllowUnsuccessful.
	MayFail []int64
	// Freezes are the whole-process freezes of workers: only the overlaps and the done-twice
	// runs they explain are allowed (reported as notes).
	Freezes []Freeze
	// WakeGrace is how long after a freeze ends the frozen worker's runs may still be alive
	// (its watchdog fires on waking and kills them). Defaults to 2 s.
	WakeGrace time.Duration
	// Kills and Reruns are what the scenario did as an operator.
	Kills  []Kill
	Reruns []Rerun
}

// Freeze is a worker process frozen whole, with the supervisors and processes of its tasks,
// past its deadline: no part of it could stop its tasks, so they may overlap the runs that
// replaced them until it woke.
type Freeze struct {
	Worker   string
	From, To time.Time
}

// Kill is an operator's kill of a task instance, or stop of a workflow instance, made through
// the API. The killed task, and every task of the stopped workflow instance, must not start a
// new attempt until a Rerun of it.
type Kill struct {
	// TaskID is the killed task instance; zero for a stop of WorkflowID.
	TaskID     int64
	WorkflowID int64
	// Attempt is the task's attempt when the kill was made, as the API answered: no attempt
	// after it may start. Unused for a stop, which is judged by At alone.
	Attempt int
	// At is when the kill had been made (the API had answered): no attempt claimed after it
	// may start.
	At time.Time
}

// Rerun is an operator's rerun of a failed or killed task instance through the API. It lifts
// the task's earlier kills, and the runs it had before are not competing results.
type Rerun struct {
	TaskID int64
	// At is when the rerun was asked for, before the API answered.
	At time.Time
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
	// Suspects are the workflow instances the problems are about.
	Suspects []int64
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
	if opts.WakeGrace <= 0 {
		opts.WakeGrace = 2 * time.Second
	}
	suspects := map[int64]bool{}
	problemOf := func(wf int64) func(string, ...any) {
		return func(format string, args ...any) {
			rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...))
			if wf != 0 {
				suspects[wf] = true
			}
		}
	}
	problem := problemOf(0)
	mayFail := map[int64]bool{}
	for _, id := range opts.MayFail {
		mayFail[id] = true
	}

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
			problemOf(wf.ID)("lost: workflow instance %d (%s) is %s, not finished by the deadline (%s)", wf.ID, wf.WorkflowName, wf.State, h.stuck(wf))
		case wf.State != dao.WorkflowSucceeded && !opts.AllowUnsuccessful && !mayFail[wf.ID]:
			problemOf(wf.ID)("lost: workflow instance %d (%s) ended %s, want succeeded (error: %s)", wf.ID, wf.WorkflowName, wf.State, deref(wf.Error))
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
		if t.ItemCount != nil {
			// A for-each task's parent runs nowhere: its items, judged each, are what ran.
			if n := len(runs[t.ID]) + len(attempts[t.ID]); n > 0 {
				problemOf(t.WorkflowInstanceID)("task %d %q (workflow instance %d), a for-each's parent, ran: %d run(s) and attempt(s)",
					t.ID, t.Name, t.WorkflowInstanceID, n)
			}
			continue
		}
		h.judgeTask(rep, opts, t, attempts[t.ID], runs[t.ID], problemOf(t.WorkflowInstanceID))
		judgeKills(opts, t, attempts[t.ID], runs[t.ID], problemOf(t.WorkflowInstanceID))
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
	rep.Suspects = slices.Sorted(maps.Keys(suspects))
	rep.Timeline = h.timeline(opts, attempts, runs)
	return rep
}

// Timeline shows the attempts and runs of every task of the workflow instances (all of the
// history's if none are given), with opts's origin.
func (h *History) Timeline(opts Options, workflows ...int64) string {
	attempts := map[int64][]dao.TaskAttempt{}
	for _, a := range h.Attempts {
		attempts[a.TaskInstanceID] = append(attempts[a.TaskInstanceID], a)
	}
	runs := map[int64][]Run{}
	for _, r := range RunsOf(h.Events) {
		runs[r.TaskID] = append(runs[r.TaskID], r)
	}
	if len(workflows) > 0 {
		opts.Workflows = workflows
	}
	return h.timeline(opts, attempts, runs)
}

// runsNowhere reports whether a task ends without any worker running it: a wait task (a
// signal or its timeout ends it), a workflow task (its child's end does) or a time sensor
// (the masters decide it by the clock).
func runsNowhere(t dao.TaskInstance) bool {
	return t.Type == workflow.TypeWait || t.Type == workflow.TypeWorkflow || (t.Type == workflow.TypeSensor && timeSensor(t))
}

// timeSensor reports whether the sensor t waits for a time, from its params.
func timeSensor(t dao.TaskInstance) bool {
	var p workflow.TaskParams
	return json.Unmarshal(t.Params, &p) == nil && p.Task.Time != nil
}

// recorded reports whether a task runs a command, which can keep a run log: a shell task (or
// one of a hand-written history, whose type is left empty). The others never leave a run.
func recorded(t dao.TaskInstance) bool {
	return t.Type != "noop" && t.Type != "llm" && t.Type != "agent" && t.Type != workflow.TypeSensor
}

// judgeKills checks that no attempt of t started after an operator killed it, or stopped its
// workflow instance, unless a rerun came in between.
func judgeKills(opts Options, t dao.TaskInstance, as []dao.TaskAttempt, rs []Run, problem func(string, ...any)) {
	name := fmt.Sprintf("task %d %q (workflow instance %d)", t.ID, t.Name, t.WorkflowInstanceID)
	for _, k := range opts.Kills {
		if k.TaskID != t.ID && (k.TaskID != 0 || k.WorkflowID != t.WorkflowInstanceID) {
			continue
		}
		// Lifted by the first rerun asked for after it.
		var until time.Time
		for _, r := range opts.Reruns {
			if r.TaskID == t.ID && r.At.After(k.At) && (until.IsZero() || r.At.Before(until)) {
				until = r.At
			}
		}
		before := func(at time.Time) bool { return until.IsZero() || at.Before(until) }
		reported := map[int]bool{}
		for _, a := range as {
			// A kill is judged by the attempt it answered with (a claim after it has a higher
			// one); a stop by the claim's time, which the database took in the claim's
			// transaction, so one after At saw the stop.
			late := (k.TaskID != 0 && a.Attempt > k.Attempt) || (k.TaskID == 0 && a.StartedAt.After(k.At))
			if late && before(a.StartedAt) {
				reported[a.Attempt] = true
				what := fmt.Sprintf("killed at attempt %d", k.Attempt)
				if k.TaskID == 0 {
					what = "its workflow instance stopped"
				}
				problem("started after its kill: %s, %s at %s, has attempt %d on %s claimed %s after",
					name, what, k.At.Format("15:04:05.000"), a.Attempt, a.WorkerID, ms(a.StartedAt.Sub(k.At)))
			}
		}
		if k.TaskID == 0 {
			continue
		}
		for _, r := range rs {
			if r.Attempt > k.Attempt && !reported[r.Attempt] && before(r.Start) {
				problem("started after its kill: %s, killed at attempt %d at %s, ran attempt %d on %s from %s after",
					name, k.Attempt, k.At.Format("15:04:05.000"), r.Attempt, r.Worker, ms(r.Start.Sub(k.At)))
			}
		}
	}
}

// frozen returns the freeze of worker that explains a run of it still alive at last, having
// been alive since before from: the freeze began by from and ended at most WakeGrace before
// last.
func frozen(opts Options, worker string, from, last time.Time) (Freeze, bool) {
	for _, f := range opts.Freezes {
		if f.Worker == worker && !f.From.After(from) && !last.After(f.To.Add(opts.WakeGrace)) {
			return f, true
		}
	}
	return Freeze{}, false
}

func (h *History) judgeTask(rep *Report, opts Options, t dao.TaskInstance, as []dao.TaskAttempt, rs []Run, problem func(string, ...any)) {
	name := fmt.Sprintf("task %d %q (workflow instance %d)", t.ID, t.Name, t.WorkflowInstanceID)
	if runsNowhere(t) {
		// No worker ever runs it: it has no attempt to judge, and one it has is a problem.
		if len(as) > 0 || len(rs) > 0 || t.Attempt != 0 {
			problem("a %s task ran: %s has %d attempt(s), %d run(s), attempt %d", t.Type, name, len(as), len(rs), t.Attempt)
		}
		return
	}
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
		if (run == nil || !run.Ended) && recorded(t) {
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
			if !r.Ended || r.Attempt == committed || rerunAfter(opts, t.ID, r.Start) {
				continue
			}
			if a, ok := byAttempt[r.Attempt]; opts.AtLeastOnce && ok && (a.EndedAt == nil || !r.Last.After(*a.EndedAt)) {
				continue
			}
			msg := fmt.Sprintf("done twice: the body of %s ran to its end in attempt %d on %s, whose result was not committed (attempt %d was)",
				name, r.Attempt, r.Worker, committed)
			// Frozen while it ran, so nothing could stop it before it woke.
			if f, ok := frozen(opts, r.Worker, r.Last, r.Last); ok && r.Start.Before(f.From) {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s (its worker was frozen whole %s..%s)", msg, rel(f.From, opts, h), rel(f.To, opts, h)))
			} else if opts.AllowOverlap {
				rep.Notes = append(rep.Notes, msg)
			} else {
				problem("%s", msg)
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
			// The older run is the one that should have stopped.
			old := a
			if b.Attempt < a.Attempt {
				old = b
			}
			if f, ok := frozen(opts, old.Worker, maxTime(a.Start, b.Start), old.Last); ok {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s (attempt %d's worker was frozen whole %s..%s)", msg, old.Attempt, rel(f.From, opts, h), rel(f.To, opts, h)))
			} else if opts.AllowOverlap {
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

// rerunAfter reports whether the task was rerun after at.
func rerunAfter(opts Options, task int64, at time.Time) bool {
	for _, r := range opts.Reruns {
		if r.TaskID == task && r.At.After(at) {
			return true
		}
	}
	return false
}

// aliveLag is how long before a fault a run's last sign of life may be for the run to count
// as alive at the fault: its beats come every 100 ms.
const aliveLag = 300 * time.Millisecond

// Moved returns the runs of worker that a fault at at interrupted, each with the next
// attempt's run, which took its task over: the failovers of one fault among many. A run was
// interrupted when it was alive at the fault, its attempt ended failed over or interrupted,
// and the next attempt started after the fault.
func (h *History) Moved(worker string, at time.Time) []Failover {
	names := map[int64]string{}
	for _, t := range h.Tasks {
		names[t.ID] = t.Name
	}
	type key struct {
		task    int64
		attempt int
	}
	moved := map[key]bool{}
	for _, a := range h.Attempts {
		if a.Outcome != nil && (*a.Outcome == dao.OutcomeFailedOver || *a.Outcome == dao.OutcomeInterrupted) {
			moved[key{a.TaskInstanceID, a.Attempt}] = true
		}
	}
	byTask := map[int64][]Run{}
	for _, r := range RunsOf(h.Events) {
		byTask[r.TaskID] = append(byTask[r.TaskID], r)
	}
	var out []Failover
	for _, id := range slices.Sorted(maps.Keys(byTask)) {
		rs := byTask[id]
		for i, r := range rs {
			if r.Worker != worker || !r.Start.Before(at) || r.Last.Before(at.Add(-aliveLag)) || !moved[key{id, r.Attempt}] {
				continue
			}
			for _, next := range rs[i+1:] {
				if next.Attempt > r.Attempt && next.Start.After(at) {
					out = append(out, Failover{TaskID: id, Task: names[id], From: r, To: next,
						Stopped: r.Last.Sub(at), Elsewhere: next.Start.Sub(at)})
					break
				}
			}
		}
	}
	return out
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

// stuck says what an unfinished workflow instance was left with: its owner and its tasks not
// yet ended, so that a lost instance's verdict shows what it waits on.
func (h *History) stuck(wf dao.WorkflowInstance) string {
	var b strings.Builder
	fmt.Fprintf(&b, "owner %s", deref(wf.Owner))
	if wf.ConcurrencyKey != nil {
		fmt.Fprintf(&b, ", concurrency key %q", *wf.ConcurrencyKey)
	}
	open := 0
	for _, t := range h.Tasks {
		if t.WorkflowInstanceID != wf.ID || t.State.Terminal() {
			continue
		}
		if open++; open > 8 {
			continue
		}
		fmt.Fprintf(&b, "; task %d %q %s attempt %d on %s since %s", t.ID, t.Name, t.State, t.Attempt, deref(t.WorkerID),
			t.QueuedAt.Format("15:04:05.000"))
		if t.StartedAt != nil {
			fmt.Fprintf(&b, " (started %s)", t.StartedAt.Format("15:04:05.000"))
		}
	}
	if open > 8 {
		fmt.Fprintf(&b, "; and %d more task(s) not ended", open-8)
	}
	if open == 0 {
		b.WriteString("; every task ended")
	}
	return b.String()
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
