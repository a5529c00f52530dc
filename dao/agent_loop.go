package dao

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// AgentTurn is a row of agent_turn: one answered model call of a tool-calling agent.
type AgentTurn struct {
	Turn          int             `db:"turn" json:"turn"`
	Attempt       int             `db:"attempt" json:"attempt"`
	RequestDigest string          `db:"request_digest" json:"request_digest"`
	Response      json.RawMessage `db:"response" json:"response"`
	Usage         json.RawMessage `db:"usage" json:"usage"`
	CreatedAt     time.Time       `db:"created_at" json:"created_at"`
}

// ToolCall is a row of tool_call: one call a tool-calling agent's model asked for, by turn
// and position in the turn.
type ToolCall struct {
	Turn      int    `db:"turn" json:"turn"`
	Seq       int    `db:"seq" json:"seq"`
	CallID    string `db:"call_id" json:"call_id"`
	Tool      string `db:"tool" json:"tool"`
	Arguments string `db:"arguments" json:"arguments"`
	// State is ToolCallStarted, ToolCallEnded or ToolCallInterrupted.
	State string `db:"state" json:"state"`
	// Attempt is the attempt that started the call last; Starts how many times it started.
	Attempt      int        `db:"attempt" json:"attempt"`
	Starts       int        `db:"starts" json:"starts"`
	Result       *string    `db:"result" json:"result,omitempty"`
	IsError      bool       `db:"is_error" json:"is_error"`
	EndedAttempt *int       `db:"ended_attempt" json:"ended_attempt,omitempty"`
	StartedAt    time.Time  `db:"started_at" json:"started_at"`
	EndedAt      *time.Time `db:"ended_at" json:"ended_at,omitempty"`
}

// The states of a tool call.
const (
	ToolCallStarted     = "started"
	ToolCallEnded       = "ended"
	ToolCallInterrupted = "interrupted"
)

// AgentTurnSaveIfRunning records turn of a tool-calling agent, answered with response (usage
// is its token usage, JSON), only while tok holds the task, like CheckpointSaveIfRunning. A
// turn saved again under the same token (a retry after an error that left the first write's
// fate unknown) replaces it.
func (q *Queries) AgentTurnSaveIfRunning(ctx context.Context, tok Token, turn int, digest string, response, usage json.RawMessage) error {
	if len(usage) == 0 {
		usage = json.RawMessage("{}")
	}
	rows, err := q.q.QueryContext(ctx, `
		INSERT INTO agent_turn (task_instance_id, turn, attempt, request_digest, response, usage)
		SELECT id, $4, attempt, $5, $6::jsonb, $7::jsonb FROM task_instance
		WHERE id = $1 AND worker_id = $2 AND attempt = $3 AND state = 'running'
		FOR SHARE
		ON CONFLICT (task_instance_id, turn) DO UPDATE
			SET attempt = EXCLUDED.attempt, request_digest = EXCLUDED.request_digest,
				response = EXCLUDED.response, usage = EXCLUDED.usage, created_at = now()
		RETURNING turn`, tok.TaskID, tok.WorkerID, tok.Attempt, turn, digest, string(response), string(usage))
	if err != nil {
		return fmt.Errorf("save turn %d of task %d attempt %d: %w", turn, tok.TaskID, tok.Attempt, err)
	}
	return expectOneRow(rows, tok)
}

// ToolCallStartIfRunning records that the call at (turn, seq) is about to run, only while tok
// holds the task: nothing may run a tool's call unless this returned nil first. A call that
// started before (an interrupted one run again under its retry policy, or by a person's word)
// is started again, counting its starts; an ended call is never started again: starting one
// is ErrToolCallState. A token that no longer holds the task is ErrTokenRefused.
func (q *Queries) ToolCallStartIfRunning(ctx context.Context, tok Token, c ToolCall) error {
	var state []string
	err := sqlxSelect(ctx, q, &state, `
		WITH ti AS (
			SELECT id, attempt FROM task_instance
			WHERE id = $1 AND worker_id = $2 AND attempt = $3 AND state = 'running'
			FOR SHARE
		)
		INSERT INTO tool_call (task_instance_id, turn, seq, call_id, tool, arguments, state, attempt)
		SELECT id, $4, $5, $6, $7, $8, 'started', attempt FROM ti
		ON CONFLICT (task_instance_id, turn, seq) DO UPDATE
			SET state = 'started', attempt = EXCLUDED.attempt, starts = tool_call.starts + 1,
				started_at = now(), result = NULL, is_error = false, ended_attempt = NULL, ended_at = NULL
			WHERE tool_call.state <> 'ended'
		RETURNING state`, tok.TaskID, tok.WorkerID, tok.Attempt, c.Turn, c.Seq, c.CallID, c.Tool, c.Arguments)
	if err != nil {
		return fmt.Errorf("start tool call %s of task %d attempt %d: %w", c.CallID, tok.TaskID, tok.Attempt, err)
	}
	if len(state) == 1 {
		return nil
	}
	return q.toolCallRefusal(ctx, tok, c)
}

