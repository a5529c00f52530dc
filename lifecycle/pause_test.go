package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// pauseBundle is a schema with an agent workflow whose second step waits.
type pauseBundle struct {
	db   *dao.DB
	ctx  context.Context
	spec *workflow.Spec
}

func setupPause(t *testing.T, wait string) *pauseBundle {
	t.Helper()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	spec := parse(t, `
name: paused
tasks:
  - name: agent
    type: agent
    provider: p
    steps:
      - {name: draft, prompt: "draft it"}
      - {name: approve, wait: true`+wait+`}
      - {name: polish, prompt: "polish {{ .steps.draft }} as {{ .steps.approve }} says"}
`)
	return &pauseBundle{db: db, ctx: ctx, spec: spec}
}

// pause submits an instance, claims its agent as worker w1 and ends the attempt paused at
// the wait step, its first step checkpointed as the worker does; it returns the task as
// claimed.
func (b *pauseBundle) pause(t *testing.T, waitFor time.Duration) dao.TaskInstance {
	t.Helper()
	wf := submit(b.ctx, t, b.db, b.spec)
	got, err := lifecycle.Claim(b.ctx, b.db, "w1", []string{"default"}, 1, true)
	if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != wf {
		t.Fatalf("claim = %+v, %v; want the agent of instance %d", got, err, wf)
	}
	task := got[0]
	if err := b.db.CheckpointSaveIfRunning(b.ctx, task.Token(), "draft", "the draft", nil); err != nil {
		t.Fatal(err)
	}
	res := dao.AttemptResult{Outcome: dao.OutcomePaused, PausedStep: "approve", WaitFor: waitFor}
	res.Next, res.Retry = lifecycle.Next(&task, res.Outcome)
	done, err := lifecycle.Finish(b.ctx, b.db, []dao.Finish{{Token: task.Token(), Result: res}})
	if err != nil || !done[0].Recorded || done[0].Workflow != "" {
		t.Fatalf("pause = %+v, %v; want recorded, the instance going on", done, err)
	}
	return task
}

