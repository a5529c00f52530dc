package master

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// states returns the state of each task instance of wf by name, with its error after a ':'.
func states(t *testing.T, db *dao.DB, wf int64) map[string]string {
	t.Helper()
	tasks, err := db.TaskListByWorkflow(context.Background(), wf)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, ti := range tasks {
		out[ti.Name] = string(ti.State)
		if ti.Error != nil {
			out[ti.Name] += ":" + *ti.Error
		}
	}
	return out
}

// claimOne claims the queued task name of the default group, as a worker would.
func claimOne(t *testing.T, m *masterRun, db *dao.DB, name string) dao.TaskInstance {
	t.Helper()
	var got dao.TaskInstance
	m.waitFor(t, "task "+name+" to be queued", func() bool {
		ts, err := db.TaskClaimQueued(context.Background(), "w1", []string{workflow.DefaultGroup}, 1)
		if err != nil || len(ts) == 0 {
			return false
		}
		if ts[0].Name != name {
			t.Fatalf("claimed %s, want %s", ts[0].Name, name)
		}
		got = ts[0]
		return true
	})
	return got
}

// release deploys only with env=prod, alerts on a failure and cleans up whatever happened.
const release = `
name: release
params: {env: dev}
tasks:
  - {name: build, type: noop}
  - {name: deploy, type: noop, depends-on: [build], when: '{{ eq .params.env "prod" }}'}
  - {name: notify, type: noop, depends-on: [deploy]}
  - {name: alert, type: noop, depends-on: [build, deploy], trigger: any-failed}
  - {name: cleanup, type: noop, depends-on: [notify, alert], trigger: all-done}
`

// TestConditionsAndTriggersEndToEnd: a master creates each task as its trigger and its when:
// condition say — skipped below a false condition, the all-done clean-up run all the same,
// the any-failed alert skipped when nothing failed — and the instance succeeds.
func TestConditionsAndTriggersEndToEnd(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
	id := submitFile(t, db, release, nil)
	succeed(t, db, claimOne(t, m, db, "build"))
	cleanup := claimOne(t, m, db, "cleanup")
	want := map[string]string{"build": "succeeded", "deploy": "skipped", "notify": "skipped", "alert": "skipped", "cleanup": "running"}
	if got := states(t, db, id); !maps.Equal(got, want) {
		t.Fatalf("tasks = %v, want %v", got, want)
	}
	succeed(t, db, cleanup)
	m.waitFor(t, "the instance to succeed", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowSucceeded
	})

	// With env=prod the deploy runs; its failure runs the alert, skips notify, and the
	// clean-up runs after both; the instance fails, naming the deploy only.
	id = submitFile(t, db, release, json.RawMessage(`{"env":"prod"}`))
	succeed(t, db, claimOne(t, m, db, "build"))
	deploy := claimOne(t, m, db, "deploy")
	if err := db.TaskFinishIfRunning(ctx, deploy.Token(), dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskFailed}); err != nil {
		t.Fatal(err)
	}
	succeed(t, db, claimOne(t, m, db, "alert"))
	succeed(t, db, claimOne(t, m, db, "cleanup"))
	m.waitFor(t, "the instance to fail", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowFailed
	})
	wf, _ := db.WorkflowGet(ctx, id)
	if wf.Error == nil || *wf.Error != "tasks did not succeed: deploy failed" {
		t.Errorf("error = %v, want the deploy named alone", wf.Error)
	}
}

// TestConditionThatCannotBeDecided: a condition that does not render true or false fails its
// task at creation, with the reason, and skips what needs it; a condition on a root is
// decided by a master (the instance waits for one, submitted), over the run's params. A
// rerun of the failed task creates it again and decides anew.
func TestConditionThatCannotBeDecided(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	id := submitFile(t, db, `
name: undecided
params: {go: {}}
tasks:
  - {name: root, type: noop, when: '{{ .params.go }}'}
  - {name: next, type: noop, depends-on: [root]}
`, json.RawMessage(`{"go":"maybe"}`))
	if wf, err := db.WorkflowGet(ctx, id); err != nil || wf.State != dao.WorkflowSubmitted {
		t.Fatalf("instance = %+v, %v; want submitted, its root left to a master", wf, err)
	}
	if got := states(t, db, id); len(got) != 0 {
		t.Fatalf("tasks at submit = %v, want none", got)
	}
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
	m.waitFor(t, "the instance to fail", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowFailed
	})
	got := states(t, db, id)
	if !strings.HasPrefix(got["root"], `failed:task "root": when rendered "maybe"; it must render true or false`) || got["next"] != "skipped" {
		t.Fatalf("tasks = %v, want root failed with the reason, next skipped", got)
	}
	var rootID int64
	tasks, _ := db.TaskListByWorkflow(ctx, id)
	for _, ti := range tasks {
		if ti.Name == "root" {
			rootID = ti.ID
			if ti.EndedAt == nil || ti.Attempt != 0 {
				t.Errorf("root ended_at %v attempt %d; want ended, never attempted", ti.EndedAt, ti.Attempt)
			}
		}
	}
	var specs lifecycle.Specs
	res, _, err := lifecycle.RerunTask(ctx, db, &specs, rootID, nil)
	if err != nil || !res.Reopened || len(res.Requeued) != 0 || res.Deleted != 2 {
		t.Fatalf("rerun = %+v, %v; want the instance reopened, root and next deleted, nothing requeued", res, err)
	}
	m.waitFor(t, "the instance to fail again", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowFailed
	})
	tasks, _ = db.TaskListByWorkflow(ctx, id)
	for _, ti := range tasks {
		if ti.Name == "root" && (ti.ID == rootID || ti.State != dao.TaskFailed) {
			t.Errorf("root after the rerun = %+v; want a new instance, failed again", ti)
		}
	}
}
