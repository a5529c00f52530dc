package worker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/worker/executor"
	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
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
			got := decide(ti, nil, tc.cause, tc.res, nil)
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

func TestDecideRetryPolicy(t *testing.T) {
	t.Parallel()
	exit := func(c int) executor.Result {
		return executor.Result{Err: fmt.Errorf("exit status %d", c), ExitCode: &c}
	}
	model := func(c llm.Class) executor.Result {
		return executor.Result{Err: fmt.Errorf("step s: %w", &llm.Error{Provider: "p", Class: c, Msg: "no"})}
	}
	on := &workflow.RetryPolicy{RetryOn: &workflow.RetryOn{ExitCodes: []int{1}, Errors: []string{workflow.ErrorTimeout, workflow.ErrorRateLimit}}}
	notOn := &workflow.RetryPolicy{NoRetryOn: &workflow.RetryOn{Errors: []string{workflow.ErrorKilled, workflow.ErrorModelError}}}
	backoff := &workflow.RetryPolicy{Backoff: &workflow.RetryBackoff{Initial: workflow.Duration(10 * time.Second), Factor: 3, Jitter: 0.5}}
	for _, tc := range []struct {
		name   string
		policy *workflow.RetryPolicy
		cause  error
		res    executor.Result
		next   dao.TaskState
		wait   time.Duration
		error  string
	}{
		{"no policy: the interval", nil, nil, exit(3), dao.TaskQueued, time.Minute, "exit status 3"},
		{"an exit code in retry-on", on, nil, exit(1), dao.TaskQueued, time.Minute, "exit status 1"},
		{"an exit code not in retry-on", on, nil, exit(3), dao.TaskFailed, 0, "exit status 3 (not retried: exit 3 is not in retry-on)"},
		{"a timeout in retry-on", on, errTimedOut, exit(143), dao.TaskQueued, time.Minute, "timed out after 0s"},
		{"a rate limit in retry-on", on, nil, model(llm.ClassRateLimit), dao.TaskQueued, time.Minute, ""},
		{"a model error not in retry-on", on, nil, model(llm.ClassServer), dao.TaskFailed, 0, "(not retried: model-error is not in retry-on)"},
		{"SIGKILL in no-retry-on", notOn, nil, exit(137), dao.TaskFailed, 0, "exit status 137 (not retried: exit 137 (killed) is in no-retry-on)"},
		{"a model error in no-retry-on", notOn, nil, model(llm.ClassBadRequest), dao.TaskFailed, 0, "(not retried: model-error is in no-retry-on)"},
		{"a rate limit not in no-retry-on", notOn, nil, model(llm.ClassRateLimit), dao.TaskQueued, time.Minute, ""},
		{"the backoff's step, with its jitter", backoff, nil, exit(1), dao.TaskQueued, 22500 * time.Millisecond, "exit status 1"},
		{"a kill is never retried", on, errKilled, exit(1), dao.TaskKilled, 0, "killed on request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The second retry: the backoff waits 10s × 3, less 0.5 × 0.5 of it.
			ti := &dao.TaskInstance{Retries: 1, MaxRetries: 3, RetryIntervalMs: 60_000}
			got := decide(ti, tc.policy, tc.cause, tc.res, func() float64 { return 0.5 })
			if got.Next != tc.next || got.Retry != (tc.next == dao.TaskQueued) || got.RetryWait != tc.wait {
				t.Errorf("decide = next %s, retry %v, wait %s; want %s after %s", got.Next, got.Retry, got.RetryWait, tc.next, tc.wait)
			}
			if !strings.HasSuffix(got.Error, tc.error) {
				t.Errorf("error %q; want it to end %q", got.Error, tc.error)
			}
		})
	}
}