func (b *pauseBundle) get(t *testing.T, id int64) *dao.TaskInstance {
	t.Helper()
	ti, err := b.db.TaskGet(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}

func (b *pauseBundle) checkpoints(t *testing.T, id int64) map[string]dao.Checkpoint {
	t.Helper()
	cps, err := b.db.CheckpointListForTask(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dao.Checkpoint{}
	for _, cp := range cps {
		out[cp.Step] = cp
	}
	return out
}

// TestPausedAgentWaitsAndResumes: an agent's attempt that ends paused leaves its task
// waiting at the step, on no slot and with no retry counted, and refuses its token after;
// an approving signal stores the step's output as its checkpoint and queues the task, which
// a worker claims as a new attempt; a second signal is a conflict.
func TestPausedAgentWaitsAndResumes(t *testing.T) {
	t.Parallel()
	b := setupPause(t, "")
	task := b.pause(t, 0)

	got := b.get(t, task.ID)
	if got.State != dao.TaskWaiting || got.PausedStep == nil || *got.PausedStep != "approve" || got.Retries != 0 ||
		got.EndedAt != nil || got.Error != nil {
		t.Fatalf("paused task = %+v; want waiting at approve, no retry counted, not ended", got)
	}
	var waitUntil *time.Time
	if err := b.db.SQL().GetContext(b.ctx, &waitUntil, `SELECT wait_until FROM task_instance WHERE id = $1`, task.ID); err != nil || waitUntil != nil {
		t.Errorf("wait_until = %v, %v; want none for a step without a timeout", waitUntil, err)
	}
	atts, err := b.db.AttemptList(b.ctx, task.ID)
	if err != nil || len(atts) != 1 || atts[0].Outcome == nil || *atts[0].Outcome != dao.OutcomePaused || atts[0].EndedAt == nil {
		t.Fatalf("attempts = %+v, %v; want one, ended paused", atts, err)
	}
	if claimed, err := lifecycle.Claim(b.ctx, b.db, "w2", []string{"default"}, 10, true); err != nil || len(claimed) != 0 {
		t.Fatalf("claim while it waits = %+v, %v; want nothing", claimed, err)
	}

	// The paused attempt's token is spent: its writes are refused and change nothing.
	out := "late"
	if err := b.db.CheckpointSaveIfRunning(b.ctx, task.Token(), "polish", "late", nil); !errors.Is(err, dao.ErrTokenRefused) {
		t.Errorf("checkpoint after the pause: %v; want ErrTokenRefused", err)
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, task.Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded,
		Next: dao.TaskSucceeded, Output: &out}); !errors.Is(err, dao.ErrTokenRefused) {
		t.Errorf("finish after the pause: %v; want ErrTokenRefused", err)
	}
	if after := b.get(t, task.ID); after.State != dao.TaskWaiting || after.Output != nil || len(b.checkpoints(t, task.ID)) != 1 {
		t.Fatalf("after the refused writes: %+v, checkpoints %v; want it as it was", after, b.checkpoints(t, task.ID))
	}

	res, err := lifecycle.Signal(b.ctx, b.db, task.ID, "shorter, please", false, nil)
	if err != nil || res.State != dao.TaskQueued || res.PausedStep == nil || *res.PausedStep != "approve" ||
		res.WorkflowInstanceID != task.WorkflowInstanceID {
		t.Fatalf("Signal = %+v, %v; want the agent queued again from approve", res, err)
	}
	var conflict *dao.ConflictError
	if _, err := lifecycle.Signal(b.ctx, b.db, task.ID, "again", true, nil); !errors.As(err, &conflict) || conflict.State != "queued" {
		t.Fatalf("second Signal = %v; want a conflict with the queued task", err)
	}
	cps := b.checkpoints(t, task.ID)
	if cp, ok := cps["approve"]; !ok || cp.Output != "shorter, please" || cp.Attempt != task.Attempt || cps["draft"].Output != "the draft" {
		t.Fatalf("checkpoints = %+v; want the draft and the signal's output as approve's", cps)
	}
	queued := b.get(t, task.ID)
	if queued.State != dao.TaskQueued || queued.PausedStep != nil || queued.EndedAt != nil || queued.Output != nil {
		t.Fatalf("resumed task = %+v; want queued, no longer paused", queued)
	}
	again, err := lifecycle.Claim(b.ctx, b.db, "w2", []string{"default"}, 1, true)
	if err != nil || len(again) != 1 || again[0].ID != task.ID || again[0].Attempt != task.Attempt+1 {
		t.Fatalf("claim after the signal = %+v, %v; want the agent, attempt %d", again, err, task.Attempt+1)
	}
}

// TestPausedAgentRejectedOrKilled: a rejecting signal fails a paused agent, the error naming
// its step, and the instance goes on as for any failed task; a kill or a stop of a paused
// agent kills it at once, and it is no longer paused.
func TestPausedAgentRejectedOrKilled(t *testing.T) {
	t.Parallel()
	b := setupPause(t, "")

	rejected := b.pause(t, 0)
	res, err := lifecycle.Signal(b.ctx, b.db, rejected.ID, "not this one", true, nil)
	if err != nil || res.State != dao.TaskFailed {
		t.Fatalf("reject = %+v, %v; want it failed", res, err)
	}
	got := b.get(t, rejected.ID)
	if got.State != dao.TaskFailed || deref(got.Error) != "step approve: failed by a signal: not this one" || got.PausedStep != nil || got.EndedAt == nil {
		t.Fatalf("rejected task = %+v (error %q); want failed, its error naming the step", got, deref(got.Error))
	}
	if _, ok := b.checkpoints(t, rejected.ID)["approve"]; ok {
		t.Error("a rejection stored a checkpoint of the wait step")
	}

	killed := b.pause(t, 0)
	if k, err := lifecycle.Kill(b.ctx, b.db, killed.ID, nil); err != nil || k.State != dao.TaskKilled {
		t.Fatalf("kill = %+v, %v; want killed at once", k, err)
	}
	if got := b.get(t, killed.ID); got.State != dao.TaskKilled || got.PausedStep != nil || deref(got.Error) != "killed by an operator while it waited" {
		t.Fatalf("killed task = %+v (error %q); want killed, no longer paused", got, deref(got.Error))
	}
	var conflict *dao.ConflictError
	if _, err := lifecycle.Signal(b.ctx, b.db, killed.ID, "too late", false, nil); !errors.As(err, &conflict) || conflict.State != "killed" {
		t.Fatalf("signal of the killed agent = %v; want a conflict", err)
	}

	stopped := b.pause(t, 0)
	if _, err := lifecycle.Stop(b.ctx, b.db, stopped.WorkflowInstanceID, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.get(t, stopped.ID); got.State != dao.TaskKilled || got.PausedStep != nil {
		t.Fatalf("task of the stopped instance = %+v; want killed, no longer paused", got)
	}

	// A kill requested while the attempt still ran ends it killed where it would pause.
	wf := submit(b.ctx, t, b.db, b.spec)
	claimed, err := lifecycle.Claim(b.ctx, b.db, "w1", []string{"default"}, 1, true)
	if err != nil || len(claimed) != 1 || claimed[0].WorkflowInstanceID != wf {
		t.Fatalf("claim = %+v, %v", claimed, err)
	}
	if k, err := lifecycle.Kill(b.ctx, b.db, claimed[0].ID, nil); err != nil || k.State != dao.TaskRunning {
		t.Fatalf("kill of the running agent = %+v, %v; want requested", k, err)
	}
	pause := dao.AttemptResult{Outcome: dao.OutcomePaused, PausedStep: "approve"}
	pause.Next, pause.Retry = lifecycle.Next(&claimed[0], pause.Outcome)
	if done, err := lifecycle.Finish(b.ctx, b.db, []dao.Finish{{Token: claimed[0].Token(), Result: pause}}); err != nil || !done[0].Recorded {
		t.Fatalf("pause = %+v, %v", done, err)
	}
	if got := b.get(t, claimed[0].ID); got.State != dao.TaskKilled || got.PausedStep != nil {
		t.Fatalf("agent paused after its kill request = %+v; want killed", got)
	}
}

// TestPausedAgentTimesOut: past its wait step's timeout a paused agent fails, or with
// on-timeout: succeed resumes with an empty output for the step.
func TestPausedAgentTimesOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, wait string
		state      dao.TaskState
	}{
		{"fails", ", timeout: 1ms", dao.TaskFailed},
		{"succeeds", ", timeout: 1ms, on-timeout: succeed", dao.TaskQueued},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupPause(t, tc.wait)
			task := b.pause(t, time.Millisecond)
			time.Sleep(2 * time.Millisecond) // past the 1 ms timeout, by the database's clock too
			if n, err := lifecycle.EndWaitsPastTimeout(b.ctx, b.db, 100); err != nil || n != 1 {
				t.Fatalf("EndWaitsPastTimeout = %d, %v; want the agent", n, err)
			}
			got := b.get(t, task.ID)
			cp, resumed := b.checkpoints(t, task.ID)["approve"]
			switch {
			case got.State != tc.state:
				t.Fatalf("timed-out agent = %+v; want %s", got, tc.state)
			case tc.state == dao.TaskFailed && deref(got.Error) != "step approve: no signal within its timeout of 1ms":
				t.Errorf("error = %q; want it to name the step and its timeout", deref(got.Error))
			case tc.state == dao.TaskFailed && resumed:
				t.Error("a failed wait stored a checkpoint of the wait step")
			case tc.state == dao.TaskQueued && (!resumed || cp.Output != ""):
				t.Errorf("checkpoint of approve = %+v, %v; want an empty output", cp, resumed)
			}
		})
	}
}

