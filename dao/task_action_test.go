package dao_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

// race runs a and b at the same moment.
func race(a, b func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, f := range []func(){a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f()
		}()
	}
	close(start)
	wg.Wait()
}

func TestKillOfAQueuedTaskRacesAClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 20 {
		wf := b.queue(t, 1, "g")
		tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		id := tasks[0].ID
		var kill dao.KillResult
		var killErr, claimErr error
		var claimed []dao.TaskInstance
		race(func() { kill, killErr = b.db.TaskKillIfQueuedOrRunning(b.ctx, id) },
			func() { claimed, claimErr = b.db.TaskClaimQueued(b.ctx, "w", []string{"g"}, 1) })
		if killErr != nil || claimErr != nil {
			t.Fatalf("round %d: kill %v, claim %v", i, killErr, claimErr)
		}
		got, err := b.db.TaskGet(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		atts, _ := b.db.AttemptList(b.ctx, id)
		switch kill.State {
		case dao.TaskKilled: // the kill came first: nothing ran
			if len(claimed) != 0 || got.State != dao.TaskKilled || len(atts) != 0 {
				t.Fatalf("round %d: killed at once, yet claimed %d, state %s, %d attempts", i, len(claimed), got.State, len(atts))
			}
		case dao.TaskRunning: // the claim came first: the worker is asked to stop it
			reqs, err := b.db.TaskListKillRequested(b.ctx, "w")
			if len(claimed) != 1 || got.State != dao.TaskRunning || !got.KillRequested || len(atts) != 1 ||
				err != nil || len(reqs) != 1 || reqs[0] != claimed[0].Token() {
				t.Fatalf("round %d: kill requested, yet claimed %d, task %+v, %d attempts, requests %v %v", i,
					len(claimed), got, len(atts), reqs, err)
			}
			if err := b.db.TaskFinishIfRunning(b.ctx, reqs[0], dao.AttemptResult{Outcome: dao.OutcomeKilled, Next: dao.TaskKilled}); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("round %d: kill = %+v", i, kill)
		}
	}
}

func TestKillOfARunningTaskRacesItsFinish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 20 {
		b.queue(t, 1, "g")
		claimed, err := b.db.TaskClaimQueued(b.ctx, "w", []string{"g"}, 1)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v %v", claimed, err)
		}
		tok := claimed[0].Token()
		// The attempt fails with a retry left: the task goes back to the queue as the kill
		// arrives.
		var killErr, finishErr error
		race(func() { _, killErr = b.db.TaskKillIfQueuedOrRunning(b.ctx, tok.TaskID) },
			func() {
				finishErr = b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeFailed,
					Next: dao.TaskQueued, Retry: true, Error: "exit 1"})
			})
		if killErr != nil || finishErr != nil {
			t.Fatalf("round %d: kill %v, finish %v", i, killErr, finishErr)
		}
		// Whichever came first the task ends killed: the finish queued it and the kill found
		// it queued, or the kill came first and the finish, finding it kill-requested, ended
		// it killed instead of queuing it again.
		got, _ := b.db.TaskGet(b.ctx, tok.TaskID)
		if got.State != dao.TaskKilled || got.EndedAt == nil {
			t.Fatalf("round %d: task %s (ended %v) after kill and finish, want killed", i, got.State, got.EndedAt)
		}
		if again, err := b.db.TaskClaimQueued(b.ctx, "w2", []string{"g"}, 1); err != nil || len(again) != 0 {
			t.Fatalf("round %d: claimed %v, %v after the kill; want nothing", i, again, err)
		}
		// Whichever came first, the old attempt's token is spent.
		if err := b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); !errors.Is(err, dao.ErrTokenRefused) {
			t.Fatalf("round %d: late finish: %v", i, err)
		}
	}
}

func TestKillRefusesFinishedAndMissingTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.queue(t, 1, "g")
	claimed, _ := b.db.TaskClaimQueued(b.ctx, "w", []string{"g"}, 1)
	if err := b.db.TaskFinishIfRunning(b.ctx, claimed[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
		t.Fatal(err)
	}
	var ce *dao.ConflictError
	if _, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, claimed[0].ID); !errors.As(err, &ce) || ce.State != "succeeded" {
		t.Errorf("kill of a succeeded task: %v, want a conflict naming its state", err)
	}
	if _, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, 987654); !errors.Is(err, dao.ErrInstanceNotFound) {
		t.Errorf("kill of a missing task: %v, want ErrInstanceNotFound", err)
	}
}

