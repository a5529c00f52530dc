package master

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// taskNamed returns the task instance name of wf.
func taskNamed(t *testing.T, db *dao.DB, wf int64, name string) dao.TaskInstance {
	t.Helper()
	tasks, err := db.TaskListByWorkflow(context.Background(), wf)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range tasks {
		if ti.Name == name {
			return ti
		}
	}
	t.Fatalf("workflow instance %d has no task %s", wf, name)
	return dao.TaskInstance{}
}

// TestWaitTasks: a wait task is created waiting, on no worker; a signal ends it once (a
// second is a conflict) and the master goes on with its output; past its timeout a master
// fails it, or ends it succeeded where on-timeout says so; a stop kills it; a rerun of a
// timed-out one waits again.
func TestWaitTasks(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
	file := `
name: approval
tasks:
  - {name: build, type: noop}
  - {name: review, type: wait, depends-on: [build], timeout: 1h}
  - {name: ship, type: noop, depends-on: [review]}
`
	id := submitFile(t, db, file, nil)
	succeed(t, db, claimOne(t, m, db, "build"))
	m.waitFor(t, "the review to wait", func() bool {
		tasks, _ := db.TaskListByWorkflow(ctx, id)
		return len(tasks) == 2
	})
	review := taskNamed(t, db, id, "review")
	if review.State != dao.TaskWaiting || review.StartedAt == nil || review.WorkerID != nil {
		t.Fatalf("review = %+v; want waiting, started, on no worker", review)
	}
	if got, err := db.TaskClaimQueued(ctx, "w1", []string{"default"}, 10); err != nil || len(got) != 0 {
		t.Fatalf("claim while the review waits = %+v, %v; want nothing", got, err)
	}
	res, err := lifecycle.Signal(ctx, db, review.ID, "looks good", false, nil)
	if err != nil || res.WorkflowInstanceID != id || res.State != dao.TaskSucceeded || res.PausedStep != nil {
		t.Fatalf("Signal = %+v, %v", res, err)
	}
	var conflict *dao.ConflictError
	if _, err := lifecycle.Signal(ctx, db, review.ID, "again", true, nil); !errors.As(err, &conflict) || conflict.State != "succeeded" {
		t.Fatalf("second Signal = %v; want a conflict with the succeeded task", err)
	}
	ship := claimOne(t, m, db, "ship")
	var p workflow.TaskParams
	if err := json.Unmarshal(ship.Params, &p); err != nil || p.Upstream["review"].Output != "looks good" {
		t.Errorf("ship's params %s lack the review's output (%v)", ship.Params, err)
	}
	succeed(t, db, ship)
	m.waitFor(t, "the instance to succeed", func() bool {
		got, err := db.WorkflowGet(ctx, id)
		return err == nil && got.State == dao.WorkflowSucceeded
	})

	// Past the timeout: failed by the master (its clock is the database's), the task below
	// skipped; with on-timeout: succeed, ended succeeded with an empty output.
	short := func(name, extra string) int64 {
		return submitFile(t, db, "name: "+name+"\ntasks:\n  - {name: review, type: wait, timeout: 200ms"+extra+"}\n"+
			"  - {name: ship, type: noop, depends-on: [review]}\n", nil)
	}
	failing, passing := short("fails", ""), short("passes", ", on-timeout: succeed")
	m.waitFor(t, "the failing wait to end the instance", func() bool {
		got, err := db.WorkflowGet(ctx, failing)
		return err == nil && got.State == dao.WorkflowFailed
	})
	r := taskNamed(t, db, failing, "review")
	if r.State != dao.TaskFailed || r.Error == nil || *r.Error != "no signal within its timeout of 200ms" {
		t.Errorf("timed-out review = %+v; want failed, saying so", r)
	}
	if s := taskNamed(t, db, failing, "ship"); s.State != dao.TaskSkipped {
		t.Errorf("ship below a timed-out review is %s, want skipped", s.State)
	}
	succeed(t, db, claimOne(t, m, db, "ship"))
	m.waitFor(t, "the passing wait's instance to succeed", func() bool {
		got, err := db.WorkflowGet(ctx, passing)
		return err == nil && got.State == dao.WorkflowSucceeded
	})
	if r := taskNamed(t, db, passing, "review"); r.State != dao.TaskSucceeded || r.Output == nil || *r.Output != "" {
		t.Errorf("on-timeout: succeed review = %+v; want succeeded, empty output", r)
	}

	// A rerun of the timed-out review creates it again, waiting anew, not queued.
	var specs lifecycle.Specs
	if _, _, err := lifecycle.RerunTask(ctx, db, &specs, r.ID, nil); err != nil {
		t.Fatal(err)
	}
	m.waitFor(t, "the review to wait again", func() bool {
		tasks, _ := db.TaskListByWorkflow(ctx, failing)
		for _, ti := range tasks {
			if ti.Name == "review" {
				return ti.State == dao.TaskWaiting && ti.ID != r.ID
			}
		}
		return false
	})

	// A stop kills a waiting task at once.
	stopped := short("stopped", "")
	if _, err := lifecycle.Stop(ctx, db, stopped, nil); err != nil {
		t.Fatal(err)
	}
	if r := taskNamed(t, db, stopped, "review"); r.State != dao.TaskKilled {
		t.Errorf("review of a stopped instance is %s, want killed", r.State)
	}
}

// TestWaitingInstancesHaveNoOwner: an instance whose only live task waits for a signal is
// released by the advance that made it wait, so no master holds it (nor advances it on a
// resync) for as long as the wait lasts; the signal wakes a master, which goes on with it. One
// with a workflow timeout stays owned: its owner enforces the timeout.
func TestWaitingInstancesHaveNoOwner(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
	file := func(name, timeout string) string {
		return "name: " + name + "\n" + timeout + `tasks:
  - {name: build, type: noop}
  - {name: review, type: wait, depends-on: [build], timeout: 1h}
  - {name: ship, type: noop, depends-on: [review]}
`
	}
	free, timed := submitFile(t, db, file("free", ""), nil), submitFile(t, db, file("timed", "timeout: 1h\n"), nil)
	succeed(t, db, claimOne(t, m, db, "build"))
	succeed(t, db, claimOne(t, m, db, "build"))
	m.waitFor(t, "both reviews to wait", func() bool {
		return len(tasksOf(t, db, free)) == 2 && len(tasksOf(t, db, timed)) == 2 && m.Owned() == 1
	})
	if got, err := db.WorkflowGet(ctx, free); err != nil || got.Owner != nil || got.State != dao.WorkflowRunning {
		t.Fatalf("waiting instance = %+v, %v; want running without an owner", got, err)
	}
	if got, err := db.WorkflowGet(ctx, timed); err != nil || got.Owner == nil || *got.Owner != "m1" {
		t.Fatalf("waiting instance with a timeout = %+v, %v; want owned by m1", got, err)
	}
	if _, err := lifecycle.Signal(ctx, db, taskNamed(t, db, free, "review").ID, "ok", false, nil); err != nil {
		t.Fatal(err)
	}
	succeed(t, db, claimOne(t, m, db, "ship"))
	m.waitFor(t, "the signalled instance to succeed", func() bool {
		got, err := db.WorkflowGet(ctx, free)
		return err == nil && got.State == dao.WorkflowSucceeded
	})
}

// tasksOf returns the task instances of wf.
func tasksOf(t *testing.T, db *dao.DB, wf int64) []dao.TaskInstance {
	t.Helper()
	tasks, err := db.TaskListByWorkflow(context.Background(), wf)
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}
