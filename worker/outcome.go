package worker

import (
	"errors"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/worker/executor"
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
)

// decide turns how an attempt ended into the task's next state. A failure or a timeout is
// retried while the task has retries left, after its retry interval; a hand-back goes back to
// the queue without counting as a retry.
func decide(t *dao.TaskInstance, cause error, res executor.Result) dao.AttemptResult {
	r := dao.AttemptResult{ExitCode: res.ExitCode}
	switch {
	case errors.Is(cause, errHandBack):
		r.Outcome, r.Next, r.Error = dao.OutcomeHandedBack, dao.TaskQueued, cause.Error()
		return r
	case errors.Is(cause, errInterrupted):
		r.Outcome, r.Next, r.Error = dao.OutcomeInterrupted, dao.TaskQueued, cause.Error()
		return r
	case errors.Is(cause, errTimedOut):
		r.Outcome, r.Error = dao.OutcomeTimedOut, "timed out after "+t.Timeout().String()
	case res.Err != nil:
		r.Outcome, r.Error = dao.OutcomeFailed, res.Err.Error()
	default:
		out := res.Output
		r.Outcome, r.Next, r.Output = dao.OutcomeSucceeded, dao.TaskSucceeded, &out
		return r
	}
	if t.Retries < t.MaxRetries {
		r.Next, r.Retry = dao.TaskQueued, true
	} else {
		r.Next = dao.TaskFailed
	}
	return r
}