// TestSignalOfAPausedAgentRacingItsTimeoutAppliesOnce: a signal and a master's timeout
// reaching a paused agent at the same moment apply once, as whichever came first says.
func TestSignalOfAPausedAgentRacingItsTimeoutAppliesOnce(t *testing.T) {
	t.Parallel()
	b := setupPause(t, ", timeout: 1ms")
	const rounds = 30
	var signalled, timedOut int
	for range rounds {
		task := b.pause(t, time.Millisecond)
		time.Sleep(2 * time.Millisecond)
		var wg sync.WaitGroup
		var signalErr, endErr error
		var ended int
		wg.Go(func() { _, signalErr = lifecycle.Signal(b.ctx, b.db, task.ID, "yes", false, nil) })
		wg.Go(func() { ended, endErr = lifecycle.EndWaitsPastTimeout(b.ctx, b.db, 100) })
		wg.Wait()
		if endErr != nil {
			t.Fatal(endErr)
		}
		got := b.get(t, task.ID)
		cp, resumed := b.checkpoints(t, task.ID)["approve"]
		switch {
		case signalErr == nil && ended == 0 && got.State == dao.TaskQueued && resumed && cp.Output == "yes":
			signalled++
		case signalErr != nil && ended == 1 && got.State == dao.TaskFailed && !resumed:
			timedOut++
		default:
			t.Fatalf("signal %v, timeout ended %d, task %+v, checkpoint %+v: want one of them, and the task as it says",
				signalErr, ended, got, cp)
		}
		// The resumed agent is claimed away, so the next round's claim takes the next one.
		if got.State == dao.TaskQueued {
			if c, err := lifecycle.Claim(b.ctx, b.db, "w2", []string{"default"}, 1, true); err != nil || len(c) != 1 {
				t.Fatalf("claim of the resumed agent = %+v, %v", c, err)
			}
		}
	}
	t.Logf("%d rounds: the signal first %d times, the timeout %d", rounds, signalled, timedOut)
}

