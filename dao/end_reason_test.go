package dao_test

import (
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// reasonOf is r as text, "-" for none.
func reasonOf(r *dao.EndReason) string {
	if r == nil {
		return "-"
	}
	return string(*r)
}

// taskReasons returns each task of workflow instance wf as "state reason", by name.
func (b *testBundle) taskReasons(t *testing.T, wf int64) map[string]string {
	t.Helper()
	tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, x := range tasks {
		out[x.Name] = string(x.State) + " " + reasonOf(x.EndReason)
	}
	return out
}

// workflowReason returns workflow instance wf as "state reason".
func (b *testBundle) workflowReason(t *testing.T, wf int64) string {
	t.Helper()
	w, err := b.db.WorkflowGet(b.ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	return string(w.State) + " " + reasonOf(w.EndReason)
}

// TestEndReasonOfEachKill: each statement that kills a queued task, or stops or times out an
// instance, sets the end's reason in the same statement: an operator's kill, a stop, the
// workflow's timeout (its own reason, its tasks' that of its workflow's timeout).
func TestEndReasonOfEachKill(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		name         string
		end          func(wf, task int64) error
		wantWorkflow string
		wantTasks    string
	}{
		{"kill", func(_, task int64) error { _, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, task); return err },
			"running -", "killed operator-kill"},
		{"stop", func(wf, _ int64) error { _, err := b.db.WorkflowStopIfActive(b.ctx, wf, nil); return err },
			"stopped stop", "killed stop"},
		{"workflow timeout", func(wf, _ int64) error {
			return b.db.Tx(b.ctx, func(q *dao.Queries) error {
				_, err := q.WorkflowTimeOutIfOwned(b.ctx, wf, "m1", "ran past its timeout")
				return err
			})
		}, "failed timeout", "killed workflow-timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wf := b.queue(t, 1, "g-"+c.name)
			tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
			if err != nil || len(tasks) != 1 {
				t.Fatalf("tasks = %v, %v", tasks, err)
			}
			if err := c.end(wf, tasks[0].ID); err != nil {
				t.Fatal(err)
			}
			if got := b.workflowReason(t, wf); got != c.wantWorkflow {
				t.Errorf("workflow = %s, want %s", got, c.wantWorkflow)
			}
			if got := b.taskReasons(t, wf)["t0"]; got != c.wantTasks {
				t.Errorf("task = %s, want %s", got, c.wantTasks)
			}
		})
	}
}

// TestEndReasonOfAnAttemptsEnd: a last attempt that timed out ends its task for its timeout;
// a failure, a timeout with a retry left and a success end none; a success that raced a kill
// request is the task's own result, not the kill's.
func TestEndReasonOfAnAttemptsEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.queue(t, 4, "g")
	claimed, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 4)
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	byName := map[string]*dao.TaskInstance{}
	for i := range claimed {
		byName[claimed[i].Name] = &claimed[i]
	}
	if _, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, byName["t3"].ID); err != nil {
		t.Fatal(err)
	}
	out := "done"
	if _, err := b.db.TaskFinishManyIfRunning(b.ctx, []dao.Finish{
		{Token: byName["t0"].Token(), Result: dao.AttemptResult{Outcome: dao.OutcomeTimedOut, Next: dao.TaskFailed, Error: "timed out after 1s"}},
		{Token: byName["t1"].Token(), Result: dao.AttemptResult{Outcome: dao.OutcomeTimedOut, Next: dao.TaskQueued, Retry: true, Error: "timed out after 1s"}},
		{Token: byName["t2"].Token(), Result: dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskFailed, Error: "exit status 1"}},
		{Token: byName["t3"].Token(), Result: dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded, Output: &out}},
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"t0": "failed timeout", "t1": "queued -", "t2": "failed -", "t3": "succeeded -"}
	if got := b.taskReasons(t, wf); !mapsEqual(got, want) {
		t.Errorf("tasks = %v, want %v", got, want)
	}
}

