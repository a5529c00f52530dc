package soak

import (
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
	tests := []struct {
		name    string
		task    dao.TaskInstance
		signals []signalSent
		want    string
	}{
		{name: "approved", task: gate(dao.TaskSucceeded, str("soak 3/0"), nil), signals: []signalSent{ok, again}},
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
			v.judgeSignals(&history.History{Tasks: []dao.TaskInstance{tt.task}})
			got := strings.Join(v.res.Anomalies, "\n")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("anomalies %q, want one with %q", got, tt.want)
			}
		})
	}
}
