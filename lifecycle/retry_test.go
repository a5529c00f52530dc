package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// retryBundle is a database with one workflow instance submitted, for the retry tests.
type retryBundle struct {
	ctx  context.Context
	db   *dao.DB
	wfID int64
}

func setupRetry(t *testing.T, src string) *retryBundle {
	t.Helper()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &retryBundle{ctx: ctx, db: db, wfID: submit(ctx, t, db, parse(t, src))}
}

// failNext claims the instance's task and ends its attempt as the worker does, failed with
// exit status code, by lifecycle.EndOf with the retry policy of the task's params and the
// jitter source rnd. It returns the ending and the task and attempt rows after it.
func (b *retryBundle) failNext(t *testing.T, code int, rnd func() float64) (lifecycle.Ending, *dao.TaskInstance, dao.TaskAttempt) {
	t.Helper()
	got, err := lifecycle.Claim(b.ctx, b.db, "w1", []string{"default"}, 1, true)
	if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != b.wfID {
		t.Fatalf("claim = %+v, %v; want the task of instance %d", got, err, b.wfID)
	}
	task := got[0]
	var params workflow.TaskParams
	if err := json.Unmarshal(task.Params, &params); err != nil {
		t.Fatal(err)
	}
	end := lifecycle.EndOf(&task, params.Task.RetryPolicy(), dao.OutcomeFailed, workflow.Failure{ExitCode: &code}, rnd)
	res := dao.AttemptResult{Outcome: dao.OutcomeFailed, ExitCode: &code, Error: fmt.Sprintf("exit status %d", code),
		Next: end.Next, Retry: end.Retry, RetryWait: end.Wait}
	if end.Refused != "" {
		res.Error += " (not retried: " + end.Refused + ")"
	}
	if done, err := lifecycle.Finish(b.ctx, b.db, []dao.Finish{{Token: task.Token(), Result: res}}); err != nil || !done[0].Recorded {
		t.Fatalf("finish = %+v, %v", done, err)
	}
	after, err := b.db.TaskGet(b.ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	atts, err := b.db.AttemptList(b.ctx, task.ID)
	if err != nil || len(atts) != task.Attempt {
		t.Fatalf("attempts = %+v, %v; want %d", atts, err, task.Attempt)
	}
	return end, after, atts[len(atts)-1]
}

// due is how long after the attempt's end its retry is due: the statement that ends the
// attempt stamps both with one now().
func due(t *testing.T, task *dao.TaskInstance, att dao.TaskAttempt) time.Duration {
	t.Helper()
	if task.NotBefore == nil || att.EndedAt == nil {
		t.Fatalf("task not before %v, attempt ended %v; want both", task.NotBefore, att.EndedAt)
	}
	return task.NotBefore.Sub(*att.EndedAt)
}

// claimNow makes the task's retry due at once, so that the test need not wait for it.
func (b *retryBundle) claimNow(t *testing.T, id int64) {
	t.Helper()
	if _, err := b.db.SQL().ExecContext(b.ctx, "UPDATE task_instance SET not_before = NULL WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
}

// TestRetryBackoffDueTimes: each retry of a task with a retry-backoff is due its step after
// the failed attempt's end: growing by the factor, capped at max, shortened by the jitter
// the injected source draws; after the last retry the task fails with nothing due.
func TestRetryBackoffDueTimes(t *testing.T) {
	t.Parallel()
	b := setupRetry(t, `name: backoff
tasks:
  - name: flaky
    type: shell
    command: exit 1
    retries: 4
    retry-backoff: {initial: 10s, factor: 3, max: 1m, jitter: 0.5}
`)
	draws := []float64{0, 0.5, 0, 0.2}
	want := []time.Duration{10 * time.Second, 22500 * time.Millisecond, time.Minute, 54 * time.Second}
	for i, w := range want {
		rnd := func() float64 { return draws[i] }
		end, task, att := b.failNext(t, 1, rnd)
		if !end.Retry || task.State != dao.TaskQueued || task.Retries != i+1 {
			t.Fatalf("attempt %d: ending %+v, task %s with %d retries; want queued, %d retries", i+1, end, task.State, task.Retries, i+1)
		}
		if got := due(t, task, att); got != w || end.Wait != w {
			t.Errorf("retry %d due %s after the failure (ending says %s); want %s", i+1, got, end.Wait, w)
		}
		b.claimNow(t, task.ID)
	}
	end, task, _ := b.failNext(t, 1, func() float64 { return 0 })
	if end.Retry || task.State != dao.TaskFailed || task.NotBefore != nil {
		t.Errorf("after the last retry: ending %+v, task %s, not before %v; want failed, nothing due", end, task.State, task.NotBefore)
	}
}

// TestRetryIntervalDueTime: without a backoff the retry is due the fixed retry-interval after
// the failure, whatever the jitter source says.
func TestRetryIntervalDueTime(t *testing.T) {
	t.Parallel()
	b := setupRetry(t, "name: fixed\ntasks:\n  - {name: flaky, type: shell, command: exit 1, retries: 2, retry-interval: 45s}\n")
	for i := range 2 {
		end, task, att := b.failNext(t, 1, func() float64 { return 0.9 })
		if got := due(t, task, att); !end.Retry || got != 45*time.Second {
			t.Errorf("retry %d: ending %+v, due %s after the failure; want a retry after 45s", i+1, end, got)
		}
		b.claimNow(t, task.ID)
	}
}

// TestRetryOnDecisions: a failure retry-on does not name, or no-retry-on names, fails the
// task at once, with retries left, saying why; its workflow fails with it.
func TestRetryOnDecisions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		policy string
		codes  []int // the attempts' exit statuses: all but the last are retried
		why    string
	}{
		{"retry-on", "retry-on: {exit-codes: [75], errors: [timeout]}", []int{75, 75, 3}, "exit 3 is not in retry-on"},
		{"no-retry-on", "no-retry-on: {exit-codes: [2, 137]}", []int{1, 2}, "exit 2 is in no-retry-on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRetry(t, "name: on\ntasks:\n  - {name: flaky, type: shell, command: exit 1, retries: 5, retry-interval: 1s, "+tc.policy+"}\n")
			for i, code := range tc.codes[:len(tc.codes)-1] {
				end, task, _ := b.failNext(t, code, nil)
				if !end.Retry || task.State != dao.TaskQueued {
					t.Fatalf("attempt %d, exit %d: ending %+v, task %s; want it retried", i+1, code, end, task.State)
				}
				b.claimNow(t, task.ID)
			}
			last := tc.codes[len(tc.codes)-1]
			end, task, att := b.failNext(t, last, nil)
			if end.Retry || task.State != dao.TaskFailed || task.NotBefore != nil || task.Retries != len(tc.codes)-1 {
				t.Fatalf("exit %d: ending %+v, task %s with %d retries, not before %v; want failed at once", last, end, task.State, task.Retries, task.NotBefore)
			}
			want := fmt.Sprintf("exit status %d (not retried: %s)", last, tc.why)
			if end.Refused != tc.why || deref(task.Error) != want || deref(att.Error) != want {
				t.Errorf("refused %q, task error %q, attempt error %q; want %q", end.Refused, deref(task.Error), deref(att.Error), want)
			}
			wf, err := b.db.WorkflowGet(b.ctx, b.wfID)
			if err != nil || wf.State != dao.WorkflowFailed {
				t.Errorf("workflow = %+v, %v; want it failed with its task", wf, err)
			}
		})
	}
}