// mapsEqual reports whether a and b hold the same entries.
func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestEndReasonOfAWaitSkipAndRerun: a wait ended by its timeout says so, one signalled does
// not; a task created skipped keeps the reason it was created with; a rerun clears the
// reasons of the task and of the instance it reopens.
func TestEndReasonOfAWaitSkipAndRerun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := daotest.Submit(t, b.db, "wf", map[string]any{"name": "wf"})
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{
		{WorkflowInstanceID: wf, Name: "timed", Type: "wait", State: dao.TaskWaiting, Group: "g"},
		{WorkflowInstanceID: wf, Name: "signalled", Type: "wait", State: dao.TaskWaiting, Group: "g"},
		{WorkflowInstanceID: wf, Name: "below", Type: "noop", State: dao.TaskSkipped, Group: "g", EndReason: dao.EndUpstream},
		{WorkflowInstanceID: wf, Name: "unless", Type: "noop", State: dao.TaskSkipped, Group: "g", EndReason: dao.EndCondition},
	}); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range tasks {
		ids[x.Name] = x.ID
	}
	msg, out := "no signal within its timeout of 1s", "ok"
	if _, err := b.db.TaskEndIfWaiting(b.ctx, ids["timed"], dao.TaskFailed, nil, &msg, dao.EndTimeout, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.TaskEndIfWaiting(b.ctx, ids["signalled"], dao.TaskSucceeded, &out, nil, "", nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"timed": "failed timeout", "signalled": "succeeded -", "below": "skipped upstream", "unless": "skipped condition"}
	if got := b.taskReasons(t, wf); !mapsEqual(got, want) {
		t.Fatalf("tasks = %v, want %v", got, want)
	}
	if err := b.db.WorkflowFinishIfOwned(b.ctx, wf, "m1", dao.WorkflowFailed, "tasks did not succeed: timed failed"); err != nil {
		t.Fatal(err)
	}
	// An instance ended by its tasks has no reason of its own.
	if got := b.workflowReason(t, wf); got != "failed -" {
		t.Fatalf("workflow = %s, want failed -", got)
	}
	if _, err := b.db.TaskRerunIfFailedOrKilled(b.ctx, wf, []int64{ids["timed"]}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.taskReasons(t, wf)["timed"]; got != "queued -" {
		t.Errorf("rerun task = %s, want queued -", got)
	}

	// A timed-out instance, rerun, is reopened without its reason.
	wf2 := b.queue(t, 1, "g2")
	if err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		_, err := q.WorkflowTimeOutIfOwned(b.ctx, wf2, "m1", "ran past its timeout")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	killed, err := b.db.TaskListByWorkflow(b.ctx, wf2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.TaskRerunIfFailedOrKilled(b.ctx, wf2, []int64{killed[0].ID}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.workflowReason(t, wf2); got != "running -" {
		t.Errorf("reopened workflow = %s, want running -", got)
	}
}

// TestEndReasonOfChildren: a child stopped with its parent takes the parent's reason (its
// workflow's timeout), as its tasks do; a workflow task whose child was stopped on its own
// ends child-failed.
func TestEndReasonOfChildren(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// start creates a parent instance owned by m1 whose task "run" waits on a new child,
	// which has a queued task "c".
	start := func(name string) (parent, task, child int64) {
		parent = b.queue(t, 0, "g-"+name)
		child = daotest.Submit(t, b.db, "child-"+name, map[string]any{"name": "child-" + name})
		if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
			t.Fatal(err)
		}
		if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{{WorkflowInstanceID: child, Name: "c", Type: "noop",
			State: dao.TaskQueued, Group: "g-" + name}}); err != nil {
			t.Fatal(err)
		}
		var err error
		task, err = b.db.TaskCreateWaitingOnChild(b.ctx, dao.NewTask{WorkflowInstanceID: parent, Name: "run",
			Type: "workflow", Group: "g-" + name}, child)
		if err != nil {
			t.Fatal(err)
		}
		return parent, task, child
	}

	parent, task, child := start("timeout")
	if err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		_, err := q.WorkflowTimeOutIfOwned(b.ctx, parent, "m1", "ran past its timeout")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.workflowReason(t, parent)+", "+b.taskReasons(t, parent)["run"], "failed timeout, killed workflow-timeout"; got != want {
		t.Errorf("parent = %s, want %s", got, want)
	}
	if got, want := b.workflowReason(t, child)+", "+b.taskReasons(t, child)["c"], "stopped workflow-timeout, killed workflow-timeout"; got != want {
		t.Errorf("child = %s, want %s", got, want)
	}

	parent, _, child = start("stop")
	if _, err := b.db.WorkflowStopIfActive(b.ctx, child, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := b.workflowReason(t, child), "stopped stop"; got != want {
		t.Errorf("child = %s, want %s", got, want)
	}
	if got, want := b.taskReasons(t, parent)["run"], "failed child-failed"; got != want {
		t.Errorf("parent task = %s, want %s", got, want)
	}

	_, task, child = start("kill")
	if err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		_, err := q.TaskKillIfQueuedOrRunning(b.ctx, task)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.workflowReason(t, child)+", "+b.taskReasons(t, child)["c"], "stopped operator-kill, killed operator-kill"; got != want {
		t.Errorf("child of a killed task = %s, want %s", got, want)
	}
}
