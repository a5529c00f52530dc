package dao

import (
	"context"
	"fmt"
	"strings"
)

// TaskLogAppendIfRunning stores one chunk of an attempt's output, only while tok still holds
// the task: a stale attempt's late output is refused with ErrTokenRefused.
func (q *Queries) TaskLogAppendIfRunning(ctx context.Context, tok Token, seq int, data string) error {
	rows, err := q.q.QueryContext(ctx, `
		INSERT INTO task_log (task_instance_id, attempt, seq, data)
		SELECT id, attempt, $4, $5 FROM task_instance
		WHERE id = $1 AND worker_id = $2 AND attempt = $3 AND state = 'running'
		RETURNING seq`, tok.TaskID, tok.WorkerID, tok.Attempt, seq, data)
	if err != nil {
		return fmt.Errorf("append log of task %d attempt %d: %w", tok.TaskID, tok.Attempt, err)
	}
	return expectOneRow(rows, tok)
}

// TaskLogRead returns an attempt's whole stored log.
func (q *Queries) TaskLogRead(ctx context.Context, taskID int64, attempt int) (string, error) {
	var chunks []string
	if err := sqlxSelect(ctx, q, &chunks, `SELECT data FROM task_log
		WHERE task_instance_id = $1 AND attempt = $2 ORDER BY seq`, taskID, attempt); err != nil {
		return "", fmt.Errorf("read log of task %d attempt %d: %w", taskID, attempt, err)
	}
	return strings.Join(chunks, ""), nil
}