// ToolCallEndIfRunning records the result of the call at (turn, seq), only while tok holds
// the task and the call is started, or interrupted (a person told its result).
func (q *Queries) ToolCallEndIfRunning(ctx context.Context, tok Token, c ToolCall, result string, isError bool) error {
	var ended []int
	err := sqlxSelect(ctx, q, &ended, `
		WITH ti AS (
			SELECT id FROM task_instance
			WHERE id = $1 AND worker_id = $2 AND attempt = $3 AND state = 'running'
			FOR SHARE
		)
		UPDATE tool_call tc SET state = 'ended', result = $6, is_error = $7, ended_attempt = $3, ended_at = now()
		FROM ti WHERE tc.task_instance_id = ti.id AND tc.turn = $4 AND tc.seq = $5 AND tc.state IN ('started', 'interrupted')
		RETURNING tc.seq`, tok.TaskID, tok.WorkerID, tok.Attempt, c.Turn, c.Seq, result, isError)
	if err != nil {
		return fmt.Errorf("end tool call %s of task %d attempt %d: %w", c.CallID, tok.TaskID, tok.Attempt, err)
	}
	if len(ended) == 1 {
		return nil
	}
	return q.toolCallRefusal(ctx, tok, c)
}

// ToolCallInterruptIfRunning marks the started call at (turn, seq) interrupted, its fate for a
// person to tell, only while tok holds the task.
func (q *Queries) ToolCallInterruptIfRunning(ctx context.Context, tok Token, c ToolCall) error {
	var n []int
	err := sqlxSelect(ctx, q, &n, `
		WITH ti AS (
			SELECT id FROM task_instance
			WHERE id = $1 AND worker_id = $2 AND attempt = $3 AND state = 'running'
			FOR SHARE
		)
		UPDATE tool_call tc SET state = 'interrupted'
		FROM ti WHERE tc.task_instance_id = ti.id AND tc.turn = $4 AND tc.seq = $5 AND tc.state IN ('started', 'interrupted')
		RETURNING tc.seq`, tok.TaskID, tok.WorkerID, tok.Attempt, c.Turn, c.Seq)
	if err != nil {
		return fmt.Errorf("mark tool call %s of task %d interrupted: %w", c.CallID, tok.TaskID, err)
	}
	if len(n) == 1 {
		return nil
	}
	return q.toolCallRefusal(ctx, tok, c)
}

// ErrToolCallState is returned for a write to a tool call that is not in the state the write
// needs (ending one that is not started, starting one that ended), while the token holds.
var ErrToolCallState = errors.New("the tool call is not in the state this write needs")

// toolCallRefusal tells why a write to c changed nothing: the token no longer holds the task
// (ErrTokenRefused), or the call was not in the state the write needed.
func (q *Queries) toolCallRefusal(ctx context.Context, tok Token, c ToolCall) error {
	var held []bool
	if err := sqlxSelect(ctx, q, &held, `SELECT true FROM task_instance
		WHERE id = $1 AND worker_id = $2 AND attempt = $3 AND state = 'running'`, tok.TaskID, tok.WorkerID, tok.Attempt); err != nil {
		return fmt.Errorf("tool call %s of task %d: %w", c.CallID, tok.TaskID, err)
	}
	if len(held) == 0 {
		return fmt.Errorf("task %d attempt %d of %s: %w", tok.TaskID, tok.Attempt, tok.WorkerID, ErrTokenRefused)
	}
	return fmt.Errorf("tool call %s (turn %d, #%d) of task %d: %w", c.CallID, c.Turn, c.Seq, tok.TaskID, ErrToolCallState)
}

