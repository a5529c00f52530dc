package history

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

var t0 = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds, to the microsecond.
func at(s float64) time.Time { return t0.Add(time.Duration(math.Round(s*1e6)) * time.Microsecond) }

func instance(id int64, state dao.WorkflowState) dao.WorkflowInstance {
	return dao.WorkflowInstance{ID: id, WorkflowName: "wf", State: state}
}

// task is a task instance of workflow 1 whose current attempt is attempt; a succeeded task
// carries the result line of that attempt.
func task(id int64, state dao.TaskState, attempt int, worker string) dao.TaskInstance {
	ti := dao.TaskInstance{ID: id, WorkflowInstanceID: 1, Name: fmt.Sprintf("t%d", id), State: state, Attempt: attempt, WorkerID: &worker}
	if state == dao.TaskSucceeded {
		out := resultOf(id, attempt, worker)
		ti.Output = &out
	}
	return ti
}

func resultOf(id int64, attempt int, worker string) string {
	return fmt.Sprintf("ran task %d attempt %d on %s", id, attempt, worker)
}

func attempt(taskID int64, n int, worker string, start, end float64, outcome dao.Outcome) dao.TaskAttempt {
	a := dao.TaskAttempt{TaskInstanceID: taskID, Attempt: n, WorkerID: worker, StartedAt: at(start)}
	if outcome != "" {
		e := at(end)
		a.EndedAt, a.Outcome = &e, &outcome
	}
	return a
}

// run is the run log of one run alive from start to last, beating every 100 ms, with an end
// record at last if ended.
func run(taskID int64, n int, worker string, start, last float64, ended bool) []Event {
	evs := []Event{{TaskID: taskID, Attempt: n, Worker: worker, Kind: EventStart, At: at(start)}}
	for i := 1; start+0.1*float64(i) < last+1e-9; i++ {
		evs = append(evs, Event{TaskID: taskID, Attempt: n, Worker: worker, Kind: EventBeat, At: at(start + 0.1*float64(i))})
	}
	if ended {
		evs = append(evs, Event{TaskID: taskID, Attempt: n, Worker: worker, Kind: EventEnd, At: at(last)})
	}
	return evs
}

func events(runs ...[]Event) []Event {
	var out []Event
	for _, r := range runs {
		out = append(out, r...)
	}
	return out
}

