package soak

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
)

var t0 = time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)

func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// runEvents is a run of a task alive from start to last.
func runEvents(task int64, attempt int, worker string, start, last float64) []history.Event {
	return []history.Event{
		{TaskID: task, Attempt: attempt, Worker: worker, Kind: history.EventStart, At: sec(start)},
		{TaskID: task, Attempt: attempt, Worker: worker, Kind: history.EventBeat, At: sec(last)},
	}
}

func newVerdict() *verdict {
	return &verdict{cfg: Config{KillGrace: 500 * time.Millisecond}, nm: &nemesis{}, cl: &cluster{ids: map[string]*node{}},
		res: &Result{}, chaosAt: t0}
}

func TestJudgePools(t *testing.T) {
	pooled := func(id int64) dao.TaskInstance {
		p := "soak"
		return dao.TaskInstance{ID: id, WorkflowInstanceID: 1, Pool: &p}
	}
	tests := []struct {
		name    string
		events  [][]history.Event
		freezes []history.Freeze
		want    string
	}{
		{name: "within the limit", events: [][]history.Event{
			runEvents(1, 1, "w1", 0, 2), runEvents(2, 1, "w2", 1, 3), runEvents(3, 1, "w1", 2, 4)}},
		{name: "over the limit", want: "pool soak over its limit of 2: 3 runs alive at +1.500s", events: [][]history.Event{
			runEvents(1, 1, "w1", 0, 2), runEvents(2, 1, "w2", 1, 3), runEvents(3, 1, "w3", 1.5, 4)}},
		{name: "a run of an instant", events: [][]history.Event{
			runEvents(1, 1, "w1", 0, 2), runEvents(2, 1, "w2", 1, 3), runEvents(3, 1, "w3", 1.5, 1.5)}},
		{name: "a frozen worker's run", freezes: []history.Freeze{{Worker: "w1", From: sec(0.5), To: sec(1.8)}},
			events: [][]history.Event{runEvents(1, 1, "w1", 0, 2), runEvents(2, 1, "w2", 1, 3), runEvents(3, 1, "w3", 1.5, 4)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerdict()
			v.nm.freezes = tt.freezes
			h := &history.History{Tasks: []dao.TaskInstance{pooled(1), pooled(2), pooled(3)}}
			for _, e := range tt.events {
				h.Events = append(h.Events, e...)
			}
			v.judgePools(h)
			got := strings.Join(v.res.Anomalies, "\n")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("anomalies %q, want %q", got, tt.want)
			}
		})
	}
}

func TestJudgeOrphans(t *testing.T) {
	v := newVerdict()
	v.cl.exits = []exit{{node: "worker-1", id: "w1", at: sec(1)}}
	h := &history.History{}
	for _, e := range [][]history.Event{
		runEvents(1, 1, "w1", 0, 1.4),   // killed 400 ms after its worker: within the grace
		runEvents(2, 1, "w1", 1.2, 1.6), // started after its worker died, killed at once
		runEvents(3, 1, "w1", 0, 1.8),   // went on
		runEvents(4, 1, "w2", 0, 5),     // another worker's
	} {
		h.Events = append(h.Events, e...)
	}
	v.judgeOrphans(h)
	if len(v.res.Anomalies) != 1 || !strings.Contains(v.res.Anomalies[0], "outlived its worker: task 3 attempt 1 on w1") {
		t.Errorf("anomalies %q, want task 3's alone", v.res.Anomalies)
	}
}