// advanceAsMaster does what a master's advance does with a workflow whose tasks are all
// terminal: under the workflow's row lock, it reads the tasks and finishes the instance.
func advanceAsMaster(b *testBundle, wf int64) error {
	return b.db.Tx(b.ctx, func(q *dao.Queries) error {
		if _, err := q.WorkflowLockIfOwned(b.ctx, wf, "m1"); err != nil {
			return err
		}
		tasks, err := q.TaskListByWorkflow(b.ctx, wf)
		if err != nil {
			return err
		}
		for _, ti := range tasks {
			if !ti.State.Terminal() {
				return nil
			}
		}
		return q.WorkflowFinishIfOwned(b.ctx, wf, "m1", dao.WorkflowFailed, "t0 failed")
	})
}

func TestRerunRacesTheMasterFinishingTheWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 20 {
		wf, failed := b.failedTask(t, "g")
		var rerun dao.RerunResult
		var rerunErr, masterErr error
		race(func() { rerun, rerunErr = b.db.TaskRerunIfFailedOrKilled(b.ctx, wf, []int64{failed.ID}, nil, nil) },
			func() { masterErr = advanceAsMaster(b, wf) })
		if rerunErr != nil || (masterErr != nil && !errors.Is(masterErr, dao.ErrNotOwner)) {
			t.Fatalf("round %d: rerun %v, master %v", i, rerunErr, masterErr)
		}
		w, _ := b.db.WorkflowGet(b.ctx, wf)
		task, _ := b.db.TaskGet(b.ctx, failed.ID)
		if w.State != dao.WorkflowRunning || task.State != dao.TaskQueued || w.EndedAt != nil {
			t.Fatalf("round %d: workflow %s, task %s after the race", i, w.State, task.State)
		}
		// Reopened: no owner, a master claims it; otherwise its master still drives it.
		if rerun.Reopened != (w.Owner == nil) {
			t.Fatalf("round %d: reopened %v, owner %v", i, rerun.Reopened, w.Owner)
		}
		if _, err := b.db.WorkflowStopIfActive(b.ctx, wf, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRerunWakesMastersWithTheID: a rerun that reopens a finished instance wakes the masters
// with its id, as the end of a task of it would: the claim of new instances no longer takes
// running ones, so a bare wake-up would leave the reopened instance to its requeued tasks.
func TestRerunWakesMastersWithTheID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf, failed := b.failedTask(t, "rerun")
	if err := advanceAsMaster(b, wf); err != nil {
		t.Fatal(err)
	}
	ml := b.listenMaster(t)
	rerun, err := b.db.TaskRerunIfFailedOrKilled(b.ctx, wf, []int64{failed.ID}, nil, nil)
	if err != nil || !rerun.Reopened {
		t.Fatalf("rerun = %+v, %v; want the instance reopened", rerun, err)
	}
	select {
	case w := <-ml.C:
		if w.Payload != fmt.Sprint(wf) {
			t.Fatalf("wake-up %q, want the instance's id %d", w.Payload, wf)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up")
	}
}

// TestRerunResetsASensor: a rerun removes a sensor's state (the checkpoint sensor-state),
// so the sensor starts over, its timeout from its new first check; the attempts between,
// lost or handed back, keep it. An agent's steps stay.
func TestRerunResetsASensor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.queue(t, 1, "sensor-rerun")
	claimed, err := b.db.TaskClaimQueued(b.ctx, "w", []string{"sensor-rerun"}, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	for _, step := range []string{"sensor-state", "draft"} {
		if err := b.db.CheckpointSaveIfRunning(b.ctx, claimed[0].Token(), step, `{"start": "2026-11-28T12:00:00Z"}`, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, claimed[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskFailed}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.TaskRerunIfFailedOrKilled(b.ctx, wf, []int64{claimed[0].ID}, nil, nil); err != nil {
		t.Fatal(err)
	}
	cps, err := b.db.CheckpointListForTask(b.ctx, claimed[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, cp := range cps {
		steps = append(steps, cp.Step)
	}
	if !slices.Equal(steps, []string{"draft"}) {
		t.Fatalf("checkpoints after the rerun: %v; want [draft]", steps)
	}
}

func TestStopRacesAClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 10 {
		wf := b.queue(t, 3, "g"+string(rune('a'+i)))
		var stop dao.StopResult
		var stopErr, claimErr error
		var claimed []dao.TaskInstance
		race(func() { stop, stopErr = b.db.WorkflowStopIfActive(b.ctx, wf, nil) },
			func() { claimed, claimErr = b.db.TaskClaimQueued(b.ctx, "w", []string{"g" + string(rune('a'+i))}, 2) })
		if stopErr != nil || claimErr != nil {
			t.Fatalf("round %d: stop %v, claim %v", i, stopErr, claimErr)
		}
		tasks, _ := b.db.TaskListByWorkflow(b.ctx, wf)
		killed, requested := 0, 0
		for _, ti := range tasks {
			switch {
			case ti.State == dao.TaskKilled:
				killed++
			case ti.State == dao.TaskRunning && ti.KillRequested:
				requested++
			default:
				t.Fatalf("round %d: task %s is %s (kill requested %v) after the stop", i, ti.Name, ti.State, ti.KillRequested)
			}
		}
		if killed != stop.Killed || requested != stop.KillRequested || requested != len(claimed) {
			t.Fatalf("round %d: stop %+v, claimed %d, found %d killed and %d asked to stop", i, stop, len(claimed), killed, requested)
		}
		w, _ := b.db.WorkflowGet(b.ctx, wf)
		if w.State != dao.WorkflowStopped {
			t.Fatalf("round %d: workflow %s", i, w.State)
		}
		var ce *dao.ConflictError
		if _, err := b.db.WorkflowStopIfActive(b.ctx, wf, nil); !errors.As(err, &ce) {
			t.Fatalf("round %d: second stop: %v, want a conflict", i, err)
		}
	}
}

// failedTask queues a workflow instance of one task in group g, owned by "m1", and has a
// worker claim the task and fail it without a retry.
func (b *testBundle) failedTask(t *testing.T, g string) (wf int64, failed dao.TaskInstance) {
	t.Helper()
	wf = b.queue(t, 1, g)
	claimed, err := b.db.TaskClaimQueued(b.ctx, "w", []string{g}, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, claimed[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskFailed}); err != nil {
		t.Fatal(err)
	}
	return wf, claimed[0]
}

// TestKillRequestedTaskIsNeverQueuedAgain: a task whose kill was requested while it ran (an
// operator's kill, its workflow's stop or timeout) ends killed wherever its attempt's end
// would have put it back in the queue, keeps the attempt's own outcome, wakes its master as a
// kill of a queued task does, and is never claimed again. It used to go back to the queue
// with the request still set: the next worker started attempt 2 only to kill it. Its end
// keeps the reason the request gave (end_reason), which its error says: a task killed by its
// workflow's timeout used to say an operator killed it.
func TestKillRequestedTaskIsNeverQueuedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ml := b.listenMaster(t)
	kills := []struct {
		name string
		// woken says whether the request itself wakes the masters with the instance's id, so
		// a wake-up after the attempt's end would prove nothing.
		woken bool
		kill  func(wf, task int64) error
		// reason and error are what the task ends with.
		reason dao.EndReason
		error  string
	}{
		{"kill", false, func(_, task int64) error {
			res, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, task)
			if err == nil && res.State != dao.TaskRunning {
				err = fmt.Errorf("kill of a running task: %+v", res)
			}
			return err
		}, dao.EndOperatorKill, "killed by an operator"},
		{"workflow stop", true, func(wf, _ int64) error {
			res, err := b.db.WorkflowStopIfActive(b.ctx, wf, nil)
			if err == nil && res.KillRequested != 1 {
				err = fmt.Errorf("stop of a workflow with a running task: %+v", res)
			}
			return err
		}, dao.EndStop, "killed: the workflow was stopped"},
		{"workflow timeout", false, func(wf, _ int64) error {
			return b.db.Tx(b.ctx, func(q *dao.Queries) error {
				n, err := q.WorkflowTimeOutIfOwned(b.ctx, wf, "m1", "workflow timeout 1s exceeded")
				if err == nil && n != 1 {
					err = fmt.Errorf("timeout asked %d running tasks to stop, want 1", n)
				}
				return err
			})
		}, dao.EndWorkflowTimeout, "killed: the workflow timed out"},
	}
	ends := []struct {
		name    string
		outcome dao.Outcome
		end     func(tok dao.Token) error
	}{
		{"failover", dao.OutcomeFailedOver, func(tok dao.Token) error {
			return b.db.Tx(b.ctx, func(q *dao.Queries) error {
				n, err := q.TaskRequeueIfRunningOnWorker(b.ctx, tok.WorkerID)
				if err == nil && n != 1 {
					err = fmt.Errorf("failover took %d tasks off the worker, want 1", n)
				}
				return err
			})
		}},
		{"hand-back", dao.OutcomeHandedBack, func(tok dao.Token) error {
			return b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeHandedBack,
				Next: dao.TaskQueued, Error: "handed back: the worker is shutting down"})
		}},
		{"interruption", dao.OutcomeInterrupted, func(tok dao.Token) error {
			return b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeInterrupted,
				Next: dao.TaskQueued, Error: "interrupted: the worker was cut off from zookeeper"})
		}},
		{"never started", dao.OutcomeInterrupted, func(tok dao.Token) error {
			return b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeInterrupted,
				Next: dao.TaskQueued, Error: "claimed by this worker but never started (the claim's reply was lost)"})
		}},
		{"failure with a retry left", dao.OutcomeFailed, func(tok dao.Token) error {
			return b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeFailed,
				Next: dao.TaskQueued, Retry: true, Error: "exit status 1"})
		}},
		{"timeout with a retry left", dao.OutcomeTimedOut, func(tok dao.Token) error {
			return b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeTimedOut,
				Next: dao.TaskQueued, Retry: true, Error: "timed out after 1s"})
		}},
		{"the worker's kill", dao.OutcomeKilled, func(tok dao.Token) error {
			return b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeKilled,
				Next: dao.TaskKilled, Error: "killed on request"})
		}},
	}
	i := 0
	for _, k := range kills {
		for _, e := range ends {
			i++
			g, w := fmt.Sprint("g", i), fmt.Sprint("w", i)
			t.Run(k.name+" then "+e.name, func(t *testing.T) {
				wf := b.queue(t, 1, g)
				claimed, err := b.db.TaskClaimQueued(b.ctx, w, []string{g}, 1)
				if err != nil || len(claimed) != 1 {
					t.Fatalf("claim = %v, %v", claimed, err)
				}
				task := claimed[0]
				if err := k.kill(wf, task.ID); err != nil {
					t.Fatal(err)
				}
				if k.woken {
					masterListening(t, b, ml)
				}
				if err := e.end(task.Token()); err != nil {
					t.Fatal(err)
				}
				got, err := b.db.TaskGet(b.ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != dao.TaskKilled || got.EndedAt == nil || got.Error == nil || *got.Error != k.error ||
					got.EndReason == nil || *got.EndReason != k.reason || got.NotBefore != nil || got.Retries != 0 {
					t.Errorf("task = %s, ended %v, error %v, reason %v, not before %v, %d retries; want killed (%s, %q), ended, no retry",
						got.State, got.EndedAt, strOf(got.Error), got.EndReason, got.NotBefore, got.Retries, k.reason, k.error)
				}
				atts, err := b.db.AttemptList(b.ctx, task.ID)
				if err != nil || len(atts) != 1 || atts[0].Outcome == nil || *atts[0].Outcome != e.outcome || atts[0].EndedAt == nil {
					t.Errorf("attempts = %+v, %v; want one, ended %s", atts, err, e.outcome)
				}
				for name, claim := range map[string]func(context.Context, string, []string, int) ([]dao.TaskInstance, error){
					"claim": b.db.TaskClaimQueued, "claim without pools": b.db.TaskClaimQueuedUnpooled} {
					if again, err := claim(b.ctx, "w-next", []string{g}, 10); err != nil || len(again) != 0 {
						t.Errorf("%s = %d tasks (attempt %d), %v; want none", name, len(again), attemptOf(again), err)
					}
				}
				waitWakeup(t, ml, fmt.Sprint(wf))
			})
		}
	}
}

