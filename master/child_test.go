package master

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
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
	define(t, db, "name: publish-digest\ntasks:\n  - {name: only, type: noop}\n")
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
