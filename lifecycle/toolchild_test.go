package lifecycle_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
)

// TestToolChildStartsOncePerCall: a workflow tool's call starts one child, linked to the
// agent's task, whatever attempt runs it; a stale token starts nothing; a workflow not stored
// or params it refuses are errors the model is told.
func TestToolChildStartsOncePerCall(t *testing.T) {
	t.Parallel()
	b := setupPause(t, "")
	store(b.ctx, t, b.db, "name: report\nparams: {day: {type: string}}\ntasks:\n  - {name: only, type: noop}\n")
	wf := submit(b.ctx, t, b.db, b.spec)
	got, err := lifecycle.Claim(b.ctx, b.db, "w1", []string{"default"}, 1, true)
	if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != wf {
		t.Fatalf("claim = %+v, %v", got, err)
	}
	tok := got[0].Token()
	child, err := lifecycle.StartToolChild(b.ctx, b.db, tok, "zk-1-1-1", "report", 0, map[string]string{"day": "monday"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := lifecycle.StartToolChild(b.ctx, b.db, tok, "zk-1-1-1", "report", 0, map[string]string{"day": "monday"})
	if err != nil || again != child {
		t.Fatalf("the call's second start = %d, %v; want its child %d again", again, err, child)
	}
	c, err := b.db.WorkflowGet(b.ctx, child)
	if err != nil || c.WorkflowName != "report" {
		t.Fatalf("child = %+v, %v", c, err)
	}
	if ended, _, _, _, err := lifecycle.ToolChildResult(b.ctx, b.db, child); err != nil || ended {
		t.Errorf("a new child: ended %t, %v; want running", ended, err)
	}
	var refused *lifecycle.ToolChildError
	if _, err := lifecycle.StartToolChild(b.ctx, b.db, tok, "zk-1-1-2", "nothing", 0, nil); !errors.As(err, &refused) {
		t.Errorf("a workflow not stored: %v, want a ToolChildError", err)
	}
	var paramsErr *lifecycle.ParamsError
	if _, err := lifecycle.StartToolChild(b.ctx, b.db, tok, "zk-1-1-3", "report", 0, map[string]string{"dya": "x"}); !errors.As(err, &paramsErr) {
		t.Errorf("refused params: %v, want a ParamsError", err)
	}
	stale := tok
	stale.Attempt++
	if _, err := lifecycle.StartToolChild(b.ctx, b.db, stale, "zk-1-1-4", "report", 0, map[string]string{"day": "x"}); !errors.Is(err, dao.ErrTokenRefused) {
		t.Errorf("a stale token: %v, want ErrTokenRefused", err)
	}
	var n int
	if err := b.db.SQL().GetContext(b.ctx, &n, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'report'`); err != nil || n != 1 {
		t.Errorf("%d instances of report, %v; want the one child", n, err)
	}
}

// TestToolChildEndResumesTheAgent: an agent paused for its workflow tool's child (tool-child:
// CALL) holds no worker and takes no signal; the child's end queues it again, as does the
// look that catches a child that ended while the agent was still pausing, and the tool's
// timeout, which leaves a checkpoint of the step.
func TestToolChildEndResumesTheAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []string{"child ends after the pause", "child ends before the pause", "timeout"} {
		b := setupPause(t, "")
		store(b.ctx, t, b.db, "name: report\ntasks:\n  - {name: only, type: wait}\n")
		wf := submit(b.ctx, t, b.db, b.spec)
		got, err := lifecycle.Claim(b.ctx, b.db, "w1", []string{"default"}, 1, true)
		if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != wf {
			t.Fatalf("%s: claim = %+v, %v", tc, got, err)
		}
		task := got[0]
		call := fmt.Sprintf("zk-%d-1-1", task.ID)
		child, err := lifecycle.StartToolChild(b.ctx, b.db, task.Token(), call, "report", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc == "child ends before the pause" {
			if _, err := lifecycle.Stop(b.ctx, b.db, child, nil); err != nil {
				t.Fatal(err)
			}
		}
		waitFor := time.Hour
		if tc == "timeout" {
			waitFor = time.Millisecond
		}
		res := dao.AttemptResult{Outcome: dao.OutcomePaused, PausedStep: "tool-child:" + call, WaitFor: waitFor}
		res.Next, res.Retry = lifecycle.Next(&task, res.Outcome)
		if _, err := lifecycle.Finish(b.ctx, b.db, []dao.Finish{{Token: task.Token(), Result: res}}); err != nil {
			t.Fatal(err)
		}
		if ti := b.get(t, task.ID); ti.State != dao.TaskWaiting {
			t.Fatalf("%s: task %+v; want waiting", tc, ti)
		}
		var conflict *dao.ConflictError
		if _, err := lifecycle.Signal(b.ctx, b.db, task.ID, "done", false, nil); !errors.As(err, &conflict) {
			t.Errorf("%s: a signal to an agent waiting for its tool's child: %v; want a conflict", tc, err)
		}
		switch tc {
		case "child ends after the pause":
			if n, err := b.db.TaskResumeIfToolChildEnded(b.ctx, 0, 100); err != nil || n != 0 {
				t.Errorf("%s: the look with the child running resumed %d, %v; want none", tc, n, err)
			}
			if _, err := lifecycle.Stop(b.ctx, b.db, child, nil); err != nil {
				t.Fatal(err)
			}
		case "child ends before the pause":
			if ti := b.get(t, task.ID); ti.State != dao.TaskWaiting {
				t.Fatalf("%s: task %+v; want waiting until the look", tc, ti)
			}
			if n, err := b.db.TaskResumeIfToolChildEnded(b.ctx, task.ID, 1); err != nil || n != 1 {
				t.Errorf("%s: the look resumed %d, %v; want the agent", tc, n, err)
			}
		case "timeout":
			time.Sleep(20 * time.Millisecond)
			if n, err := lifecycle.EndWaitsPastTimeout(b.ctx, b.db, 100); err != nil || n != 1 {
				t.Errorf("%s: EndWaitsPastTimeout = %d, %v; want the agent", tc, n, err)
			}
		}
		ti := b.get(t, task.ID)
		if ti.State != dao.TaskQueued || ti.PausedStep != nil || ti.Error != nil || ti.EndedAt != nil {
			t.Errorf("%s: task %+v; want queued again", tc, ti)
		}
		_, timedOut := b.checkpoints(t, task.ID)["tool-child:"+call]
		if timedOut != (tc == "timeout") {
			t.Errorf("%s: checkpoint of the step %t; want it only for the timeout", tc, timedOut)
		}
		if n, err := b.db.TaskResumeIfToolChildEnded(b.ctx, 0, 100); err != nil || n != 0 {
			t.Errorf("%s: a second look resumed %d, %v; want none", tc, n, err)
		}
	}
}

// TestToolChildrenStopWithTheirAgent: killing an agent, paused for its workflow tool's child
// or running, or stopping the agent's workflow instance, stops the children its calls
// started that still run; a child that ended stays as it ended.
func TestToolChildrenStopWithTheirAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []string{"kill the paused agent", "kill the running agent", "stop its workflow"} {
		b := setupPause(t, "")
		store(b.ctx, t, b.db, "name: report\ntasks:\n  - {name: only, type: wait}\n")
		wf := submit(b.ctx, t, b.db, b.spec)
		got, err := lifecycle.Claim(b.ctx, b.db, "w1", []string{"default"}, 1, true)
		if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != wf {
			t.Fatalf("%s: claim = %+v, %v", tc, got, err)
		}
		task := got[0]
		done, err := lifecycle.StartToolChild(b.ctx, b.db, task.Token(), fmt.Sprintf("zk-%d-1-1", task.ID), "report", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lifecycle.Stop(b.ctx, b.db, done, nil); err != nil {
			t.Fatal(err)
		}
		before, err := b.db.WorkflowGet(b.ctx, done)
		if err != nil {
			t.Fatal(err)
		}
		call := fmt.Sprintf("zk-%d-2-1", task.ID)
		child, err := lifecycle.StartToolChild(b.ctx, b.db, task.Token(), call, "report", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc == "kill the paused agent" || tc == "stop its workflow" {
			res := dao.AttemptResult{Outcome: dao.OutcomePaused, PausedStep: "tool-child:" + call}
			res.Next, res.Retry = lifecycle.Next(&task, res.Outcome)
			if _, err := lifecycle.Finish(b.ctx, b.db, []dao.Finish{{Token: task.Token(), Result: res}}); err != nil {
				t.Fatal(err)
			}
		}
		if tc == "stop its workflow" {
			_, err = lifecycle.Stop(b.ctx, b.db, wf, nil)
		} else {
			_, err = lifecycle.Kill(b.ctx, b.db, task.ID, nil)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc, err)
		}
		c, err := b.db.WorkflowGet(b.ctx, child)
		if err != nil || c.State != dao.WorkflowStopped || c.Error == nil {
			t.Errorf("%s: the running child %+v, %v; want stopped with a reason", tc, c, err)
		}
		if d, err := b.db.WorkflowGet(b.ctx, done); err != nil || d.State != before.State || !d.EndedAt.Equal(*before.EndedAt) || deref(d.Error) != deref(before.Error) {
			t.Errorf("%s: the ended child %+v, %v; want it as it ended, %+v", tc, d, err, before)
		}
	}
}
