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
	"github.com/zksched/zksched/lifecycle"
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
	return c.write(ctx, func(ctx context.Context) error {
		return c.db.CheckpointSaveIfRunning(ctx, c.tok, step, c.mask.String(cp.Output), usage)
	})
}

// write runs one write of the attempt's, retrying while the database is unreachable until
// the attempt is stopped; a refused token stops the attempt at once.
func (c *checkpoints) write(ctx context.Context, do func(context.Context) error) error {
	backoff := dbRetry.Backoff()
	for {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := do(wctx)
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

// loopStore is the executor.LoopStore of one attempt: a tool-calling agent's turns and tool
// calls in agent_turn and tool_call, each write under the attempt's fencing token. It shares
// the checkpoints' retries and refusal: a turn was paid for and a call's effect happened, so
// their records are retried while the database is unreachable.
type loopStore struct{ c *checkpoints }

// Load implements executor.LoopStore.
func (l loopStore) Load(ctx context.Context) ([]executor.Turn, []executor.ToolCall, error) {
	rows, calls, err := l.c.db.AgentLoopForTask(ctx, l.c.tok.TaskID)
	if err != nil {
		return nil, nil, err
	}
	turns := make([]executor.Turn, len(rows))
	for i, r := range rows {
		var resp storedResponse
		if err := json.Unmarshal(r.Response, &resp); err != nil {
			return nil, nil, fmt.Errorf("turn %d: response %s: %w", r.Turn, r.Response, err)
		}
		var u llm.Usage
		if len(r.Usage) > 0 {
			if err := json.Unmarshal(r.Usage, &u); err != nil {
				return nil, nil, fmt.Errorf("turn %d: usage %s: %w", r.Turn, r.Usage, err)
			}
		}
		turns[i] = executor.Turn{Turn: r.Turn, Digest: r.RequestDigest, Attempt: r.Attempt,
			Response: llm.Response{Text: resp.Text, ToolCalls: resp.ToolCalls, Usage: u}}
	}
	out := make([]executor.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = executor.ToolCall{Turn: c.Turn, Seq: c.Seq, ID: c.CallID, Tool: c.Tool, Arguments: c.Arguments,
			State: c.State, IsError: c.IsError, Attempt: c.Attempt, Starts: c.Starts}
		if c.Result != nil {
			out[i].Result = *c.Result
		}
	}
	return turns, out, nil
}

// storedResponse is a turn's answer as agent_turn.response holds it.
type storedResponse struct {
	Text      string         `json:"text"`
	ToolCalls []llm.ToolCall `json:"tool_calls,omitempty"`
}

// SaveTurn implements executor.LoopStore.
func (l loopStore) SaveTurn(ctx context.Context, t executor.Turn) error {
	resp, err := json.Marshal(storedResponse{Text: l.c.mask.String(t.Response.Text), ToolCalls: t.Response.ToolCalls})
	if err != nil {
		return err
	}
	usage, err := json.Marshal(t.Response.Usage)
	if err != nil {
		return err
	}
	return l.c.write(ctx, func(ctx context.Context) error {
		return l.c.db.AgentTurnSaveIfRunning(ctx, l.c.tok, t.Turn, t.Digest, resp, usage)
	})
}

// StartCall implements executor.LoopStore.
func (l loopStore) StartCall(ctx context.Context, c executor.ToolCall) error {
	return l.c.write(ctx, func(ctx context.Context) error {
		return l.c.db.ToolCallStartIfRunning(ctx, l.c.tok, l.row(c))
	})
}

// EndCall implements executor.LoopStore.
func (l loopStore) EndCall(ctx context.Context, c executor.ToolCall) error {
	result := l.c.mask.String(c.Result)
	return l.c.write(ctx, func(ctx context.Context) error {
		return l.c.db.ToolCallEndIfRunning(ctx, l.c.tok, l.row(c), result, c.IsError)
	})
}

// InterruptCall implements executor.LoopStore.
func (l loopStore) InterruptCall(ctx context.Context, c executor.ToolCall) error {
	return l.c.write(ctx, func(ctx context.Context) error {
		return l.c.db.ToolCallInterruptIfRunning(ctx, l.c.tok, l.row(c))
	})
}

func (l loopStore) row(c executor.ToolCall) dao.ToolCall {
	return dao.ToolCall{Turn: c.Turn, Seq: c.Seq, CallID: c.ID, Tool: c.Tool, Arguments: l.c.mask.String(c.Arguments)}
}

// toolChildren is the executor.Children of one attempt: the children of a tool-calling
// agent's workflow tools, started under the attempt's token (lifecycle.StartToolChild) and
// looked at while they run.
type toolChildren struct{ c *checkpoints }

// childPoll is how often an agent's call looks again at its child while the database is away.
const childPoll = 500 * time.Millisecond

// Start implements executor.Children.
func (tc toolChildren) Start(ctx context.Context, c executor.ToolCall, name string, version int, params map[string]string) (int64, error) {
	var child int64
	err := tc.c.write(ctx, func(ctx context.Context) error {
		var err error
		child, err = lifecycle.StartToolChild(ctx, tc.c.db, tc.c.tok, c.ID, name, version, params)
		return err
	})
	var refused *lifecycle.ToolChildError
	var paramsErr *lifecycle.ParamsError
	switch {
	case errors.As(err, &refused):
		return 0, &executor.ChildRefused{Msg: refused.Msg}
	case errors.As(err, &paramsErr):
		return 0, &executor.ChildRefused{Msg: "the arguments are refused as the child's params: " + paramsErr.Error()}
	}
	return child, err
}

// End implements executor.Children. A database away is waited for, as the attempt's other
// writes are.
func (tc toolChildren) End(ctx context.Context, child int64) (executor.ChildEnd, error) {
	for {
		ended, state, output, errMsg, err := lifecycle.ToolChildResult(ctx, tc.c.db, child)
		switch {
		case err != nil && (ctx.Err() != nil || !dao.IsUnavailable(err)):
			return executor.ChildEnd{}, err
		case err == nil:
			return executor.ChildEnd{Ended: ended, Succeeded: state == dao.WorkflowSucceeded, Output: output, Error: errMsg}, nil
		}
		if err := retry.Sleep(ctx, tc.c.clock, childPoll, tc.c.hardStop); err != nil {
			return executor.ChildEnd{}, err
		}
	}
}
