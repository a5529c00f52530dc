package dao_test

import (
	"errors"
	"fmt"
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
		race(func() { kill, killErr = b.db.TaskKill(b.ctx, id) },
			func() { claimed, claimErr = b.db.TaskClaim(b.ctx, "w", []string{"g"}, 1) })
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
		claimed, err := b.db.TaskClaim(b.ctx, "w", []string{"g"}, 1)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v %v", claimed, err)
		}
		tok := claimed[0].Token()
		// The attempt fails with a retry left: the task goes back to the queue as the kill
		// arrives.
		var killErr, finishErr error
		race(func() { _, killErr = b.db.TaskKill(b.ctx, tok.TaskID) },
			func() {
				finishErr = b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeFailed,
					Next: dao.TaskQueued, Retry: true, Error: "exit 1"})
			})
		if killErr != nil || finishErr != nil {
			t.Fatalf("round %d: kill %v, finish %v", i, killErr, finishErr)
		}
		got, _ := b.db.TaskGet(b.ctx, tok.TaskID)
		switch got.State {
		case dao.TaskKilled: // the finish came first, then the kill found it queued
		case dao.TaskQueued: // the kill came first: the request stays, the next attempt is killed
			if !got.KillRequested {
				t.Fatalf("round %d: queued without the kill request: %+v", i, got)
			}
			if _, err := b.db.SQL().Exec(`UPDATE task_instance SET not_before = NULL WHERE id = $1`, tok.TaskID); err != nil {
				t.Fatal(err)
			}
			again, err := b.db.TaskClaim(b.ctx, "w2", []string{"g"}, 1)
			reqs, err2 := b.db.TaskListKillRequested(b.ctx, "w2")
			if err != nil || err2 != nil || len(again) != 1 || len(reqs) != 1 || reqs[0] != again[0].Token() {
				t.Fatalf("round %d: the next attempt is not asked to stop: %v %v %v %v", i, again, reqs, err, err2)
			}
			if err := b.db.TaskFinishIfRunning(b.ctx, reqs[0], dao.AttemptResult{Outcome: dao.OutcomeKilled, Next: dao.TaskKilled}); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("round %d: task %s after kill and finish", i, got.State)
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
	claimed, _ := b.db.TaskClaim(b.ctx, "w", []string{"g"}, 1)
	if err := b.db.TaskFinishIfRunning(b.ctx, claimed[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
		t.Fatal(err)
	}
	var ce *dao.ConflictError
	if _, err := b.db.TaskKill(b.ctx, claimed[0].ID); !errors.As(err, &ce) || ce.State != "succeeded" {
		t.Errorf("kill of a succeeded task: %v, want a conflict naming its state", err)
	}
	if _, err := b.db.TaskKill(b.ctx, 987654); !errors.Is(err, dao.ErrInstanceNotFound) {
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
		race(func() { rerun, rerunErr = b.db.WorkflowRerun(b.ctx, wf, []int64{failed.ID}, nil) },
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
		if _, err := b.db.WorkflowStop(b.ctx, wf); err != nil {
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
	rerun, err := b.db.WorkflowRerun(b.ctx, wf, []int64{failed.ID}, nil)
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

func TestStopRacesAClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 10 {
		wf := b.queue(t, 3, "g"+string(rune('a'+i)))
		var stop dao.StopResult
		var stopErr, claimErr error
		var claimed []dao.TaskInstance
		race(func() { stop, stopErr = b.db.WorkflowStop(b.ctx, wf) },
			func() { claimed, claimErr = b.db.TaskClaim(b.ctx, "w", []string{"g" + string(rune('a'+i))}, 2) })
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
		if _, err := b.db.WorkflowStop(b.ctx, wf); !errors.As(err, &ce) {
			t.Fatalf("round %d: second stop: %v, want a conflict", i, err)
		}
	}
}

// failedTask queues a workflow instance of one task in group g, owned by "m1", and has a
// worker claim the task and fail it without a retry.
func (b *testBundle) failedTask(t *testing.T, g string) (wf int64, failed dao.TaskInstance) {
	t.Helper()
	wf = b.queue(t, 1, g)
	claimed, err := b.db.TaskClaim(b.ctx, "w", []string{g}, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, claimed[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskFailed}); err != nil {
		t.Fatal(err)
	}
	return wf, claimed[0]
}
