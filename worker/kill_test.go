package worker_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
)

// waitTask waits until the named task of a workflow instance satisfies cond.
func (b *testBundle) waitTask(t *testing.T, wf int64, name, what string, cond func(dao.TaskInstance) bool) dao.TaskInstance {
	t.Helper()
	var got dao.TaskInstance
	waitUntil(t, "task "+name+" to get "+what, func() bool {
		tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range tasks {
			if ti.Name == name && cond(ti) {
				got = ti
				return true
			}
		}
		return false
	})
	return got
}

func TestKillOfARunningTaskStopsItWithoutARetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// notify says whether the kill wakes the worker; without it the worker's poll must
		// find the request.
		notify bool
	}{{"notified", true}, {"found by the poll", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.startWorker(t, "w1", time.Second)
			wf := b.submit(t, `
name: killme
tasks:
  - {name: long, type: shell, command: 'echo started; sleep 60', retries: 3}
  - {name: after, type: noop, depends-on: [long]}
`)
			running := b.waitTask(t, wf, "long", "running", func(ti dao.TaskInstance) bool { return ti.State == dao.TaskRunning })
			start := time.Now()
			if tc.notify {
				res, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, running.ID)
				if err != nil || res.State != dao.TaskRunning || res.WorkerID == nil || *res.WorkerID != "w1" {
					t.Fatalf("TaskKill = %+v, %v; want a request to w1", res, err)
				}
			} else if _, err := b.db.SQL().Exec(`UPDATE task_instance SET kill_requested = true WHERE id = $1`, running.ID); err != nil {
				t.Fatal(err)
			}
			killed := b.waitTask(t, wf, "long", "killed", func(ti dao.TaskInstance) bool { return ti.State.Terminal() })
			took := time.Since(start)
			if killed.State != dao.TaskKilled || killed.Retries != 0 {
				t.Fatalf("task = %s with %d retries, want killed without a retry", killed.State, killed.Retries)
			}
			// The shell executor gives the process group its kill grace (500 ms here).
			if took > 3*time.Second {
				t.Errorf("the kill took %v", took)
			}
			t.Logf("kill took %v", took)
			if got := b.attempts(t, killed.ID); strings.Join(got, ",") != "killed" {
				t.Errorf("attempts = %v, want one, killed", got)
			}
			got, tasks := b.waitDone(t, wf)
			if got.State != dao.WorkflowFailed || tasks["after"].State != dao.TaskSkipped {
				t.Errorf("workflow %s, after %s; want failed with the downstream skipped", got.State, tasks["after"].State)
			}
		})
	}
}

func TestRerunReopensTheWorkflowAndRecreatesTheSkippedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t, "w1", time.Second)
	marker := t.TempDir() + "/ran-once"
	wf := b.submit(t, `
name: rerun
tasks:
  - {name: first, type: shell, command: 'echo ok'}
  - {name: flaky, type: shell, depends-on: [first], command: 'if [ -e `+marker+` ]; then echo fixed; else touch `+marker+`; exit 3; fi'}
  - {name: after, type: shell, depends-on: [flaky], command: 'echo after'}
  - {name: last, type: noop, depends-on: [after]}
`)
	got, tasks := b.waitDone(t, wf)
	if got.State != dao.WorkflowFailed || tasks["after"].State != dao.TaskSkipped || tasks["last"].State != dao.TaskSkipped {
		t.Fatalf("first run: workflow %s, tasks %v", got.State, tasks)
	}
	flaky := tasks["flaky"]
	res, err := b.db.TaskRerunIfFailedOrKilled(b.ctx, wf, []int64{flaky.ID}, []string{"after", "last"}, nil)
	if err != nil || !res.Reopened || res.Deleted != 2 || len(res.Requeued) != 1 {
		t.Fatalf("TaskRerunIfFailedOrKilled = %+v, %v", res, err)
	}
	got, tasks = b.waitDone(t, wf)
	if got.State != dao.WorkflowSucceeded {
		t.Fatalf("after the rerun the workflow is %s (%v)", got.State, got.Error)
	}
	for name, want := range map[string]string{"first": "succeeded", "flaky": "failed,succeeded", "after": "succeeded", "last": "succeeded"} {
		if a := strings.Join(b.attempts(t, tasks[name].ID), ","); a != want {
			t.Errorf("%s attempts = %q, want %q", name, a, want)
		}
	}
	if tasks["first"].ID == 0 || *tasks["flaky"].Output != "fixed" || tasks["flaky"].Attempt != 2 {
		t.Errorf("flaky = %+v", tasks["flaky"])
	}
	// A second rerun of a task that succeeded is refused.
	if _, err := b.db.TaskRerunIfFailedOrKilled(b.ctx, wf, []int64{flaky.ID}, nil, nil); err == nil {
		t.Error("rerun of a succeeded task was accepted")
	}
}