// failedOver is the history of a clean failover: task 1 ran on w1 from -1 s until the fault at
// 0 s stopped it at 0.5 s, and again on w2 from 4.5 s to 7 s; task 2 ran once on w2.
func failedOver() History {
	return History{
		Workflows: []dao.WorkflowInstance{instance(1, dao.WorkflowSucceeded)},
		Tasks:     []dao.TaskInstance{task(1, dao.TaskSucceeded, 2, "w2"), task(2, dao.TaskSucceeded, 1, "w2")},
		Attempts: []dao.TaskAttempt{
			attempt(1, 1, "w1", -1, 4.4, dao.OutcomeFailedOver),
			attempt(1, 2, "w2", 4.5, 7, dao.OutcomeSucceeded),
			attempt(2, 1, "w2", -1, 2, dao.OutcomeSucceeded),
		},
		Events: events(run(1, 1, "w1", -1, 0.5, false), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true)),
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edit   func(h *History, o *Options)
		wantOf []string // one substring per problem, in order
	}{
		{name: "clean failover"},
		{name: "lost: not finished", wantOf: []string{"lost: workflow instance 1 (wf) is running"},
			edit: func(h *History, o *Options) { h.Workflows[0].State = dao.WorkflowRunning }},
		{name: "lost: failed", wantOf: []string{"lost: workflow instance 1 (wf) ended failed, want succeeded"},
			edit: func(h *History, o *Options) { h.Workflows[0].State = dao.WorkflowFailed }},
		{name: "failed and allowed",
			edit: func(h *History, o *Options) { h.Workflows[0].State = dao.WorkflowFailed; o.AllowUnsuccessful = true }},
		{name: "lost: missing workflow", wantOf: []string{"lost: workflow instance 2 does not exist"},
			edit: func(h *History, o *Options) { o.Workflows = []int64{1, 2} }},
		{name: "committed twice", wantOf: []string{`committed twice: task 1 "t1" (workflow instance 1) has succeeded attempts [1 2]`, "done twice"},
			edit: func(h *History, o *Options) {
				h.Attempts[0] = attempt(1, 1, "w1", -1, 4.4, dao.OutcomeSucceeded)
				h.Events = events(run(1, 1, "w1", -1, 0.5, true), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "committed without an end", wantOf: []string{"committed attempt 2, whose body never ran to its end"},
			edit: func(h *History, o *Options) {
				h.Events = events(run(1, 1, "w1", -1, 0.5, false), run(1, 2, "w2", 4.5, 7, false), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "committed without a run", wantOf: []string{"committed attempt 2, whose body never ran to its end"},
			edit: func(h *History, o *Options) {
				h.Events = events(run(1, 1, "w1", -1, 0.5, false), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "done twice", wantOf: []string{"done twice: the body of task 1 \"t1\" (workflow instance 1) ran to its end in attempt 1 on w1"},
			edit: func(h *History, o *Options) {
				h.Events = events(run(1, 1, "w1", -1, 0.5, true), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "done twice, allowed with overlap",
			edit: func(h *History, o *Options) {
				o.AllowOverlap = true
				h.Events = events(run(1, 1, "w1", -1, 0.5, true), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "overlap", wantOf: []string{"overlap of 1000 ms: task 1 \"t1\" (workflow instance 1): attempt 1 on w1 alive -1.000s..+5.500s, attempt 2 on w2 alive +4.500s..+7.000s"},
			edit: func(h *History, o *Options) {
				h.Events = events(run(1, 1, "w1", -1, 5.5, false), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "overlap allowed",
			edit: func(h *History, o *Options) {
				o.AllowOverlap = true
				h.Events = events(run(1, 1, "w1", -1, 5.5, false), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "ran after its commit", wantOf: []string{"ran after its commit: task 2 \"t2\" (workflow instance 1) has attempt 2 on w1 after its committed attempt 1"},
			edit: func(h *History, o *Options) {
				h.Attempts = append(h.Attempts, attempt(2, 2, "w1", 3, 4, dao.OutcomeFailed))
			}},
		{name: "output of another attempt", wantOf: []string{"committed attempt 2 with the output of attempt 1"},
			edit: func(h *History, o *Options) {
				out := resultOf(1, 1, "w1")
				h.Tasks[0].Output = &out
			}},
		{name: "a wait task, signalled",
			edit: func(h *History, o *Options) {
				out := "approved"
				h.Tasks = append(h.Tasks, dao.TaskInstance{ID: 3, WorkflowInstanceID: 1, Name: "gate", Type: "wait",
					State: dao.TaskSucceeded, Output: &out})
			}},
		{name: "a wait task that ran", wantOf: []string{`a wait task ran: task 3 "gate" (workflow instance 1) has 1 attempt(s), 0 run(s), attempt 1`},
			edit: func(h *History, o *Options) {
				h.Tasks = append(h.Tasks, dao.TaskInstance{ID: 3, WorkflowInstanceID: 1, Name: "gate", Type: "wait",
					State: dao.TaskSucceeded, Attempt: 1})
				h.Attempts = append(h.Attempts, attempt(3, 1, "w1", 1, 2, dao.OutcomeSucceeded))
			}},
		{name: "run zksched never gave", wantOf: []string{"attempt 3 ran on w3 but zksched never recorded that attempt"},
			edit: func(h *History, o *Options) { h.Events = append(h.Events, run(1, 3, "w3", 8, 8.5, false)...) }},
		{name: "run on another worker than its attempt's", wantOf: []string{"attempt 1 ran on w3 but zksched gave it to w2"},
			edit: func(h *History, o *Options) {
				h.Events = events(run(1, 1, "w1", -1, 0.5, false), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w3", -1, 2, true))
			}},
		{name: "task zksched does not know", wantOf: []string{"task instance 9 ran (1 run(s) in the run log) but zksched has no such task"},
			edit: func(h *History, o *Options) { h.Events = append(h.Events, run(9, 1, "w1", 1, 2, true)...) }},
		{name: "an agent paused, then resumed elsewhere after its wait", // agents keep no run log
			edit: func(h *History, o *Options) {
				h.Tasks[0].Type = "agent"
				h.Tasks[0].Output = nil
				h.Attempts[0] = attempt(1, 1, "w1", -1, 0.5, dao.OutcomePaused)
				h.Events = events(run(2, 1, "w2", -1, 2, true))
			}},
		{name: "a wait task, succeeded by its signal",
			edit: func(h *History, o *Options) {
				h.Tasks = append(h.Tasks, dao.TaskInstance{ID: 3, WorkflowInstanceID: 1, Name: "review", Type: "wait", State: dao.TaskSucceeded})
			}},
		{name: "failed and may fail",
			edit: func(h *History, o *Options) { h.Workflows[0].State = dao.WorkflowFailed; o.MayFail = []int64{1} }},
		{name: "overlap of a frozen worker", // w1 frozen whole from -0.5 s to 5.5 s, its run killed on waking
			edit: func(h *History, o *Options) {
				o.Freezes = []Freeze{{Worker: "w1", From: at(-0.5), To: at(5.5)}}
				h.Events = events(run(1, 1, "w1", -1, 5.6, false), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "overlap past the wake of a frozen worker", wantOf: []string{"overlap of 2000 ms"},
			edit: func(h *History, o *Options) {
				o.Freezes = []Freeze{{Worker: "w1", From: at(-0.5), To: at(3)}}
				h.Events = events(run(1, 1, "w1", -1, 6.5, false), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "overlap of a worker frozen after it began", wantOf: []string{"overlap of 1000 ms"},
			edit: func(h *History, o *Options) {
				o.Freezes = []Freeze{{Worker: "w1", From: at(5), To: at(5.5)}}
				h.Events = events(run(1, 1, "w1", -1, 5.5, false), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "done twice by a frozen worker",
			edit: func(h *History, o *Options) {
				o.Freezes = []Freeze{{Worker: "w1", From: at(-0.5), To: at(0.4)}}
				h.Events = events(run(1, 1, "w1", -1, 0.5, true), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "done before its attempt was closed, at least once",
			edit: func(h *History, o *Options) {
				o.AtLeastOnce = true
				h.Events = events(run(1, 1, "w1", -1, 0.5, true), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "done after its attempt was closed, at least once", wantOf: []string{"done twice: the body of task 1 \"t1\" (workflow instance 1) ran to its end in attempt 1 on w1"},
			edit: func(h *History, o *Options) {
				o.AtLeastOnce = true
				h.Events = events(run(1, 1, "w1", -1, 4.45, true), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "done before a rerun",
			edit: func(h *History, o *Options) {
				o.Reruns = []Rerun{{TaskID: 1, At: at(4)}}
				h.Events = events(run(1, 1, "w1", -1, 0.5, true), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
			}},
		{name: "started after its kill", wantOf: []string{`started after its kill: task 1 "t1" (workflow instance 1), killed at attempt 1 at 12:00:00.000, has attempt 2 on w2 claimed 4500 ms after`},
			edit: func(h *History, o *Options) { o.Kills = []Kill{{TaskID: 1, WorkflowID: 1, Attempt: 1, At: at(0)}} }},
		{name: "ran after its kill without an attempt record", wantOf: []string{"attempt 3 ran on w3 but zksched never recorded that attempt",
			`started after its kill: task 1 "t1" (workflow instance 1), killed at attempt 2 at 12:00:07.000, ran attempt 3 on w3 from 1000 ms after`},
			edit: func(h *History, o *Options) {
				o.Kills = []Kill{{TaskID: 1, WorkflowID: 1, Attempt: 2, At: at(7)}}
				h.Events = append(h.Events, run(1, 3, "w3", 8, 8.5, false)...)
			}},
		{name: "started after its kill and a rerun",
			edit: func(h *History, o *Options) {
				o.Kills = []Kill{{TaskID: 1, WorkflowID: 1, Attempt: 1, At: at(0)}}
				o.Reruns = []Rerun{{TaskID: 1, At: at(4)}}
			}},
		{name: "rerun before the kill does not lift it", wantOf: []string{"started after its kill"},
			edit: func(h *History, o *Options) {
				o.Kills = []Kill{{TaskID: 1, WorkflowID: 1, Attempt: 1, At: at(0)}}
				o.Reruns = []Rerun{{TaskID: 1, At: at(-0.5)}}
			}},
		{name: "claimed after its workflow stopped", wantOf: []string{`started after its kill: task 1 "t1" (workflow instance 1), its workflow instance stopped at 12:00:04.000, has attempt 2 on w2 claimed 500 ms after`},
			edit: func(h *History, o *Options) { o.Kills = []Kill{{WorkflowID: 1, At: at(4)}} }},
		{name: "stop of another workflow",
			edit: func(h *History, o *Options) { o.Kills = []Kill{{WorkflowID: 2, At: at(-5)}} }},
		{name: "agent task committed without a run",
			edit: func(h *History, o *Options) {
				h.Tasks[0].Type = "agent"
				h.Events = events(run(2, 1, "w2", -1, 2, true))
			}},
		{name: "sensor committed without a run", // sensors keep no run log
			edit: func(h *History, o *Options) {
				h.Tasks[0].Type = "sensor"
				h.Events = events(run(2, 1, "w2", -1, 2, true))
			}},
		{name: "a time sensor, ended by the masters",
			edit: func(h *History, o *Options) {
				h.Tasks = append(h.Tasks, dao.TaskInstance{ID: 3, WorkflowInstanceID: 1, Name: "clock", Type: "sensor", State: dao.TaskSucceeded,
					Params: []byte(`{"task": {"name": "clock", "type": "sensor", "time": {"after": "2s"}}}`)})
			}},
		{name: "a file sensor with no attempt", wantOf: []string{`task 3 "file" (workflow instance 1) succeeded under attempt 0`},
			edit: func(h *History, o *Options) {
				h.Tasks = append(h.Tasks, dao.TaskInstance{ID: 3, WorkflowInstanceID: 1, Name: "file", Type: "sensor", State: dao.TaskSucceeded,
					Params: []byte(`{"task": {"name": "file", "type": "sensor", "file": {"path": "/tmp/x"}}}`)})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := failedOver()
			opts := Options{FaultAt: at(0)}
			if tt.edit != nil {
				tt.edit(&h, &opts)
			}
			rep := h.Judge(opts)
			if len(rep.Problems) != len(tt.wantOf) {
				t.Fatalf("got %d problems, want %d:\n%s\n%s", len(rep.Problems), len(tt.wantOf), strings.Join(rep.Problems, "\n"), rep.Timeline)
			}
			for i, want := range tt.wantOf {
				if !strings.Contains(rep.Problems[i], want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, rep.Problems[i], want)
				}
			}
		})
	}
}

func TestJudgeSuspects(t *testing.T) {
	t.Parallel()
	h := failedOver()
	h.Workflows = append(h.Workflows, instance(2, dao.WorkflowRunning))
	rep := h.Judge(Options{Kills: []Kill{{TaskID: 1, WorkflowID: 1, Attempt: 1, At: at(0)}}})
	if want := []int64{1, 2}; !slices.Equal(rep.Suspects, want) {
		t.Errorf("suspects = %v, want %v", rep.Suspects, want)
	}
	if tl := h.Timeline(Options{}, 2); strings.Contains(tl, `"t1"`) || !strings.Contains(tl, "workflow instance 2") {
		t.Errorf("the timeline of workflow instance 2 alone:\n%s", tl)
	}
}

func TestMoved(t *testing.T) {
	t.Parallel()
	h := failedOver()
	got := h.Moved("w1", at(0))
	if len(got) != 1 || got[0].TaskID != 1 || got[0].To.Attempt != 2 || got[0].Elsewhere != 4500*time.Millisecond || got[0].Stopped != 500*time.Millisecond {
		t.Fatalf("moved = %+v, want task 1 stopped 500 ms and running elsewhere 4500 ms after the fault", got)
	}
	if got := h.Moved("w2", at(0)); len(got) != 0 {
		t.Errorf("moved from w2 = %+v, want none: its runs were not taken over", got)
	}
	if got := h.Moved("w1", at(1)); len(got) != 0 {
		t.Errorf("moved at 1 s = %+v, want none: w1's run was last seen at 0.5 s", got)
	}
	if got := h.Moved("w1", at(-2)); len(got) != 0 {
		t.Errorf("moved at -2 s = %+v, want none: nothing ran yet", got)
	}
}

func TestJudgeFigures(t *testing.T) {
	t.Parallel()
	h := failedOver()
	rep := h.Judge(Options{FaultAt: at(0)})
	if len(rep.Failovers) != 1 {
		t.Fatalf("got %d failovers, want 1: %+v", len(rep.Failovers), rep.Failovers)
	}
	f := rep.Failovers[0]
	if f.TaskID != 1 || f.From.Attempt != 1 || f.To.Attempt != 2 || f.Stopped != 500*time.Millisecond || f.Elsewhere != 4500*time.Millisecond {
		t.Errorf("failover = task %d attempt %d→%d stopped %v elsewhere %v; want task 1 attempt 1→2 stopped 500ms elsewhere 4.5s",
			f.TaskID, f.From.Attempt, f.To.Attempt, f.Stopped, f.Elsewhere)
	}
	if got, want := rep.AttemptsPerTask, map[int]int{1: 1, 2: 1}; len(got) != len(want) || got[1] != 1 || got[2] != 1 {
		t.Errorf("attempts per task = %v, want %v", got, want)
	}
	if got := rep.MaxOverlap(); got != 0 {
		t.Errorf("overlap = %v, want 0", got)
	}
	const want = "history: 2 tasks, attempts per task [1×1 1×2], 1 failed over, fault → running elsewhere 4500 ms..4500 ms, overlap 0 ms in 0 pair(s), 0 problem(s)"
	if got := rep.Summary(); got != want {
		t.Errorf("summary = %q\nwant      %q", got, want)
	}
	for _, want := range []string{
		"timeline (0 = the fault, 12:00:00.000):",
		`workflow instance 1 "wf": succeeded`,
		"attempt 1 on w1: claimed -1.000s, ended +4.400s failed_over | ran -1.000s..+0.500s, 15 beats, no end",
		"attempt 2 on w2: claimed +4.500s, ended +7.000s succeeded | ran +4.500s..+7.000s, 25 beats, to its end",
	} {
		if !strings.Contains(rep.Timeline, want) {
			t.Errorf("timeline lacks %q:\n%s", want, rep.Timeline)
		}
	}

	// The frozen case: the overlap is allowed, and measured.
	h.Events = events(run(1, 1, "w1", -1, 5.5, false), run(1, 2, "w2", 4.5, 7, true), run(2, 1, "w2", -1, 2, true))
	rep = h.Judge(Options{FaultAt: at(0), AllowOverlap: true})
	if len(rep.Problems) != 0 || len(rep.Notes) != 1 || rep.MaxOverlap() != time.Second {
		t.Errorf("allowed overlap: problems %q notes %q overlap %v; want no problem, one note, 1s", rep.Problems, rep.Notes, rep.MaxOverlap())
	}
}

func TestRunsOf(t *testing.T) {
	t.Parallel()
	evs := events(run(2, 1, "w1", 0, 0.3, true), run(1, 1, "w1", 1, 1.2, false))
	// A beat inserted before the start record does not move the start.
	evs = append([]Event{{TaskID: 1, Attempt: 2, Worker: "w2", Kind: EventBeat, At: at(2.05)}},
		append(evs, Event{TaskID: 1, Attempt: 2, Worker: "w2", Kind: EventStart, At: at(2)})...)
	got := RunsOf(evs)
	want := []Run{
		{TaskID: 1, Attempt: 1, Worker: "w1", Start: at(1), Last: at(1.2), Beats: 2, Started: true},
		{TaskID: 1, Attempt: 2, Worker: "w2", Start: at(2), Last: at(2.05), Beats: 1, Started: true},
		{TaskID: 2, Attempt: 1, Worker: "w1", Start: at(0), Last: at(0.3), Beats: 3, Started: true, Ended: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d runs, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.TaskID != w.TaskID || g.Attempt != w.Attempt || g.Worker != w.Worker || !g.Start.Equal(w.Start) ||
			g.Last.Sub(w.Last).Abs() > time.Microsecond || g.Beats != w.Beats || g.Started != w.Started || g.Ended != w.Ended {
			t.Errorf("run %d = %+v\nwant     %+v", i, g, w)
		}
	}
}