// AgentLoopForTask returns a tool-calling agent's turns and tool calls, each in order.
func (q *Queries) AgentLoopForTask(ctx context.Context, taskID int64) ([]AgentTurn, []ToolCall, error) {
	var turns []AgentTurn
	if err := sqlxSelect(ctx, q, &turns, `SELECT turn, attempt, request_digest, response, usage, created_at
		FROM agent_turn WHERE task_instance_id = $1 ORDER BY turn`, taskID); err != nil {
		return nil, nil, fmt.Errorf("list turns of task %d: %w", taskID, err)
	}
	var calls []ToolCall
	if err := sqlxSelect(ctx, q, &calls, `SELECT turn, seq, call_id, tool, arguments, state, attempt, starts,
			result, is_error, ended_attempt, started_at, ended_at
		FROM tool_call WHERE task_instance_id = $1 ORDER BY turn, seq`, taskID); err != nil {
		return nil, nil, fmt.Errorf("list tool calls of task %d: %w", taskID, err)
	}
	return turns, calls, nil
}

// ToolChildOfCall returns the child instance the tool call callID of task started, if any.
func (q *Queries) ToolChildOfCall(ctx context.Context, task int64, callID string) (int64, bool, error) {
	var ids []int64
	if err := sqlxSelect(ctx, q, &ids, `SELECT id FROM workflow_instance
		WHERE parent_task_instance_id = $1 AND parent_call_id = $2`, task, callID); err != nil {
		return 0, false, fmt.Errorf("child of tool call %s of task %d: %w", callID, task, err)
	}
	if len(ids) == 0 {
		return 0, false, nil
	}
	return ids[0], true, nil
}

// ToolChildLinkIfRunning links child, just created in q's transaction, to the tool call
// callID of the task tok holds, only while tok holds it; otherwise ErrTokenRefused, and the
// caller rolls the child back.
func (q *Queries) ToolChildLinkIfRunning(ctx context.Context, tok Token, child int64, callID string) error {
	rows, err := q.q.QueryContext(ctx, `
		WITH ti AS (
			SELECT id, workflow_instance_id FROM task_instance
			WHERE id = $1 AND worker_id = $2 AND attempt = $3 AND state = 'running'
			FOR SHARE
		)
		UPDATE workflow_instance c SET parent_task_instance_id = ti.id, parent_workflow_instance_id = ti.workflow_instance_id,
			parent_call_id = $5
		FROM ti WHERE c.id = $4
		RETURNING c.id`, tok.TaskID, tok.WorkerID, tok.Attempt, child, callID)
	if err != nil {
		return fmt.Errorf("link child %d to tool call %s: %w", child, callID, err)
	}
	return expectOneRow(rows, tok)
}

// resumeIfToolChildEndedSQL is TaskResumeIfToolChildEnded's statement: $1 the task, or NULL
// for any, $2 how many at most. The children are locked before their state is read: a
// transaction ending one holds its row until it commits, and its resume of the agent
// (TaskEndIfChildEnded) may have run before the agent's pause was written; waiting for it
// here, the end is seen.
const resumeIfToolChildEndedSQL = `
		WITH p AS (
			SELECT ti.id, substr(ti.paused_step, length('tool-child:') + 1) AS call_id FROM task_instance ti
			WHERE ti.state = 'waiting' AND ti.paused_step LIKE 'tool-child:%' AND ($1::bigint IS NULL OR ti.id = $1)
			ORDER BY ti.id LIMIT $2
		), c AS (
			SELECT p.id, c.state FROM p
			JOIN workflow_instance c ON c.parent_task_instance_id = p.id AND c.parent_call_id = p.call_id
			FOR SHARE OF c
		), t AS (
			UPDATE task_instance ti SET state = 'queued', queued_at = now(), paused_step = NULL, wait_until = NULL
			FROM c WHERE ti.id = c.id AND c.state IN ('succeeded', 'failed', 'stopped')
			  AND ti.state = 'waiting' AND ti.paused_step LIKE 'tool-child:%'
			RETURNING ti.worker_group
		)
		SELECT worker_group FROM t`

// TaskResumeIfToolChildEnded queues again the agents waiting for the child of a workflow
// tool's call (paused step tool-child:CALL) whose child has ended: task, or (0) at most limit
// of any. A child's end resumes its agent by itself (TaskEndIfChildEnded); this catches an end
// that came while the agent was pausing, which the worker that paused it looks for at once and
// the masters at each poll. It wakes the workers of the tasks' groups and returns how many it
// queued.
func (q *Queries) TaskResumeIfToolChildEnded(ctx context.Context, task int64, limit int) (int, error) {
	var id *int64
	if task != 0 {
		id = &task
	}
	var groups []string
	if err := sqlxSelect(ctx, q, &groups, resumeIfToolChildEndedSQL, id, limit); err != nil {
		return 0, fmt.Errorf("resume the agents whose tool's child ended: %w", err)
	}
	q.wakeGroups(groups)
	return len(groups), nil
}
