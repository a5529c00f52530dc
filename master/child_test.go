package master

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// define stores a workflow file without submitting it, as a file a workflow task names is.
func define(t *testing.T, db *dao.DB, file string) {
	t.Helper()
	spec, err := workflow.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	err = db.Tx(context.Background(), func(q *dao.Queries) error {
		_, err := q.DefinitionEnsure(context.Background(), spec.Name, raw, lifecycle.Facts(spec))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// finish records the end of a task claimed by a worker: succeeded with output, or failed.
func finish(t *testing.T, db *dao.DB, ti dao.TaskInstance, output string, ok bool) dao.Finished {
	t.Helper()
	res := dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded, Output: &output}
	if !ok {
		res = dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskFailed, Error: output}
	}
	done, err := lifecycle.Finish(context.Background(), db, []dao.Finish{{Token: ti.Token(), Result: res}})
	if err != nil || !done[0].Recorded {
		t.Fatalf("finish %s = %+v, %v", ti.Name, done, err)
	}
	return done[0]
}

// childOf waits for the workflow task name of wf to wait on its child, and returns the task
// and the child instance.
func childOf(t *testing.T, m *masterRun, db *dao.DB, wf int64, name string) (dao.TaskInstance, *dao.WorkflowInstance) {
	t.Helper()
	ctx := context.Background()
	var task dao.TaskInstance
	var child int64
	m.waitFor(t, "task "+name+" to wait on its child", func() bool {
		tasks, err := db.TaskListByWorkflow(ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range tasks {
			if ti.Name == name && ti.State == dao.TaskWaiting {
				children, err := db.TaskChildren(ctx, wf)
				if err != nil {
					t.Fatal(err)
				}
				task, child = ti, children[ti.ID]
				return child != 0
			}
		}
		return false
	})
	c, err := db.WorkflowGet(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	p, err := db.WorkflowParent(ctx, child)
	if err != nil || p.Workflow == nil || *p.Workflow != wf || p.Task == nil || *p.Task != task.ID {
		t.Fatalf("parent of child %d = %+v, %v; want task %d of instance %d", child, p, err, task.ID, wf)
	}
	return task, c
}

// childrenCount is how many instances tasks of wf started, counted from the children's side.
func childrenCount(t *testing.T, db *dao.DB, wf int64) int {
	t.Helper()
	var n int
	if err := db.SQL().GetContext(context.Background(), &n,
		`SELECT count(*) FROM workflow_instance WHERE parent_workflow_instance_id = $1`, wf); err != nil {
		t.Fatal(err)
	}
	return n
}

const digest = `
name: digest
params: {text: none}
tasks:
  - {name: review, type: noop}
  - name: publish
    type: workflow
    workflow: publish-digest
    params: {text: "{{ .upstream.review.output }}"}
    depends-on: [review]
  - {name: announce, type: noop, depends-on: [publish]}
`

// TestChildWorkflowEndToEnd: a workflow task starts its child, of several tasks, with params
// rendered from the upstream output, and waits on no worker; the child's end (a master's)
// ends the task with the output of the child's final task, which the next task sees, and the
// parent succeeds. The task and the child link to each other.
func TestChildWorkflowEndToEnd(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
	define(t, db, `
name: publish-digest
params: {text: "", channel: news}
tasks:
  - {name: format, type: noop}
  - {name: post, type: noop, depends-on: [format]}
  - {name: log, type: noop, depends-on: [format]}
`)
	id := submitFile(t, db, digest, nil)
	finish(t, db, claimOne(t, m, db, "review"), "the draft", true)
	publish, child := childOf(t, m, db, id, "publish")
	if publish.WorkerID != nil || publish.StartedAt == nil {
		t.Errorf("publish = %+v; want waiting on no worker, started", publish)
	}
	var params map[string]string
	if err := json.Unmarshal(child.Params, &params); err != nil || !maps.Equal(params, map[string]string{"text": "the draft"}) {
		t.Errorf("child params = %s (%v); want the rendered text", child.Params, err)
	}
	format := claimOne(t, m, db, "format")
	if format.WorkflowInstanceID != child.ID {
		t.Fatalf("format runs in instance %d, want the child %d", format.WorkflowInstanceID, child.ID)
	}
	var p workflow.TaskParams
	if err := json.Unmarshal(format.Params, &p); err != nil || p.Params["text"] != "the draft" || p.Params["channel"] != "news" {
		t.Errorf("the child's task sees params %v (%v); want its own defaults under the rendered ones", p.Params, err)
	}
	finish(t, db, format, "formatted", true)
	finish(t, db, claimOne(t, m, db, "post"), "posted", true)
	finish(t, db, claimOne(t, m, db, "log"), "logged", true)
	announce := claimOne(t, m, db, "announce")
	if err := json.Unmarshal(announce.Params, &p); err != nil || p.Upstream["publish"].Output != "logged" {
		t.Errorf("announce sees %v (%v); want the output of the child's final task, log", p.Upstream, err)
	}
	if got, _ := db.WorkflowGet(ctx, child.ID); got.State != dao.WorkflowSucceeded {
		t.Errorf("child is %s, want succeeded", got.State)
	}
	finish(t, db, announce, "", true)
	m.waitFor(t, "the parent to succeed", func() bool {
		got, err := db.WorkflowGet(ctx, id)
		return err == nil && got.State == dao.WorkflowSucceeded
	})
	if got := taskNamed(t, db, id, "publish"); got.State != dao.TaskSucceeded || got.Output == nil || *got.Output != "logged" {
		t.Errorf("publish = %+v; want succeeded with the child's output", got)
	}
	if n := childrenCount(t, db, id); n != 1 {
		t.Errorf("%d children, want 1", n)
	}
}

// TestChildWorkflowOfOneTask: a child of one task is not ended by its worker's statement
// (which ends other one-task instances) but by a master, which ends the parent task with it:
// succeeded with the task's output, or failed naming the child and its error, skipping what
// depends on it.
func TestChildWorkflowOfOneTask(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
	define(t, db, "name: publish-digest\nparams: {text: {}}\ntasks:\n  - {name: only, type: noop}\n")
	for _, ok := range []bool{true, false} {
		id := submitFile(t, db, digest, nil)
		finish(t, db, claimOne(t, m, db, "review"), "text", true)
		publish, child := childOf(t, m, db, id, "publish")
		if done := finish(t, db, claimOne(t, m, db, "only"), "boom", ok); done.Workflow != "" {
			t.Fatalf("the worker's statement ended the child %s; a child is a master's to end", done.Workflow)
		}
		m.waitFor(t, "the parent task to end", func() bool {
			return taskNamed(t, db, id, "publish").State.Terminal()
		})
		got := taskNamed(t, db, id, "publish")
		if ok {
			if got.State != dao.TaskSucceeded || got.Output == nil || *got.Output != "boom" {
				t.Errorf("publish = %+v; want succeeded with the child's output", got)
			}
			finish(t, db, claimOne(t, m, db, "announce"), "", true)
		} else {
			want := "child workflow instance " + strconv.FormatInt(child.ID, 10) + " (publish-digest) failed: tasks did not succeed: only failed"
			if got.State != dao.TaskFailed || got.Error == nil || *got.Error != want || got.ID != publish.ID {
				t.Errorf("publish = %s %v; want failed, %q", got.State, got.Error, want)
			}
		}
		want := map[bool]dao.WorkflowState{true: dao.WorkflowSucceeded, false: dao.WorkflowFailed}[ok]
		m.waitFor(t, "the parent to end", func() bool {
			got, err := db.WorkflowGet(ctx, id)
			return err == nil && got.State == want
		})
		if !ok {
			if a := taskNamed(t, db, id, "announce"); a.State != dao.TaskSkipped {
				t.Errorf("announce below a failed child is %s, want skipped", a.State)
			}
		}
	}
}

// chain stores middle, whose one task starts inner, whose one task waits in the queue of a
// group no worker serves, and submits top, whose task run starts middle; it returns top and
// its task once the three instances are running, each waiting on the next.
func chain(t *testing.T, m *masterRun, db *dao.DB) (top int64, run dao.TaskInstance, middle, inner *dao.WorkflowInstance) {
	t.Helper()
	define(t, db, "name: inner\ntasks:\n  - {name: hold, type: noop, group: nobody}\n")
	define(t, db, "name: middle\ntasks:\n  - {name: deeper, type: workflow, workflow: inner}\n")
	top = submitFile(t, db, "name: top\ntasks:\n  - {name: run, type: workflow, workflow: middle}\n"+
		"  - {name: after, type: noop, depends-on: [run]}\n", nil)
	run, middle = childOf(t, m, db, top, "run")
	_, inner = childOf(t, m, db, middle.ID, "deeper")
	m.waitFor(t, "the innermost task to be queued", func() bool {
		return taskNamed(t, db, inner.ID, "hold").State == dao.TaskQueued
	})
	return top, run, middle, inner
}

// TestChildWorkflowStopped: stopping the parent stops its children, and theirs, killing their
// tasks; killing the parent's workflow task does too, and a rerun of that task starts a new
// child; stopping a child fails its parent task, naming it.
func TestChildWorkflowStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		act  func(t *testing.T, db *dao.DB, top int64, run dao.TaskInstance, middle *dao.WorkflowInstance)
		// topState and runState are what the parent and its task come to; middleError the
		// child's error. {top}, {run} and {middle} stand for their ids.
		topState    dao.WorkflowState
		runState    string
		middleError string
	}{
		{"parent stopped", func(t *testing.T, db *dao.DB, top int64, _ dao.TaskInstance, _ *dao.WorkflowInstance) {
			if _, err := lifecycle.Stop(ctx, db, top, nil); err != nil {
				t.Fatal(err)
			}
		}, dao.WorkflowStopped, "killed:killed: the workflow was stopped", "stopped: its parent workflow instance {top} was stopped"},
		{"parent task killed", func(t *testing.T, db *dao.DB, _ int64, run dao.TaskInstance, _ *dao.WorkflowInstance) {
			if res, err := lifecycle.Kill(ctx, db, run.ID, nil); err != nil || res.State != dao.TaskKilled {
				t.Fatalf("kill = %+v, %v", res, err)
			}
		}, dao.WorkflowFailed, "killed:killed by an operator while it waited", "stopped: its parent task {run} was killed"},
		{"child stopped", func(t *testing.T, db *dao.DB, _ int64, _ dao.TaskInstance, middle *dao.WorkflowInstance) {
			if _, err := lifecycle.Stop(ctx, db, middle.ID, nil); err != nil {
				t.Fatal(err)
			}
		}, dao.WorkflowFailed, "failed:child workflow instance {middle} (middle) stopped: stopped by an operator", "stopped by an operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, _ := daotest.New(t)
			m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
			top, run, middle, inner := chain(t, m, db)
			tc.act(t, db, top, run, middle)
			m.waitFor(t, "the parent to end", func() bool {
				wf, err := db.WorkflowGet(ctx, top)
				return err == nil && wf.State == tc.topState
			})
			ids := strings.NewReplacer("{top}", strconv.FormatInt(top, 10), "{run}", strconv.FormatInt(run.ID, 10),
				"{middle}", strconv.FormatInt(middle.ID, 10))
			if got, want := states(t, db, top)["run"], ids.Replace(tc.runState); got != want {
				t.Errorf("run = %q, want %q", got, want)
			}
			for _, c := range []struct {
				id   int64
				task string
			}{{middle.ID, "deeper"}, {inner.ID, "hold"}} {
				wf, err := db.WorkflowGet(ctx, c.id)
				if err != nil || wf.State != dao.WorkflowStopped {
					t.Errorf("child %d = %+v, %v; want stopped", c.id, wf, err)
				}
				if s := taskNamed(t, db, c.id, c.task); s.State != dao.TaskKilled {
					t.Errorf("task %s of child %d is %s, want killed", c.task, c.id, s.State)
				}
			}
			if wf, _ := db.WorkflowGet(ctx, middle.ID); deref(wf.Error) != ids.Replace(tc.middleError) {
				t.Errorf("middle's error = %q, want %q", deref(wf.Error), ids.Replace(tc.middleError))
			}
			if wf, _ := db.WorkflowGet(ctx, inner.ID); deref(wf.Error) != ids.Replace("stopped: its parent workflow instance {middle} was stopped") {
				t.Errorf("inner's error = %q", deref(wf.Error))
			}
			if tc.topState != dao.WorkflowFailed {
				return
			}
			// A rerun of the failed or killed task starts a new child.
			var specs lifecycle.Specs
			if _, _, err := lifecycle.RerunTask(ctx, db, &specs, taskNamed(t, db, top, "run").ID, nil); err != nil {
				t.Fatal(err)
			}
			again, child := childOf(t, m, db, top, "run")
			if again.ID == run.ID || child.ID == middle.ID || childrenCount(t, db, top) != 2 {
				t.Errorf("rerun: task %d, child %d, %d children; want a new task with a new child", again.ID, child.ID, childrenCount(t, db, top))
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestChildWorkflowTimeouts: a parent's timeout stops its child; a child's timeout fails the
// parent task.
func TestChildWorkflowTimeouts(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
	define(t, db, "name: slow\ntasks:\n  - {name: hold, type: noop, group: nobody}\n")
	define(t, db, "name: timed\ntimeout: 500ms\ntasks:\n  - {name: hold, type: noop, group: nobody}\n")

	parent := submitFile(t, db, "name: impatient\ntimeout: 500ms\ntasks:\n  - {name: run, type: workflow, workflow: slow}\n", nil)
	_, child := childOf(t, m, db, parent, "run")
	m.waitFor(t, "the child to be stopped", func() bool {
		wf, err := db.WorkflowGet(ctx, child.ID)
		return err == nil && wf.State == dao.WorkflowStopped
	})
	if wf, _ := db.WorkflowGet(ctx, child.ID); deref(wf.Error) != fmt.Sprintf("stopped: its parent workflow instance %d timed out", parent) {
		t.Errorf("child's error = %q", deref(wf.Error))
	}
	if got := states(t, db, parent)["run"]; got != "killed:killed: workflow timeout 500ms exceeded" {
		t.Errorf("run = %q", got)
	}

	parent = submitFile(t, db, "name: patient\ntasks:\n  - {name: run, type: workflow, workflow: timed}\n", nil)
	_, child = childOf(t, m, db, parent, "run")
	m.waitFor(t, "the parent to fail", func() bool {
		wf, err := db.WorkflowGet(ctx, parent)
		return err == nil && wf.State == dao.WorkflowFailed
	})
	want := fmt.Sprintf("failed:child workflow instance %d (timed) failed: workflow timeout 500ms exceeded", child.ID)
	if got := states(t, db, parent)["run"]; got != want {
		t.Errorf("run = %q, want %q", got, want)
	}
}

// TestChildWorkflowRefused: a workflow task fails, without a child, when its workflow or
// version is not stored, its params do not render, or its child would nest too deep, as two
// workflows that start each other would.
func TestChildWorkflowRefused(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
	define(t, db, "name: there\ntasks:\n  - {name: a, type: noop}\n")
	id := submitFile(t, db, `
name: refused
tasks:
  - {name: missing, type: workflow, workflow: nowhere}
  - {name: old, type: workflow, workflow: there, version: 7}
  - {name: bad, type: workflow, workflow: there, params: {x: "{{ .params.nope }}"}}
`, nil)
	m.waitFor(t, "the instance to fail", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowFailed
	})
	got := states(t, db, id)
	for name, want := range map[string]string{
		"missing": `failed:task "missing": workflow "nowhere" is not stored: submit its file first`,
		"old":     `failed:task "old": workflow "there" has no version 7 stored`,
		"bad":     `failed:task "bad": params.x: params.x:1:10: executing "params.x" at <.params.nope>: map has no entry for key "nope"`,
	} {
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
	if n := childrenCount(t, db, id); n != 0 {
		t.Errorf("%d children, want none", n)
	}

	define(t, db, "name: ping\ntasks:\n  - {name: next, type: workflow, workflow: pong}\n")
	define(t, db, "name: pong\ntasks:\n  - {name: next, type: workflow, workflow: ping}\n")
	top := submitFile(t, db, "name: ping\ntasks:\n  - {name: next, type: workflow, workflow: pong}\n", nil)
	m.waitFor(t, "the top instance to fail", func() bool {
		wf, err := db.WorkflowGet(ctx, top)
		return err == nil && wf.State == dao.WorkflowFailed
	})
	levels, deepest := 0, top
	for {
		var next []int64
		if err := db.SQL().SelectContext(ctx, &next, `SELECT id FROM workflow_instance WHERE parent_workflow_instance_id = $1`, deepest); err != nil {
			t.Fatal(err)
		}
		if len(next) == 0 {
			break
		}
		levels, deepest = levels+1, next[0]
	}
	if levels != lifecycle.MaxNesting {
		t.Errorf("%d levels of children, want %d", levels, lifecycle.MaxNesting)
	}
	want := fmt.Sprintf(`failed:task "next": workflow instance %d is 10 levels of children below the instance submitted; a child may be at most 10`, deepest)
	if got := states(t, db, deepest)["next"]; got != want {
		t.Errorf("deepest task = %q, want %q", got, want)
	}
}
