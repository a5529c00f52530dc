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