func TestExitVerdict(t *testing.T) {
	tests := []struct {
		e    exit
		want string
		ok   bool
	}{
		{exit{signal: syscall.SIGKILL, expect: causeKill}, "killed (kill -9)", true},
		{exit{code: exitFenced}, "fenced (exit 75)", true},
		{exit{code: 0, expect: causeTerm}, "stopped (SIGTERM, exit 0)", true},
		{exit{code: 0}, "exit 0", false},
		{exit{code: 1, expect: causeTerm}, "exit 1", false},
		{exit{signal: syscall.SIGKILL}, "ended by signal killed", false},
		{exit{code: 66}, "exit 66", false}, // the race detector's
	}
	for _, tt := range tests {
		if got, ok := tt.e.verdict(); got != tt.want || ok != tt.ok {
			t.Errorf("%+v: verdict %q %v, want %q %v", tt.e, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFencedByServers(t *testing.T) {
	v := newVerdict()
	v.cfg.SessionTimeout, v.cfg.FailoverDelay = 2*time.Second, 2*time.Second
	v.res.Exits, v.res.FencedAfter, v.res.FencedByServers = map[string]int{}, map[string]int{}, map[string]int{}
	v.nm.events = []faultEvent{
		{at: sec(0), kind: ZKKillServer, target: "zookeeper"},
		{at: sec(5), kind: PauseLong, target: "worker-1"},
		{at: sec(30), kind: ZKQuorumLoss, target: "zookeeper"},
	}
	v.cl.exits = []exit{
		// Its own pause, then its output blocked, under way at the exit.
		{node: "worker-1", code: exitFenced, at: sec(12), faults: []ownFault{
			{kind: PauseLong, from: sec(5), to: sec(11)}, {kind: LogBlocked, from: sec(11.5)}}},
		{node: "worker-2", code: exitFenced, at: sec(10)}, // no fault of its own
		{node: "worker-3", code: exitFenced, at: sec(36), faults: []ownFault{{kind: ZKCutLong, from: sec(10), to: sec(16)}}},
	}
	v.judgeExits()
	if len(v.res.FencedAfter) != 1 || v.res.FencedAfter[PauseLong] != 1 {
		t.Errorf("fenced after = %v, want the pause alone", v.res.FencedAfter)
	}
	if len(v.res.HealToFencedExit) != 1 || v.res.HealToFencedExit[0] != time.Second {
		t.Errorf("heal → fenced exit = %v, want 1s", v.res.HealToFencedExit)
	}
	want := map[string]int{ZKKillServer: 1, ZKQuorumLoss: 1}
	if len(v.res.FencedByServers) != len(want) || v.res.FencedByServers[ZKKillServer] != 1 || v.res.FencedByServers[ZKQuorumLoss] != 1 {
		t.Errorf("fenced by servers = %v, want %v", v.res.FencedByServers, want)
	}
	if len(v.res.Anomalies) != 0 {
		t.Errorf("anomalies %q, want none: every exit was fenced", v.res.Anomalies)
	}
}

func TestJudgeSignals(t *testing.T) {
	str := func(s string) *string { return &s }
	gate := func(state dao.TaskState, output, errMsg *string) dao.TaskInstance {
		return dao.TaskInstance{ID: 7, WorkflowInstanceID: 3, Name: "gate", Type: "wait", State: state, Output: output, Error: errMsg}
	}
	ok := signalSent{TaskID: 7, WorkflowID: 3, Output: "soak 3/0", Status: 200}
	no := signalSent{TaskID: 7, WorkflowID: 3, Output: "soak 3/0", Fail: true, Status: 200}
	again := signalSent{TaskID: 7, WorkflowID: 3, Output: "soak 3/1", Status: 409}
	agent := func(state dao.TaskState, output, errMsg *string) dao.TaskInstance {
		a := gate(state, output, errMsg)
		a.Name, a.Type = "agent", "agent"
		return a
	}
	final := str("answer to: S2 final [soak 3/0]")
	tests := []struct {
		name    string
		task    dao.TaskInstance
		signals []signalSent
		// approve is the agent's approve step's output, if it has one.
		approve *string
		want    string
	}{
		{name: "approved", task: gate(dao.TaskSucceeded, str("soak 3/0"), nil), signals: []signalSent{ok, again}},
		{name: "agent approved", task: agent(dao.TaskSucceeded, final, nil), approve: str("soak 3/0"), signals: []signalSent{ok, again}},
		{name: "agent rejected", task: agent(dao.TaskFailed, nil, str("failed by a signal: soak 3/0")), signals: []signalSent{no}},
		{name: "agent approved, step without it", want: `step approve none), not as its accepted signal`,
			task: agent(dao.TaskSucceeded, final, nil), signals: []signalSent{ok}},
		{name: "agent approved, step with another", want: `step approve "soak 3/1"), not as its accepted signal`,
			task: agent(dao.TaskSucceeded, final, nil), approve: str("soak 3/1"), signals: []signalSent{ok}},
		{name: "agent approved, final output without it", want: "not as its accepted signal",
			task: agent(dao.TaskSucceeded, str("answer to: S2 final []"), nil), approve: str("soak 3/0"), signals: []signalSent{ok}},
		{name: "agent approved, never resumed", want: "ended failed",
			task: agent(dao.TaskFailed, nil, str("no signal within its timeout of 6s")), signals: []signalSent{ok}},
		{name: "agent resumed though refused", want: "by a signal no master accepted",
			task: agent(dao.TaskSucceeded, str("answer to: S2 final [soak 3/1]"), nil), approve: str("soak 3/1"), signals: []signalSent{again}},
		{name: "rejected", task: gate(dao.TaskFailed, nil, str("failed by a signal: soak 3/0")), signals: []signalSent{no}},
		{name: "timed out", task: gate(dao.TaskFailed, nil, str("no signal within its timeout of 6s")),
			signals: []signalSent{{TaskID: 7, Output: "late", Status: 409}}},
		{name: "applied twice", want: "accepted 2 signals", task: gate(dao.TaskSucceeded, str("soak 3/0"), nil),
			signals: []signalSent{ok, {TaskID: 7, Output: "soak 3/1", Status: 200}}},
		{name: "lost", want: "not as its accepted signal", task: gate(dao.TaskFailed, nil, str("no signal within its timeout of 6s")),
			signals: []signalSent{ok}},
		{name: "another output", want: "not as its accepted signal", task: gate(dao.TaskSucceeded, str("soak 3/1"), nil),
			signals: []signalSent{ok}},
		{name: "applied though refused", want: "by a signal no master accepted", task: gate(dao.TaskSucceeded, str("soak 3/1"), nil),
			signals: []signalSent{again}},
		{name: "applied while unanswered", task: gate(dao.TaskSucceeded, str("soak 3/1"), nil),
			signals: []signalSent{{TaskID: 7, Output: "soak 3/1", Status: 0}, again}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerdict()
			v.w = &workload{signals: tt.signals}
			v.approvals = map[int64]string{}
			if tt.approve != nil {
				v.approvals[tt.task.ID] = *tt.approve
			}
			v.judgeSignals(&history.History{Tasks: []dao.TaskInstance{tt.task}})
			got := strings.Join(v.res.Anomalies, "\n")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("anomalies %q, want one with %q", got, tt.want)
			}
		})
	}
}

func TestJudgeForEach(t *testing.T) {
	str := func(s string) *string { return &s }
	six := 6
	parent := func(state dao.TaskState, output *string) dao.TaskInstance {
		return dao.TaskInstance{ID: 10, WorkflowInstanceID: 1, Name: "each", State: state, Output: output, ItemCount: &six}
	}
	item := func(id int64, index int) dao.TaskInstance {
		return dao.TaskInstance{ID: id, WorkflowInstanceID: 1, Name: fmt.Sprintf("each[%d]", index), State: dao.TaskSucceeded}
	}
	all := []dao.TaskInstance{item(11, 0), item(12, 1), item(13, 2), item(14, 3), item(15, 4), item(16, 5)}
	done := str(`["a","b","c","d","e","f"]`)
	// Two at a time, each item's run starting as one before it ended; item 3 retried.
	inTurn := [][]history.Event{runEvents(11, 1, "w1", 0, 1), runEvents(12, 1, "w2", 0.1, 1.5), runEvents(13, 1, "w1", 1, 2),
		runEvents(14, 1, "w2", 1.6, 1.8), runEvents(14, 2, "w3", 1.9, 2.5), runEvents(15, 1, "w1", 2.1, 3),
		runEvents(16, 1, "w2", 2.6, 3.2)}
	tests := []struct {
		name    string
		tasks   []dao.TaskInstance
		events  [][]history.Event
		freezes []history.Freeze
		want    string
	}{
		{name: "in turn", tasks: append([]dao.TaskInstance{parent(dao.TaskSucceeded, done)}, all...), events: inTurn},
		{name: "over max-parallel", want: `"each" of workflow instance 1 over its max-parallel of 2: 3 items alive at +0.500s: each[0] (task 11), each[1] (task 12), each[2] (task 13)`,
			tasks:  append([]dao.TaskInstance{parent(dao.TaskSucceeded, done)}, all...),
			events: [][]history.Event{runEvents(11, 1, "w1", 0, 1), runEvents(12, 1, "w2", 0.1, 1.5), runEvents(13, 1, "w3", 0.5, 2)}},
		{name: "a frozen worker's item", freezes: []history.Freeze{{Worker: "w1", From: sec(0.2), To: sec(0.9)}},
			tasks:  append([]dao.TaskInstance{parent(dao.TaskSucceeded, done)}, all...),
			events: [][]history.Event{runEvents(11, 1, "w1", 0, 1), runEvents(12, 1, "w2", 0.1, 1.5), runEvents(13, 1, "w3", 0.5, 2)}},
		{name: "two runs of one item", tasks: append([]dao.TaskInstance{parent(dao.TaskSucceeded, done)}, all...),
			events: [][]history.Event{runEvents(11, 1, "w1", 0, 1), runEvents(11, 2, "w3", 0.5, 1.2), runEvents(12, 1, "w2", 0.1, 1.5)}},
		{name: "created out of order", want: "created item 3 (task 13) before item 2 (task 14)",
			tasks: []dao.TaskInstance{parent(dao.TaskSucceeded, done), item(11, 0), item(12, 1), item(14, 2), item(13, 3), item(15, 4), item(16, 5)}},
		{name: "an item missing", want: "has item 2 but not item 1",
			tasks: []dao.TaskInstance{parent(dao.TaskFailed, nil), item(11, 0), item(13, 2)}},
		{name: "succeeded short of its items", want: "succeeded with 5 items of 6",
			tasks: append([]dao.TaskInstance{parent(dao.TaskSucceeded, done)}, all[:5]...)},
		{name: "succeeded with an item failed", want: "succeeded with 6 items of 6 (succeeded succeeded failed",
			tasks: func() []dao.TaskInstance {
				ts := append([]dao.TaskInstance{parent(dao.TaskSucceeded, done)}, all...)
				ts[3].State = dao.TaskFailed
				return ts
			}()},
		{name: "succeeded without every output", want: `output "[\"a\"]"`,
			tasks: append([]dao.TaskInstance{parent(dao.TaskSucceeded, str(`["a"]`))}, all...)},
		{name: "failed, items unfinished", tasks: append([]dao.TaskInstance{parent(dao.TaskFailed, nil)}, all[:3]...)},
		{name: "items without a parent", want: `has items of "each" but no such parent`, tasks: all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerdict()
			v.nm.freezes = tt.freezes
			h := &history.History{Workflows: []dao.WorkflowInstance{{ID: 1, WorkflowName: "soak-foreach"}}, Tasks: tt.tasks}
			for _, e := range tt.events {
				h.Events = append(h.Events, e...)
			}
			v.judgeForEach(h, map[string]int{"soak-foreach/each": 2})
			got := strings.Join(v.res.Anomalies, "\n")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("anomalies %q, want one with %q", got, tt.want)
			}
		})
	}
}