// TestKillRequestedSingleTaskWorkflowEnds: the one task of a workflow that no master drives
// (migration 00007) is handed back after an operator asked to kill it: it ends killed and the
// same statement ends the instance, as a kill of its worker's own would.
func TestKillRequestedSingleTaskWorkflowEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.submitWithRoot(t, `{"name":"single","tasks":[{"name":"t","type":"noop"}]}`, "single", 3)
	claimed, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"single"}, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	if _, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, claimed[0].ID); err != nil {
		t.Fatal(err)
	}
	done, err := b.db.TaskFinishManyIfRunning(b.ctx, []dao.Finish{{Token: claimed[0].Token(), Result: dao.AttemptResult{
		Outcome: dao.OutcomeHandedBack, Next: dao.TaskQueued, Error: "handed back: the worker is shutting down"}}})
	if err != nil || len(done) != 1 || !done[0].Recorded || done[0].Workflow != dao.WorkflowFailed {
		t.Fatalf("finish = %+v, %v; want recorded, the instance ended failed", done, err)
	}
	w, err := b.db.WorkflowGet(b.ctx, wf)
	if err != nil || w.State != dao.WorkflowFailed || w.EndedAt == nil {
		t.Fatalf("workflow = %+v, %v; want failed and ended", w, err)
	}
	if got, _ := b.db.TaskGet(b.ctx, claimed[0].ID); got.State != dao.TaskKilled {
		t.Fatalf("task %s, want killed", got.State)
	}
}

