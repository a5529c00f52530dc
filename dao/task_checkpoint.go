package dao

import (
	"context"
	"encoding/json"
	"fmt"
)

// CheckpointSaveIfRunning records that an agent task's step finished with output (usage is
// the step's token usage, JSON), only while tok still holds the task: a stale attempt's
// checkpoint is refused with ErrTokenRefused. The task row is share-locked, so a failover
// that requeues the task at the same moment either comes first (and the write is refused) or
// waits for it. Saving a step again under the same token (a
// retry after an error that left the first write's fate unknown) replaces it. A new attempt
// reads the checkpoints with CheckpointListForTask and goes on from the first step without
// one.
func (q *Queries) CheckpointSaveIfRunning(ctx context.Context, tok Token, step, output string, usage json.RawMessage) error {
	if len(usage) == 0 {
		usage = json.RawMessage("{}")
	}
	rows, err := q.q.QueryContext(ctx, `
		INSERT INTO task_checkpoint (task_instance_id, step, attempt, output, usage)
		SELECT id, $4, attempt, $5, $6::jsonb FROM task_instance
		WHERE id = $1 AND worker_id = $2 AND attempt = $3 AND state = 'running'
		FOR SHARE
		ON CONFLICT (task_instance_id, step) DO UPDATE
			SET attempt = EXCLUDED.attempt, output = EXCLUDED.output, usage = EXCLUDED.usage, created_at = now()
		RETURNING step`, tok.TaskID, tok.WorkerID, tok.Attempt, step, output, string(usage))
	if err != nil {
		return fmt.Errorf("checkpoint step %q of task %d attempt %d: %w", step, tok.TaskID, tok.Attempt, err)
	}
	return expectOneRow(rows, tok)
}