func TestJudgeChildren(t *testing.T) {
	instance := func(id int64, name string, state dao.WorkflowState) dao.WorkflowInstance {
		return dao.WorkflowInstance{ID: id, WorkflowName: name, State: state}
	}
	task := func(id int64, state dao.TaskState) dao.TaskInstance {
		return dao.TaskInstance{ID: id, WorkflowInstanceID: 1, Name: "child", Type: "workflow", State: state}
	}
	tests := []struct {
		name      string
		workflows []dao.WorkflowInstance
		tasks     []dao.TaskInstance
		parentOf  map[int64]int64
		want      string
	}{
		{name: "one child each", workflows: []dao.WorkflowInstance{instance(1, "soak-parent", dao.WorkflowSucceeded),
			instance(2, "soak-child", dao.WorkflowSucceeded)}, tasks: []dao.TaskInstance{task(5, dao.TaskSucceeded)},
			parentOf: map[int64]int64{2: 5}},
		{name: "failed with its child", workflows: []dao.WorkflowInstance{instance(1, "soak-parent", dao.WorkflowFailed),
			instance(2, "soak-child", dao.WorkflowFailed)}, tasks: []dao.TaskInstance{task(5, dao.TaskFailed)},
			parentOf: map[int64]int64{2: 5}},
		{name: "skipped, no child", workflows: []dao.WorkflowInstance{instance(1, "soak-parent", dao.WorkflowFailed)},
			tasks: []dao.TaskInstance{task(5, dao.TaskSkipped)}},
		{name: "two children", want: `task 5 "child" (workflow instance 1), succeeded, has 2 child instance(s) [2 3], want 1`,
			workflows: []dao.WorkflowInstance{instance(1, "soak-parent", dao.WorkflowSucceeded),
				instance(2, "soak-child", dao.WorkflowSucceeded), instance(3, "soak-child", dao.WorkflowSucceeded)},
			tasks: []dao.TaskInstance{task(5, dao.TaskSucceeded)}, parentOf: map[int64]int64{2: 5, 3: 5}},
		{name: "no child", want: "has 0 child instance(s) [], want 1",
			workflows: []dao.WorkflowInstance{instance(1, "soak-parent", dao.WorkflowFailed)}, tasks: []dao.TaskInstance{task(5, dao.TaskFailed)}},
		{name: "succeeded, its child failed", want: "ended succeeded, its child instance 2 failed",
			workflows: []dao.WorkflowInstance{instance(1, "soak-parent", dao.WorkflowSucceeded), instance(2, "soak-child", dao.WorkflowFailed)},
			tasks:     []dao.TaskInstance{task(5, dao.TaskSucceeded)}, parentOf: map[int64]int64{2: 5}},
		{name: "failed, its child succeeded", want: "ended failed, its child instance 2 succeeded",
			workflows: []dao.WorkflowInstance{instance(1, "soak-parent", dao.WorkflowFailed), instance(2, "soak-child", dao.WorkflowSucceeded)},
			tasks:     []dao.TaskInstance{task(5, dao.TaskFailed)}, parentOf: map[int64]int64{2: 5}},
		{name: "a child without a parent", want: "instance 3 of soak-child, which only a workflow task starts, has no parent task",
			workflows: []dao.WorkflowInstance{instance(1, "soak-parent", dao.WorkflowSucceeded),
				instance(2, "soak-child", dao.WorkflowSucceeded), instance(3, "soak-child", dao.WorkflowSucceeded)},
			tasks: []dao.TaskInstance{task(5, dao.TaskSucceeded)}, parentOf: map[int64]int64{2: 5}},
		{name: "a parent task gone", want: "instance 3 names parent task 6, which is not in the history",
			workflows: []dao.WorkflowInstance{instance(1, "soak-parent", dao.WorkflowSucceeded),
				instance(2, "soak-child", dao.WorkflowSucceeded), instance(3, "soak-child", dao.WorkflowSucceeded)},
			tasks: []dao.TaskInstance{task(5, dao.TaskSucceeded)}, parentOf: map[int64]int64{2: 5, 3: 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerdict()
			v.judgeChildren(&history.History{Workflows: tt.workflows, Tasks: tt.tasks}, tt.parentOf, map[string]bool{"soak-child": true})
			got := strings.Join(v.res.Anomalies, "\n")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("anomalies %q, want one with %q", got, tt.want)
			}
		})
	}
}

