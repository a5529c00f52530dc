package master

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/workflow"
)

type policyBundle struct {
	db  *dao.DB
	ctx context.Context
	m   *masterRun
}

// setupPolicy starts a master "m1" on a fresh schema, stopped at the end of the test.
func setupPolicy(t *testing.T) *policyBundle {
	t.Helper()
	db, _ := daotest.New(t)
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
	return &policyBundle{db: db, ctx: context.Background(), m: m}
}

// submit stores a workflow file and creates an instance of it with the spec's priority, as
// `zksched submit` does.
func (b *policyBundle) submit(t *testing.T, file string) int64 {
	t.Helper()
	return submitFile(t, b.db, file, nil)
}

// waitFor waits until cond holds, looking again each time the master waits (masterRun.waitFor).
func (b *policyBundle) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	b.m.waitFor(t, what, cond)
}

func (b *policyBundle) state(t *testing.T, id int64) dao.WorkflowState {
	t.Helper()
	wf, err := b.db.WorkflowGet(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return wf.State
}

func (b *policyBundle) tasks(t *testing.T, id int64) map[string]dao.TaskInstance {
	t.Helper()
	ts, err := b.db.TaskListByWorkflow(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dao.TaskInstance{}
	for _, ti := range ts {
		out[ti.Name] = ti
	}
	return out
}

// TestWorkflowTimeout: past its timeout, a workflow instance fails, its running task is asked
// to stop (kill_requested) and its queued one is killed. The instance ends for its timeout,
// its tasks for their workflow's (end_reason), the running one too once its worker has killed
// it: it used to say an operator had.
func TestWorkflowTimeout(t *testing.T) {
	t.Parallel()
	b := setupPolicy(t)
	id := b.submit(t, `
name: slow
timeout: 1s
tasks:
  - {name: runs, type: shell, command: sleep 60}
  - {name: waits, type: shell, command: "true", group: nobody}
`)
	b.waitFor(t, "the tasks to be queued", func() bool { return len(b.tasks(t, id)) == 2 })
	claimed, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{workflow.DefaultGroup}, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	b.waitFor(t, "the workflow to time out", func() bool { return b.state(t, id) == dao.WorkflowFailed })
	wf, _ := b.db.WorkflowGet(b.ctx, id)
	if wf.Error == nil || *wf.Error != "workflow timeout 1s exceeded" {
		t.Errorf("error = %v", wf.Error)
	}
	if started := wf.StartedAt; started == nil || wf.EndedAt.Sub(*started) < time.Second {
		t.Errorf("ran from %v to %v; want at least the timeout", started, wf.EndedAt)
	}
	ts := b.tasks(t, id)
	if r := ts["runs"]; r.State != dao.TaskRunning || !r.KillRequested {
		t.Errorf("running task: %s kill_requested=%v; want its worker asked to kill it", r.State, r.KillRequested)
	}
	if w := ts["waits"]; w.State != dao.TaskKilled {
		t.Errorf("queued task: %s, want killed", w.State)
	}
	toks, err := b.db.TaskListKillRequested(b.ctx, "w1")
	if err != nil || len(toks) != 1 || toks[0].TaskID != claimed[0].ID {
		t.Errorf("kill requests of w1 = %v, %v", toks, err)
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, claimed[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeKilled,
		Next: dao.TaskKilled, Error: "killed on request"}); err != nil {
		t.Fatal(err)
	}
	if wf.EndReason == nil || *wf.EndReason != dao.EndTimeout {
		t.Errorf("workflow's end reason = %v, want %s", wf.EndReason, dao.EndTimeout)
	}
	for name, want := range map[string]string{"runs": "killed: the workflow timed out", "waits": "killed: workflow timeout 1s exceeded"} {
		got := b.tasks(t, id)[name]
		if got.State != dao.TaskKilled || got.EndReason == nil || *got.EndReason != dao.EndWorkflowTimeout || deref(got.Error) != want {
			t.Errorf("%s = %s, reason %v, error %q; want killed for its workflow's timeout, %q", name, got.State, got.EndReason, deref(got.Error), want)
		}
	}
}

// TestKillRequestedTaskFailedOverEndsTheWorkflow: a running task whose kill was requested (by
// an operator, or by its workflow's timeout) and whose worker is then lost ends killed at the
// failover instead of going back to the queue: the master, woken by it, skips what follows
// and the instance ends, and no worker can claim the task again.
func TestKillRequestedTaskFailedOverEndsTheWorkflow(t *testing.T) {
	t.Parallel()
	b := setupPolicy(t)
	for _, c := range []struct {
		name, file string
		// kill asks for the kill of the running task, directly or through its workflow.
		kill func(task int64) error
		// reason is the running task's end reason, workflowReason the instance's.
		reason, workflowReason dao.EndReason
	}{
		{"kill", "name: killed\ntasks:\n  - {name: runs, type: shell, command: sleep 60, group: kill}\n  - {name: after, type: noop, depends-on: [runs]}\n",
			func(task int64) error { _, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, task); return err }, dao.EndOperatorKill, ""},
		{"timeout", "name: timed-out\ntimeout: 1s\ntasks:\n  - {name: runs, type: shell, command: sleep 60, group: timeout}\n  - {name: after, type: noop, depends-on: [runs]}\n",
			func(int64) error { return nil }, dao.EndWorkflowTimeout, dao.EndTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := b.submit(t, c.file)
			worker := "w-" + c.name
			b.waitFor(t, "the task to be queued", func() bool { return len(b.tasks(t, id)) == 1 })
			claimed, err := b.db.TaskClaimQueued(b.ctx, worker, []string{c.name}, 1)
			if err != nil || len(claimed) != 1 {
				t.Fatalf("claim = %v, %v", claimed, err)
			}
			if err := c.kill(claimed[0].ID); err != nil {
				t.Fatal(err)
			}
			b.waitFor(t, "the kill request", func() bool { return b.tasks(t, id)["runs"].KillRequested })
			if err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
				_, err := q.TaskRequeueIfRunningOnWorker(b.ctx, worker)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			b.waitFor(t, "the workflow to end", func() bool { return b.state(t, id).Terminal() })
			ts := b.tasks(t, id)
			if got := b.state(t, id); got != dao.WorkflowFailed || ts["runs"].State != dao.TaskKilled {
				t.Errorf("workflow %s, runs %s; want failed with runs killed", got, ts["runs"].State)
			}
			if a, ok := ts["after"]; ok && (a.State != dao.TaskSkipped || a.EndReason == nil || *a.EndReason != dao.EndUpstream) {
				t.Errorf("after = %s (%v), want skipped for its upstream or never created", a.State, a.EndReason)
			}
			if r := ts["runs"].EndReason; r == nil || *r != c.reason {
				t.Errorf("runs' end reason = %v, want %s", r, c.reason)
			}
			wf, err := b.db.WorkflowGet(b.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got := deref((*string)(wf.EndReason)); got != string(c.workflowReason) {
				t.Errorf("workflow's end reason = %q, want %q", got, c.workflowReason)
			}
			if again, err := b.db.TaskClaimQueued(b.ctx, "w-next", []string{c.name}, 1); err != nil || len(again) != 0 {
				t.Errorf("claimed %d tasks after the failover, %v; want none", len(again), err)
			}
		})
	}
}

// TestWorkflowPriorityOrdersClaims: a workflow's priority is added to its tasks', so a worker
// claims the tasks of a higher-priority workflow first, whatever the order of submission.
func TestWorkflowPriorityOrdersClaims(t *testing.T) {
	t.Parallel()
	b := setupPolicy(t)
	low := b.submit(t, "name: low\ntasks:\n  - {name: a, type: noop, priority: 5}\n  - {name: b, type: noop, priority: 5}\n")
	high := b.submit(t, "name: high\npriority: 10\ntasks:\n  - {name: a, type: noop}\n")
	b.waitFor(t, "the tasks to be queued", func() bool { return len(b.tasks(t, low)) == 2 && len(b.tasks(t, high)) == 1 })
	got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{workflow.DefaultGroup}, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	if got[0].WorkflowInstanceID != high || got[0].Priority != 10 {
		t.Errorf("claimed task of instance %d with priority %d; want the one of %q (priority 10) before those of %q (5)",
			got[0].WorkflowInstanceID, got[0].Priority, "high", "low")
	}
}

// TestMaxActiveQueue: with max-active-instances 1 and when-full queue, instances start one at
// a time, in submission order, each once the one before has finished.
func TestMaxActiveQueue(t *testing.T) {
	t.Parallel()
	b := setupPolicy(t)
	file := "name: one-at-a-time\nmax-active-instances: 1\ntasks:\n  - {name: a, type: noop}\n"
	ids := []int64{b.submit(t, file), b.submit(t, file), b.submit(t, file)}
	for i, id := range ids {
		b.waitFor(t, "the instance to start", func() bool { return b.state(t, id) == dao.WorkflowRunning })
		for _, other := range ids[i+1:] {
			if s := b.state(t, other); s != dao.WorkflowSubmitted {
				t.Fatalf("instance %d is %s while %d runs; want it waiting (submitted)", other, s, id)
			}
		}
		b.waitFor(t, "its task", func() bool { return len(b.tasks(t, id)) == 1 })
		got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{workflow.DefaultGroup}, 10)
		if err != nil || len(got) != 1 {
			t.Fatalf("claim = %v, %v", got, err)
		}
		if err := b.db.TaskFinishIfRunning(b.ctx, got[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded,
			Next: dao.TaskSucceeded}); err != nil {
			t.Fatal(err)
		}
		b.waitFor(t, "the instance to finish", func() bool { return b.state(t, id) == dao.WorkflowSucceeded })
	}
}

