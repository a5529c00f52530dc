package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/retry"
	"github.com/zksched/zksched/worker/executor"
	"github.com/zksched/zksched/worker/llm"
)

// checkpoints is the executor.Checkpointer of one attempt: an agent's finished steps in
// task_checkpoint, each write under the attempt's fencing token.
type checkpoints struct {
	db  *dao.DB
	tok dao.Token
	// refused stops the attempt when a write is refused: the task is no longer ours.
	refused  func()
	hardStop <-chan struct{}
	// mask masks the worker's secrets in the model text stored.
	mask *masker
	// clock times the retries.
	clock clockwork.Clock
}

// Load implements executor.Checkpointer.
func (c *checkpoints) Load(ctx context.Context) (map[string]executor.Checkpoint, error) {
	rows, err := c.db.CheckpointListForTask(ctx, c.tok.TaskID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]executor.Checkpoint, len(rows))
	for _, r := range rows {
		var u llm.Usage
		if len(r.Usage) > 0 {
			if err := json.Unmarshal(r.Usage, &u); err != nil {
				return nil, fmt.Errorf("checkpoint of step %q: usage %s: %w", r.Step, r.Usage, err)
			}
		}
		out[r.Step] = executor.Checkpoint{Output: r.Output, Usage: u, Attempt: r.Attempt}
	}
	return out, nil
}

// Save implements executor.Checkpointer. A step's output was paid for, so it retries while
// the database is unreachable, until the attempt is stopped; a refused token stops the
// attempt at once.
func (c *checkpoints) Save(ctx context.Context, step string, cp executor.Checkpoint) error {
	usage, err := json.Marshal(cp.Usage)
	if err != nil {
		return err
	}
	backoff := dbRetry.Backoff()
	for {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.db.CheckpointSaveIfRunning(wctx, c.tok, step, c.mask.String(cp.Output), usage)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, dao.ErrTokenRefused):
			c.refused()
			return err
		case ctx.Err() != nil || !dao.IsUnavailable(err):
			return err
		}
		if retry.Sleep(ctx, c.clock, backoff.Next(), c.hardStop) != nil {
			return err
		}
	}
}

// dbRetry is the backoff of a worker's writes that must not be dropped while the database
// is unreachable (an attempt's result, an agent's checkpoint): 100 ms doubling up to 5 s.
var dbRetry = retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}

// usageJSON is the stored form of a usage; nil for none.
func usageJSON(u *llm.Usage) json.RawMessage {
	if u == nil {
		return nil
	}
	raw, err := json.Marshal(u)
	if err != nil {
		return nil
	}
	return raw
}
