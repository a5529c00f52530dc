package lifecycle

import (
	"errors"
	"slices"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// diamond: a → (b, c) → d, and e on its own.
func diamond(t *testing.T) *workflow.Spec {
	t.Helper()
	s, err := workflow.Parse([]byte(`
name: diamond
tasks:
  - {name: a, type: noop}
  - {name: b, type: noop, depends-on: [a]}
  - {name: c, type: noop, depends-on: [a]}
  - {name: d, type: noop, depends-on: [b, c]}
  - {name: e, type: noop}
`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDecide(t *testing.T) {
	t.Parallel()
	const (
		q  = dao.TaskQueued
		r  = dao.TaskRunning
		ok = dao.TaskSucceeded
		f  = dao.TaskFailed
		k  = dao.TaskKilled
		sk = dao.TaskSkipped
	)
	for _, tc := range []struct {
		name      string
		states    map[string]dao.TaskState
		create    []string // name=state
		done      bool
		wantState dao.WorkflowState
	}{
		{name: "start queues the roots", states: nil, create: []string{"a=queued", "e=queued"}},
		{name: "nothing while a runs", states: map[string]dao.TaskState{"a": r, "e": q}},
		{name: "fan-out", states: map[string]dao.TaskState{"a": ok, "e": r}, create: []string{"b=queued", "c=queued"}},
		{name: "fan-in waits for both", states: map[string]dao.TaskState{"a": ok, "b": ok, "c": r, "e": ok}},
		{name: "fan-in", states: map[string]dao.TaskState{"a": ok, "b": ok, "c": ok, "e": ok}, create: []string{"d=queued"}},
		{name: "all succeeded", states: map[string]dao.TaskState{"a": ok, "b": ok, "c": ok, "d": ok, "e": ok}, done: true, wantState: dao.WorkflowSucceeded},
		{name: "failure skips downstream, other branch goes on", states: map[string]dao.TaskState{"a": ok, "b": f, "c": r, "e": r}},
		{name: "skip once the other upstream ends", states: map[string]dao.TaskState{"a": ok, "b": f, "c": ok, "e": r}, create: []string{"d=skipped"}},
		{name: "root failure skips all below in one step", states: map[string]dao.TaskState{"a": k, "e": ok},
			create: []string{"b=skipped", "c=skipped", "d=skipped"}, done: true, wantState: dao.WorkflowFailed},
		{name: "failed with skips is failed", states: map[string]dao.TaskState{"a": ok, "b": f, "c": ok, "d": sk, "e": ok}, done: true, wantState: dao.WorkflowFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := Decide(diamond(t), tc.states, nil, nil)
			var got []string
			for _, c := range p.Create {
				got = append(got, c.Task.Name+"="+string(c.State))
			}
			if !slices.Equal(got, tc.create) {
				t.Errorf("create = %v, want %v", got, tc.create)
			}
			if p.Done != tc.done || p.State != tc.wantState {
				t.Errorf("done, state = %v, %q; want %v, %q", p.Done, p.State, tc.done, tc.wantState)
			}
			if p.State == dao.WorkflowFailed && p.Error == "" {
				t.Error("a failed workflow has no error message")
			}
		})
	}
}

// TestDecideTriggersAndConditions: a trigger says what the dependencies must have come to, a
// when: condition then whether the task runs; a skip by either propagates as an upstream
// skip does, and a condition that cannot be decided fails its task, which fails the run. A
// skipped task carries its end reason (in parentheses here): its condition, or its upstream.
func TestDecideTriggersAndConditions(t *testing.T) {
	t.Parallel()
	spec, err := workflow.Parse([]byte(`
name: triggers
tasks:
  - {name: build, type: noop}
  - {name: deploy, type: noop, depends-on: [build], when: "{{ eq .params.env \"prod\" }}"}
  - {name: notify, type: noop, depends-on: [deploy]}
  - {name: alert, type: noop, depends-on: [build, deploy], trigger: any-failed}
  - {name: cleanup, type: noop, depends-on: [notify, alert], trigger: all-done}
`))
	if err != nil {
		t.Fatal(err)
	}
	const (
		ok = dao.TaskSucceeded
		f  = dao.TaskFailed
		k  = dao.TaskKilled
		sk = dao.TaskSkipped
	)
	// cond is the when: of each task by name: true, false, or "error".
	decide := func(states map[string]dao.TaskState, cond map[string]string) []string {
		p := Decide(spec, states, func(t *workflow.Task) (bool, error) {
			switch cond[t.Name] {
			case "false":
				return false, nil
			case "error":
				return false, errors.New("no such param")
			}
			return true, nil
		}, nil)
		var got []string
		for _, c := range p.Create {
			s := c.Task.Name + "=" + string(c.State) + c.Error
			if c.EndReason != "" {
				s += "(" + string(c.EndReason) + ")"
			}
			got = append(got, s)
		}
		if p.Done {
			got = append(got, "done:"+string(p.State))
		}
		return got
	}
	for _, tc := range []struct {
		name   string
		states map[string]dao.TaskState
		cond   map[string]string
		want   []string
	}{
		{"condition true", map[string]dao.TaskState{"build": ok}, nil, []string{"deploy=queued"}},
		{"condition false skips the task and what needs it to succeed; all-done runs",
			map[string]dao.TaskState{"build": ok}, map[string]string{"deploy": "false"},
			[]string{"deploy=skipped(condition)", "notify=skipped(upstream)", "alert=skipped(upstream)", "cleanup=queued"}},
		{"any-failed runs on a failure, all-done after it",
			map[string]dao.TaskState{"build": ok, "deploy": f}, nil,
			[]string{"notify=skipped(upstream)", "alert=queued"}},
		{"a kill counts as a failure", map[string]dao.TaskState{"build": k}, nil,
			[]string{"deploy=skipped(upstream)", "notify=skipped(upstream)", "alert=queued"}},
		{"all-done waits for every dependency", map[string]dao.TaskState{"build": ok, "deploy": f, "notify": sk}, nil,
			[]string{"alert=queued"}},
		{"all-done after a failure; the run still fails",
			map[string]dao.TaskState{"build": ok, "deploy": f, "notify": sk, "alert": ok, "cleanup": ok}, nil,
			[]string{"done:failed"}},
		{"any-failed skipped when nothing failed, the run succeeds",
			map[string]dao.TaskState{"build": ok, "deploy": ok, "notify": ok, "alert": sk, "cleanup": ok}, nil,
			[]string{"done:succeeded"}},
		{"a condition that cannot be decided fails the task",
			map[string]dao.TaskState{"build": ok}, map[string]string{"deploy": "error"},
			[]string{"deploy=failedno such param", "notify=skipped(upstream)", "alert=queued"}},
		{"no condition is asked of a task its trigger skips",
			map[string]dao.TaskState{"build": f}, map[string]string{"deploy": "error"},
			[]string{"deploy=skipped(upstream)", "notify=skipped(upstream)", "alert=queued"}},
	} {
		if got := decide(tc.states, tc.cond); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTrigger(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		trigger              string
		allSucceeded, failed bool
		want                 bool
	}{
		{"", true, false, true}, {"", false, false, false}, {"", false, true, false},
		{workflow.TriggerAllSucceeded, true, false, true}, {workflow.TriggerAllSucceeded, false, true, false},
		{workflow.TriggerAllDone, true, false, true}, {workflow.TriggerAllDone, false, false, true}, {workflow.TriggerAllDone, false, true, true},
		{workflow.TriggerAnyFailed, true, false, false}, {workflow.TriggerAnyFailed, false, false, false}, {workflow.TriggerAnyFailed, false, true, true},
	} {
		if got := Trigger(tc.trigger, tc.allSucceeded, tc.failed); got != tc.want {
			t.Errorf("Trigger(%q, %v, %v) = %v, want %v", tc.trigger, tc.allSucceeded, tc.failed, got, tc.want)
		}
	}
}