// TestConcurrencyKeyQueue: instances with the same key run one at a time in submit order,
// each started by the wake-up of the end of the one before (the poll is an hour away), while
// another key's run beside them; stopping a running one lets the next start at once.
func TestConcurrencyKeyQueue(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: time.Hour})
	b := &policyBundle{db: db, ctx: ctx, m: m}
	file := "name: chat\nparams: {thread: {}}\nconcurrency: {key: '{{ .params.thread }}'}\ntasks:\n  - {name: a, type: noop}\n  - {name: b, type: noop, depends-on: [a]}\n"
	var t1 []int64
	for range 3 {
		t1 = append(t1, submitFile(t, db, file, json.RawMessage(`{"thread":"t1"}`)))
	}
	t2 := submitFile(t, db, file, json.RawMessage(`{"thread":"t2"}`))
	b.waitFor(t, "t2 to start beside t1", func() bool { return b.tasks(t, t2)["a"].State == dao.TaskQueued })
	// t2's first task runs on, for the rest of the test; t1's first succeeds.
	b.waitFor(t, "t1's first task", func() bool { return b.tasks(t, t1[0])["a"].State == dao.TaskQueued })
	got, err := db.TaskClaimQueued(ctx, "w2", []string{workflow.DefaultGroup}, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim = %+v, %v; want the first tasks of t1 and t2", got, err)
	}
	for _, ti := range got {
		if ti.WorkflowInstanceID == t1[0] {
			succeed(t, db, ti)
		}
	}
	// finishTasks runs the instance's tasks to the end, as a worker would.
	finishTasks := func(id int64) {
		names := []string{"a", "b"}
		if id == t1[0] {
			names = names[1:]
		}
		for _, name := range names {
			b.waitFor(t, "task "+name+" of "+fmt.Sprint(id), func() bool { return b.tasks(t, id)[name].State == dao.TaskQueued })
			got, err := db.TaskClaimQueued(ctx, "w1", []string{workflow.DefaultGroup}, 1)
			if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != id {
				t.Fatalf("claim = %+v, %v; want task %s of %d", got, err, name, id)
			}
			succeed(t, db, got[0])
		}
	}
	var lags []time.Duration
	for i, id := range t1 {
		b.waitFor(t, "the instance to start", func() bool { return b.state(t, id) == dao.WorkflowRunning })
		for _, other := range t1[i+1:] {
			if s := b.state(t, other); s != dao.WorkflowSubmitted {
				t.Fatalf("instance %d is %s while %d of its key runs; want it waiting", other, s, id)
			}
		}
		if i > 0 {
			prev, _ := db.WorkflowGet(ctx, t1[i-1])
			cur, _ := db.WorkflowGet(ctx, id)
			lags = append(lags, cur.StartedAt.Sub(*prev.EndedAt))
		}
		if i == len(t1)-1 {
			break
		}
		finishTasks(id)
		b.waitFor(t, "the instance to finish", func() bool { return b.state(t, id) == dao.WorkflowSucceeded })
	}
	t.Logf("from the end of an instance to the start of the next of its key: %v", lags)
	// A stop frees the slot as an end does.
	next := submitFile(t, db, file, json.RawMessage(`{"thread":"t1"}`))
	if _, err := db.WorkflowStopIfActive(ctx, t1[len(t1)-1], nil); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "the next to start after the stop", func() bool { return b.state(t, next) == dao.WorkflowRunning })
}