func TestJudgeKeys(t *testing.T) {
	at := func(s float64) *time.Time { x := sec(s); return &x }
	instance := func(id int64, key string, start, end float64) dao.WorkflowInstance {
		wf := dao.WorkflowInstance{ID: id, WorkflowName: "soak-thread", ConcurrencyKey: &key, State: dao.WorkflowSucceeded}
		if start >= 0 {
			wf.StartedAt = at(start)
		}
		if end >= 0 {
			wf.EndedAt = at(end)
		}
		return wf
	}
	tests := []struct {
		name      string
		workflows []dao.WorkflowInstance
		want      string
	}{
		{name: "one at a time, in order", workflows: []dao.WorkflowInstance{instance(1, "t0", 0, 1), instance(2, "t1", 0.5, 2),
			instance(3, "t0", 1, 2), instance(4, "t0", 2.5, 3), instance(5, "t1", -1, -1)}},
		{name: "overlapping", want: `concurrency key "t0" of soak-thread over its max of 1: 2 instances running as 3 started: 3 (+0.900s..+2.000s), 1 (+0.000s..+1.000s)`,
			workflows: []dao.WorkflowInstance{instance(1, "t0", 0, 1), instance(2, "t1", 0.5, 2), instance(3, "t0", 0.9, 2)}},
		{name: "one still running", want: "2 instances running as 3 started",
			workflows: []dao.WorkflowInstance{instance(1, "t0", 0, -1), instance(3, "t0", 1.5, 2)}},
		{name: "out of order", want: `concurrency key "t0" of soak-thread: instance 3 (+1.000s..+2.000s) started before instance 1 (+2.500s..+3.000s), submitted ahead of it`,
			workflows: []dao.WorkflowInstance{instance(1, "t0", 2.5, 3), instance(3, "t0", 1, 2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerdict()
			v.judgeKeys(&history.History{Workflows: tt.workflows}, map[string]int{"soak-thread": 1})
			got := strings.Join(v.res.Anomalies, "\n")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("anomalies %q, want one with %q", got, tt.want)
			}
		})
	}
}