// TestKillRequestedTaskIsNeverClaimed: a queued task with a kill request, as older code left
// one when it requeued a task an operator had asked to kill (dao now ends such a task killed),
// is never claimed, so no attempt starts only to be killed; the tasks beside it run.
func TestKillRequestedTaskIsNeverClaimed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.submit(t, "name: killed-later\ntasks:\n  - {name: long, type: shell, command: 'sleep 60'}\n  - {name: quick, type: shell, command: 'echo ok'}\n")
	queued := b.waitTask(t, wf, "long", "queued", func(ti dao.TaskInstance) bool { return ti.State == dao.TaskQueued })
	if _, err := b.db.SQL().Exec(`UPDATE task_instance SET kill_requested = true WHERE id = $1`, queued.ID); err != nil {
		t.Fatal(err)
	}
	b.startWorker(t, "w1", time.Second)
	// Both are roots, queued before the worker started: the claim that took quick passed
	// long over.
	b.waitTask(t, wf, "quick", "succeeded", func(ti dao.TaskInstance) bool { return ti.State == dao.TaskSucceeded })
	long := b.waitTask(t, wf, "long", "queued", func(ti dao.TaskInstance) bool { return true })
	if long.State != dao.TaskQueued || long.Attempt != 0 {
		t.Fatalf("long = %s at attempt %d, want queued and never claimed", long.State, long.Attempt)
	}
	if got := b.attempts(t, long.ID); len(got) != 0 {
		t.Errorf("attempts = %v, want none", got)
	}
}

// TestKillRequestSurvivesAHandBack: an attempt handed back at shutdown after an operator
// asked to kill its task (a request this worker had not acted on yet) ends the task killed:
// its master skips what follows, and no other worker starts a second attempt only to kill it.
func TestKillRequestSurvivesAHandBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// No poll before the shutdown, and the request below wakes no one: w1 never hears of it.
	w1 := worker.New(worker.Config{ID: "w1", Groups: []string{"default"}, Slots: 4, PollInterval: time.Hour,
		ShutdownTimeout: 100 * time.Millisecond, LogLimit: 1 << 20, Log: zerolog.Nop()}, b.db, openGate{},
		executor.Set{"shell": executor.Shell{Self: self, KillGrace: 500 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w1.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wf := b.submit(t, `
name: handed-back
tasks:
  - {name: long, type: shell, command: 'sleep 60', retries: 3}
  - {name: after, type: noop, depends-on: [long]}
`)
	running := b.waitTask(t, wf, "long", "running", func(ti dao.TaskInstance) bool { return ti.State == dao.TaskRunning })
	if _, err := b.db.SQL().Exec(`UPDATE task_instance SET kill_requested = true WHERE id = $1`, running.ID); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	b.startWorker(t, "w2", time.Second)
	got, tasks := b.waitDone(t, wf)
	if long := tasks["long"]; long.State != dao.TaskKilled || long.Retries != 0 {
		t.Errorf("long = %s with %d retries, want killed without a retry", long.State, long.Retries)
	}
	if got.State != dao.WorkflowFailed || tasks["after"].State != dao.TaskSkipped {
		t.Errorf("workflow %s, after %s; want failed with the downstream skipped", got.State, tasks["after"].State)
	}
	if a := b.attempts(t, tasks["long"].ID); strings.Join(a, ",") != "handed_back" {
		t.Errorf("attempts = %v, want the one handed back", a)
	}
}