// TestKillRacesAFailover: a task killed, or whose workflow is stopped, while its worker is
// failed over ends killed whichever commits first (the requeue then the kill of a queued
// task, or the kill request then a requeue that ends the task killed), and no worker claims
// it again.
func TestKillRacesAFailover(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		name string
		kill func(wf, task int64) error
	}{
		{"kill", func(_, task int64) error { _, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, task); return err }},
		{"workflow stop", func(wf, _ int64) error { _, err := b.db.WorkflowStopIfActive(b.ctx, wf, nil); return err }},
	} {
		for i := range 20 {
			g, w := fmt.Sprint(c.name, i), fmt.Sprint("w-", c.name, i)
			wf := b.queue(t, 1, g)
			claimed, err := b.db.TaskClaimQueued(b.ctx, w, []string{g}, 1)
			if err != nil || len(claimed) != 1 {
				t.Fatalf("%s, round %d: claim = %v, %v", c.name, i, claimed, err)
			}
			var killErr, requeueErr error
			race(func() { killErr = c.kill(wf, claimed[0].ID) },
				func() {
					requeueErr = b.db.Tx(b.ctx, func(q *dao.Queries) error {
						_, err := q.TaskRequeueIfRunningOnWorker(b.ctx, w)
						return err
					})
				})
			if killErr != nil || requeueErr != nil {
				t.Fatalf("%s, round %d: %v, failover %v", c.name, i, killErr, requeueErr)
			}
			if again, err := b.db.TaskClaimQueued(b.ctx, "w-next", []string{g}, 1); err != nil || len(again) != 0 {
				t.Fatalf("%s, round %d: claimed %d tasks (attempt %d), %v; want none", c.name, i, len(again), attemptOf(again), err)
			}
			if got, _ := b.db.TaskGet(b.ctx, claimed[0].ID); got.State != dao.TaskKilled {
				t.Fatalf("%s, round %d: task %s after the kill and the failover, want killed", c.name, i, got.State)
			}
		}
	}
}

