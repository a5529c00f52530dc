package lifecycle

import (
	"context"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// The workers' transitions of their task instances, and the rule of an attempt's end.

// Claim is the transition "claimed": up to limit queued task instances of groups, whose
// retry wait has passed and whose pools have a free slot, become running on worker under a
// new attempt (dao.TaskClaimQueued; dao.TaskClaimQueuedUnpooled when the database knows no
// pool, pooled false). It claims as a worker alone in its groups: see ClaimShare.
func Claim(ctx context.Context, db *dao.DB, worker string, groups []string, limit int, pooled bool) ([]dao.TaskInstance, error) {
	return ClaimShare(ctx, db, worker, groups, limit, pooled, dao.Share{})
}

// ClaimShare is Claim by a worker beside others: while they have free slots it takes no more
// than its share of a burst, so that a burst spreads over the workers instead of all running
// on the first to look (dao.TaskClaimQueuedShare, dao.Share).
func ClaimShare(ctx context.Context, db *dao.DB, worker string, groups []string, limit int, pooled bool, share dao.Share) ([]dao.TaskInstance, error) {
	if !pooled {
		return db.TaskClaimQueuedUnpooledShare(ctx, worker, groups, limit, share)
	}
	return db.TaskClaimQueuedShare(ctx, worker, groups, limit, share)
}

// Next is the rule of an attempt's end: the state a task instance t goes to when an attempt
// of it ended with outcome o, and whether the attempt counts against its retries. A failure
// or a timeout is retried while the task has retries left (EndOf adds its retry policy);
// a hand-back or an interruption goes back to the queue without counting; a kill ends it; an
// agent paused at a wait step waits for its signal, without counting either. A task whose
// kill was requested is never queued again nor waits: the statement that records the end
// makes queued and waiting killed (dao.TaskFinishManyIfRunning).
func Next(t *dao.TaskInstance, o dao.Outcome) (next dao.TaskState, retry bool) {
	switch o {
	case dao.OutcomeSucceeded:
		return dao.TaskSucceeded, false
	case dao.OutcomeKilled:
		return dao.TaskKilled, false
	case dao.OutcomePaused:
		return dao.TaskWaiting, false
	case dao.OutcomeHandedBack, dao.OutcomeInterrupted, dao.OutcomeFailedOver:
		return dao.TaskQueued, false
	}
	if t.Retries < t.MaxRetries {
		return dao.TaskQueued, true
	}
	return dao.TaskFailed, false
}

// Ending is the rule of an attempt's end applied to one attempt (EndOf).
type Ending struct {
	// Next is the task's next state, Retry whether the attempt counts against its retries:
	// those of Next, unless the retry policy refuses the failure.
	Next  dao.TaskState
	Retry bool
	// Wait is the wait before the retry Retry takes: the task's retry interval, or the
	// step of its retry-backoff.
	Wait time.Duration
	// Refused says why a failure with retries left is not retried ("exit 3 is not in
	// retry-on"); the task fails at once. "" otherwise.
	Refused string
}

// EndOf is the rule of an attempt's end with the task's retry policy p (nil: a fixed
// interval, every failure retried): Next, then, for a failure or a timeout with retries left,
// whether p retries failure f, and the wait before retry t.Retries+1 (workflow.RetryPolicy:
// rnd draws its jitter, in [0, 1)). A refused failure fails the task at once.
func EndOf(t *dao.TaskInstance, p *workflow.RetryPolicy, o dao.Outcome, f workflow.Failure, rnd func() float64) Ending {
	next, retry := Next(t, o)
	if !retry {
		return Ending{Next: next}
	}
	if why := p.Refusal(f); why != "" {
		return Ending{Next: dao.TaskFailed, Refused: why}
	}
	return Ending{Next: next, Retry: true, Wait: p.Wait(t.RetryInterval(), t.Retries+1, rnd)}
}

// Finish is the transition "attempt ended" for many attempts at once: each task moves to its
// result's next state (Next) if it still runs under the result's token
// (dao.TaskFinishManyIfRunning). A task whose end ends a single-task workflow ends the
// workflow instance in the same statement.
func Finish(ctx context.Context, db *dao.DB, fins []dao.Finish) ([]dao.Finished, error) {
	return db.TaskFinishManyIfRunning(ctx, fins)
}

// HandBack is the transition "handed back": a task running under tok, which its worker
// claimed but will not run, goes back to the queue with outcome interrupted, not counted as a
// retry (dao.TaskFinishIfRunning). It returns dao.ErrTokenRefused when the task no longer
// runs under tok.
func HandBack(ctx context.Context, db *dao.DB, tok dao.Token, reason string) error {
	next, retry := Next(&dao.TaskInstance{}, dao.OutcomeInterrupted)
	return db.TaskFinishIfRunning(ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeInterrupted, Next: next, Retry: retry, Error: reason})
}

// RequeueLostWorker is the leader's transition "failed over" for a fenced worker: its running
// tasks go back to the queue, or end killed where a kill was requested
// (dao.TaskRequeueIfRunningOnWorker). Call it only for a fenced identity, in the transaction
// that records the failover.
func RequeueLostWorker(ctx context.Context, q *dao.Queries, worker string) (int, error) {
	return q.TaskRequeueIfRunningOnWorker(ctx, worker)
}

// ReleaseLostMaster is the leader's transition "released" for a fenced master: its unfinished
// workflow instances lose their owner, for another master to continue
// (dao.WorkflowReleaseIfOwnedBy). Call it only for a fenced identity, in the transaction that
// records the failover.
func ReleaseLostMaster(ctx context.Context, q *dao.Queries, master string) (int, error) {
	return q.WorkflowReleaseIfOwnedBy(ctx, master)
}