// outsideNemesis is a Nemesis of a cluster the soak did not start, with fixed answers.
type outsideNemesis struct{ lost []Lost }

func (n outsideNemesis) Run(context.Context, *rand.Rand) {}
func (n outsideNemesis) Faults() map[string]int          { return map[string]int{"host-kill": 1} }
func (n outsideNemesis) Lost() []Lost                    { return n.lost }
func (n outsideNemesis) Failures() []string              { return []string{"host 2 did not start"} }
func (n outsideNemesis) Log(time.Time) string            { return "  +1.000s host-kill host 2\n" }

// TestJudgeOnAnOutsideCluster: on a cluster it did not start, the verdict judges the runs
// (pools here) as on its own, takes the lost workers and the fault log from the outside
// nemesis, and has no node exits nor freezes to judge.
func TestJudgeOnAnOutsideCluster(t *testing.T) {
	v := &verdict{cfg: Config{KillGrace: 500 * time.Millisecond}, outside: outsideNemesis{lost: []Lost{{Worker: "w2", At: sec(1)}}},
		res: &Result{Outside: true}, chaosAt: t0}
	p := "soak"
	var evs []history.Event
	for i := int64(1); i <= 3; i++ {
		evs = append(evs, runEvents(i, 1, "w1", 0, 2)...)
	}
	h := &history.History{Events: evs}
	for i := int64(1); i <= 3; i++ {
		h.Tasks = append(h.Tasks, dao.TaskInstance{ID: i, WorkflowInstanceID: 1, Pool: &p})
	}
	v.judgeOrphans(h)
	v.judgePools(h)
	if len(v.res.Anomalies) != 1 || !strings.Contains(v.res.Anomalies[0], "pool soak over its limit of 2") {
		t.Errorf("anomalies %q, want the pool over its limit", v.res.Anomalies)
	}
	if got := v.lost(); len(got) != 1 || got[0].Worker != "w2" {
		t.Errorf("lost %v, want the outside nemesis's w2", got)
	}
	if got := v.nemesisFailures(); len(got) != 1 {
		t.Errorf("failures %v, want the outside nemesis's one", got)
	}
	if d := v.detail(h); !strings.Contains(d, "host-kill host 2") {
		t.Errorf("detail lacks the outside nemesis's log:\n%s", d)
	}
	if s := v.res.String(); !strings.Contains(s, "not judged") || strings.Contains(s, "node exits: none") {
		t.Errorf("the report of an outside soak claims to judge node exits:\n%s", s)
	}
}