// TestToolApprovalRejectionResumes: an agent paused for the approval of a tool call is
// resumed by a rejection as by an approval, not failed: the rejection's text is stored as the
// tool-rejection checkpoint, which the model is given as the call's result. A paused step of
// another kind is still failed by a rejection.
func TestToolApprovalRejectionResumes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		step, want string
		fail       bool
	}{
		{"tool-approval:2.1", "tool-approval:2.1", false},
		{"tool-approval:2.1", "tool-rejection:2.1", true},
		{"tool-call:2.1", "tool-call:2.1", false},
	} {
		b := setupPause(t, "")
		wf := submit(b.ctx, t, b.db, b.spec)
		got, err := lifecycle.Claim(b.ctx, b.db, "w1", []string{"default"}, 1, true)
		if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != wf {
			t.Fatalf("claim = %+v, %v", got, err)
		}
		task := got[0]
		res := dao.AttemptResult{Outcome: dao.OutcomePaused, PausedStep: tc.step}
		res.Next, res.Retry = lifecycle.Next(&task, res.Outcome)
		if _, err := lifecycle.Finish(b.ctx, b.db, []dao.Finish{{Token: task.Token(), Result: res}}); err != nil {
			t.Fatal(err)
		}
		sig, err := lifecycle.Signal(b.ctx, b.db, task.ID, "not at night", tc.fail, nil)
		if err != nil || sig.State != dao.TaskQueued {
			t.Fatalf("%s, fail %t: Signal = %+v, %v; want queued again", tc.step, tc.fail, sig, err)
		}
		cp, ok := b.checkpoints(t, task.ID)[tc.want]
		if !ok || cp.Output != "not at night" || cp.Attempt != 1 {
			t.Errorf("%s, fail %t: checkpoints %v; want %s with the text", tc.step, tc.fail, b.checkpoints(t, task.ID), tc.want)
		}
		if ti := b.get(t, task.ID); ti.Error != nil || ti.EndedAt != nil || ti.PausedStep != nil {
			t.Errorf("%s, fail %t: task %+v; want queued, no error", tc.step, tc.fail, ti)
		}
	}
	// Any other paused step is failed by a rejection, as before.
	b := setupPause(t, "")
	task := b.pause(t, 0)
	sig, err := lifecycle.Signal(b.ctx, b.db, task.ID, "no", true, nil)
	if err != nil || sig.State != dao.TaskFailed {
		t.Fatalf("Signal = %+v, %v; want failed", sig, err)
	}
}
