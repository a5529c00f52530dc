package dao

import (
	"context"
	"fmt"
)

// AttemptList returns the attempts of a task instance, oldest first.
func (q *Queries) AttemptList(ctx context.Context, taskID int64) ([]TaskAttempt, error) {
	var as []TaskAttempt
	if err := sqlxSelect(ctx, q, &as, `SELECT task_instance_id, attempt, worker_id, started_at, ended_at,
		outcome, exit_code, error, usage FROM task_attempt WHERE task_instance_id = $1 ORDER BY attempt`, taskID); err != nil {
		return nil, fmt.Errorf("list attempts of task %d: %w", taskID, err)
	}
	return as, nil
}

// AttemptOutcome reads the outcome recorded for the attempt tok held: nil while the attempt
// has none (it runs, or its worker never reported). A worker whose finish failed with an
// unknown result (the connection lost mid-commit, a PostgreSQL switchover) reads it back when
// its retry is refused, to tell its own earlier commit from a failover's.
func (q *Queries) AttemptOutcome(ctx context.Context, tok Token) (*Outcome, error) {
	var o []*Outcome
	if err := sqlxSelect(ctx, q, &o, `SELECT outcome FROM task_attempt
		WHERE task_instance_id = $1 AND attempt = $2 AND worker_id = $3`, tok.TaskID, tok.Attempt, tok.WorkerID); err != nil {
		return nil, fmt.Errorf("read the outcome of task %d attempt %d: %w", tok.TaskID, tok.Attempt, err)
	}
	if len(o) == 0 {
		return nil, nil
	}
	return o[0], nil
}
