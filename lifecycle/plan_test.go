package lifecycle

import (
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
			p := Decide(diamond(t), tc.states)
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
