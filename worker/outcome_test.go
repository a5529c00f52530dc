package worker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/worker/executor"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	failed := executor.Result{Err: errors.New("exit status 1")}
	paused := executor.Result{Paused: &executor.Pause{Step: "approve", Timeout: time.Hour}}
	for _, tc := range []struct {
		name           string
		retries, max   int
		cause          error
		res            executor.Result
		outcome        dao.Outcome
		next           dao.TaskState
		countsAsRetry  bool
		wantsErrorText bool
	}{
		{"success", 0, 0, nil, executor.Result{Output: "x"}, dao.OutcomeSucceeded, dao.TaskSucceeded, false, false},
		{"failure with retries left", 1, 2, nil, failed, dao.OutcomeFailed, dao.TaskQueued, true, true},
		{"failure with no retries left", 2, 2, nil, failed, dao.OutcomeFailed, dao.TaskFailed, false, true},
		{"timeout retried like a failure", 0, 1, errTimedOut, failed, dao.OutcomeTimedOut, dao.TaskQueued, true, true},
		{"timeout with no retries left", 0, 0, errTimedOut, executor.Result{Stopped: true}, dao.OutcomeTimedOut, dao.TaskFailed, false, true},
		{"timeout wins over a stopped clean exit", 0, 0, fmt.Errorf("wrapped: %w", errTimedOut), executor.Result{Stopped: true}, dao.OutcomeTimedOut, dao.TaskFailed, false, true},
		{"hand-back is not a retry", 5, 5, errHandBack, failed, dao.OutcomeHandedBack, dao.TaskQueued, false, true},
		{"interruption is not a retry", 5, 5, errInterrupted, failed, dao.OutcomeInterrupted, dao.TaskQueued, false, true},
		{"success before the interruption stands", 0, 0, errInterrupted, executor.Result{Output: "done"}, dao.OutcomeSucceeded, dao.TaskSucceeded, false, false},
		{"success before the hand-back stands", 0, 0, errHandBack, executor.Result{Output: "done"}, dao.OutcomeSucceeded, dao.TaskSucceeded, false, false},
		{"a stopped clean exit is still a hand-back", 0, 0, errHandBack, executor.Result{Stopped: true}, dao.OutcomeHandedBack, dao.TaskQueued, false, true},
		{"kill is never retried", 0, 3, errKilled, failed, dao.OutcomeKilled, dao.TaskKilled, false, true},
		{"an agent at a wait step pauses", 2, 2, nil, paused, dao.OutcomePaused, dao.TaskWaiting, false, false},
		{"a pause before the hand-back stands", 0, 0, errHandBack, paused, dao.OutcomePaused, dao.TaskWaiting, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ti := &dao.TaskInstance{Retries: tc.retries, MaxRetries: tc.max}
			got := decide(ti, tc.cause, tc.res)
			if got.Outcome != tc.outcome || got.Next != tc.next || got.Retry != tc.countsAsRetry {
				t.Errorf("decide = outcome %s, next %s, retry %v; want %s, %s, %v", got.Outcome, got.Next, got.Retry,
					tc.outcome, tc.next, tc.countsAsRetry)
			}
			if (got.Error != "") != tc.wantsErrorText {
				t.Errorf("error text %q; want one: %v", got.Error, tc.wantsErrorText)
			}
			if p := tc.res.Paused; p != nil && (got.PausedStep != p.Step || got.WaitFor != p.Timeout || got.Output != nil) {
				t.Errorf("paused at %q for %s, output %v; want %q for %s, no output", got.PausedStep, got.WaitFor, got.Output, p.Step, p.Timeout)
			}
			if got.Outcome == dao.OutcomeSucceeded && (got.Output == nil || *got.Output != tc.res.Output) {
				t.Errorf("output = %v, want %q", got.Output, tc.res.Output)
			}
		})
	}
}
