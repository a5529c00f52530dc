package worker

import (
	"errors"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/worker/executor"
	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
)

// Reasons an attempt is stopped before it ends by itself; they are the causes of its
// context's cancellation.
var (
	errTimedOut = errors.New("timed out")
	errHandBack = errors.New("handed back: the worker is shutting down")
	// errInterrupted: the worker was cut off from ZooKeeper past the session timeout and
	// stopped its work before the leader could give it to another worker.
	errInterrupted = errors.New("interrupted: the worker was cut off from zookeeper")
	// errRefused: a write under the attempt's token was refused, so the task is no longer
	// ours; nothing more is recorded for it.
	errRefused = errors.New("fencing token refused")
	// errKilled: the task's kill was requested (by an operator, or by its workflow's stop
	// or timeout: its end_reason says which); it ends killed, without a retry.
	errKilled = errors.New("killed on request")
)

// decide turns how an attempt ended into its outcome and the task's next state, by the rule
// of lifecycle.EndOf with the retry policy p of the task's spec (nil for none); rnd draws
// the jitter of its backoff. A stop that came after the attempt had succeeded or paused by
// itself does not undo it. A failure the policy does not retry says why in its error.
func decide(t *dao.TaskInstance, p *workflow.RetryPolicy, cause error, res executor.Result, rnd func() float64) dao.AttemptResult {
	r := dao.AttemptResult{ExitCode: res.ExitCode, AttemptUsage: usageJSON(res.Usage), TaskUsage: usageJSON(res.TaskUsage)}
	if r.TaskUsage == nil {
		r.TaskUsage = r.AttemptUsage
	}
	if cause != nil && res.Err == nil && !res.Stopped {
		// The attempt succeeded on its own before the stop reached it (a watchdog, a
		// shutdown or a kill racing its last moments): report the success under the token,
		// which refuses it if the task was taken meanwhile. Doing the work again would be
		// the only other choice.
		cause = nil
	}
	switch {
	case errors.Is(cause, errHandBack):
		r.Outcome, r.Error = dao.OutcomeHandedBack, cause.Error()
	case errors.Is(cause, errInterrupted):
		r.Outcome, r.Error = dao.OutcomeInterrupted, cause.Error()
	case errors.Is(cause, errKilled):
		r.Outcome, r.Error = dao.OutcomeKilled, cause.Error()
	case errors.Is(cause, errTimedOut):
		r.Outcome, r.Error = dao.OutcomeTimedOut, "timed out after "+t.Timeout().String()
	case res.Err != nil:
		r.Outcome, r.Error = dao.OutcomeFailed, res.Err.Error()
	case res.Paused != nil:
		r.Outcome, r.PausedStep, r.WaitFor = dao.OutcomePaused, res.Paused.Step, res.Paused.Timeout
	default:
		out := res.Output
		r.Outcome, r.Output, r.OutputTruncated = dao.OutcomeSucceeded, &out, res.OutputTruncated
	}
	end := lifecycle.EndOf(t, p, r.Outcome, failure(r.Outcome, res), rnd)
	r.Next, r.Retry, r.RetryWait = end.Next, end.Retry, end.Wait
	if end.Refused != "" {
		r.Error += " (not retried: " + end.Refused + ")"
	}
	return r
}

// failure is how an attempt that ended with outcome o failed, as retry-on and no-retry-on
// name it (workflow.ErrorKinds): a timeout by its kind alone (its exit status is that of
// the stop); a failed model call as a rate limit or a model error; a process by its exit
// status, killed when SIGKILL ended it.
func failure(o dao.Outcome, res executor.Result) workflow.Failure {
	if o == dao.OutcomeTimedOut {
		return workflow.Failure{Kind: workflow.ErrorTimeout}
	}
	f := workflow.Failure{ExitCode: res.ExitCode}
	var modelErr *llm.Error
	switch {
	case errors.As(res.Err, &modelErr) && modelErr.Class == llm.ClassRateLimit:
		f.Kind = workflow.ErrorRateLimit
	case errors.As(res.Err, &modelErr):
		f.Kind = workflow.ErrorModelError
	case f.ExitCode != nil && *f.ExitCode == killedExitStatus:
		f.Kind = workflow.ErrorKilled
	}
	return f
}

// killedExitStatus is the exit status of a process SIGKILL ended (128+9).
const killedExitStatus = 137