// TestClaimSkipsKillRequestedTasks: a queued task with a kill request (a row no statement of
// dao writes any more; older code queued such tasks) is never claimed, with or without pools,
// and does not hold back the tasks behind it.
func TestClaimSkipsKillRequestedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, pool := range []string{"", "p"} {
		g := "g" + pool
		wf := b.queue(t, 3, g)
		if _, err := b.db.SQL().Exec(`INSERT INTO task_pool (name) VALUES ('p') ON CONFLICT DO NOTHING`); err != nil {
			t.Fatal(err)
		}
		if _, err := b.db.SQL().Exec(`UPDATE task_instance SET pool = nullif($2, ''), priority = CASE name WHEN 't1' THEN 9 ELSE 0 END,
			kill_requested = name IN ('t0', 't1') WHERE workflow_instance_id = $1`, wf, pool); err != nil {
			t.Fatal(err)
		}
		claim := b.db.TaskClaimQueuedUnpooled
		if pool != "" {
			claim = b.db.TaskClaimQueued
		}
		got, err := claim(b.ctx, "w1", []string{g}, 10)
		if err != nil || len(got) != 1 || got[0].Name != "t2" || got[0].KillRequested {
			t.Fatalf("pool %q: claimed %+v, %v; want t2 alone", pool, got, err)
		}
	}
}

// waitWakeup waits for a masters' wake-up that names the workflow instance id.
func waitWakeup(t *testing.T, ml *dao.Listener, id string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case w := <-ml.C:
			if slices.Contains(strings.Split(w.Payload, ","), id) {
				return
			}
		case <-deadline:
			t.Errorf("no masters' wake-up names instance %s", id)
			return
		}
	}
}

// attemptOf is the attempt of the first of tasks, for a message; 0 for none.
func attemptOf(tasks []dao.TaskInstance) int {
	if len(tasks) == 0 {
		return 0
	}
	return tasks[0].Attempt
}

// strOf is *s for a message, "<nil>" for nil.
func strOf(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
