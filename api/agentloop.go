package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// agentLoopJSON is a tool-calling agent's conversation: each turn the model answered and the
// tool calls it asked for, with what became of each.
type agentLoopJSON struct {
	Turns []turnJSON `json:"turns"`
}

// turnJSON is one answered model call.
type turnJSON struct {
	Turn int `json:"turn"`
	// Attempt is the attempt that sent the turn to the model; a later attempt replayed it.
	Attempt   int        `json:"attempt"`
	Text      string     `json:"text"`
	Usage     tokenUsage `json:"usage"`
	CreatedAt time.Time  `json:"created_at"`
	Calls     []callJSON `json:"tool_calls"`
	// Final says this turn's text is the task's answer: it called no tool.
	Final bool `json:"final"`
}

// callJSON is one tool call the model asked for.
type callJSON struct {
	Seq       int    `json:"seq"`
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
	// State is started, ended or interrupted as stored; pending when the call has not
	// started: awaiting approval, or not reached yet.
	State string `json:"state"`
	// Starts is how many times the call started: more than 1 when it was run again after an
	// interruption.
	Starts       int        `json:"starts"`
	Attempt      int        `json:"attempt,omitempty"`
	EndedAttempt *int       `json:"ended_attempt,omitempty"`
	Result       *string    `json:"result,omitempty"`
	IsError      bool       `json:"is_error"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	// Review is what a person said of the call: "approved", "rejected: TEXT" ("rejected"
	// without a text), or for an interrupted call "took effect: TEXT"; empty when nobody was
	// asked.
	Review string `json:"review,omitempty"`
	// Reviewer is who gave that word, as the audit trail names them (a user, an API token's
	// name, cli:<os user>), and ReviewedAt when; absent when the trail holds no row of it.
	Reviewer   string     `json:"reviewer,omitempty"`
	ReviewedAt *time.Time `json:"reviewed_at,omitempty"`
	// Waiting says the task waits for a person's word on this call now.
	Waiting string `json:"waiting,omitempty"`
}

// Duration is how long an ended call ran.
func (c callJSON) Duration() time.Duration {
	if c.StartedAt == nil || c.EndedAt == nil {
		return 0
	}
	return c.EndedAt.Sub(*c.StartedAt).Round(time.Millisecond)
}

// storedTurn is agent_turn.response.
type storedTurn struct {
	Text      string `json:"text"`
	ToolCalls []struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"tool_calls"`
}

// loadAgentLoop reads the conversation of task id, nil when it has none (not a tool-calling
// agent, or no turn answered yet). cps are the task's checkpoints, which hold people's words
// on its calls, and the audit trail's signals of the task say who gave them; paused is the
// step it waits at, if any.
func (s *Server) loadAgentLoop(ctx context.Context, id int64, cps []dao.Checkpoint, paused *string) (*agentLoopJSON, error) {
	turns, calls, err := s.db.AgentLoopForTask(ctx, id)
	if err != nil || len(turns) == 0 {
		return nil, err
	}
	stored := make(map[[2]int]dao.ToolCall, len(calls))
	for _, c := range calls {
		stored[[2]int{c.Turn, c.Seq}] = c
	}
	words := make(map[string]string, len(cps))
	for _, cp := range cps {
		words[cp.Step] = cp.Output
	}
	signals, err := s.db.AuditStepSignals(ctx, id)
	if err != nil {
		return nil, err
	}
	// The last signal of a step is the one whose word the checkpoint holds.
	signalled := make(map[string]dao.StepSignal, len(signals))
	for _, sig := range signals {
		signalled[sig.Step] = sig
	}
	out := &agentLoopJSON{Turns: make([]turnJSON, 0, len(turns))}
	for _, tr := range turns {
		var resp storedTurn
		if err := json.Unmarshal(tr.Response, &resp); err != nil {
			return nil, fmt.Errorf("turn %d of task %d: %w", tr.Turn, id, err)
		}
		tj := turnJSON{Turn: tr.Turn, Attempt: tr.Attempt, Text: resp.Text, Usage: parseUsage(tr.Usage), CreatedAt: tr.CreatedAt,
			Calls: make([]callJSON, 0, len(resp.ToolCalls)), Final: len(resp.ToolCalls) == 0}
		for i, asked := range resp.ToolCalls {
			seq := i + 1
			cj := callJSON{Seq: seq, CallID: workflow.ToolCallID(id, tr.Turn, seq), Tool: asked.Name, Arguments: asked.Arguments, State: "pending"}
			if c, ok := stored[[2]int{tr.Turn, seq}]; ok {
				cj.CallID, cj.State, cj.Starts, cj.Attempt, cj.EndedAttempt = c.CallID, c.State, c.Starts, c.Attempt, c.EndedAttempt
				cj.Result, cj.IsError, cj.EndedAt = c.Result, c.IsError, c.EndedAt
				started := c.StartedAt
				cj.StartedAt = &started
			}
			key := fmt.Sprintf("%d.%d", tr.Turn, seq)
			// An approval and a rejection end the wait at tool-approval:T.S; a word on an
			// interrupted call ends the one at tool-call:T.S.
			wait := "tool-approval:" + key
			switch {
			case hasStep(cps, "tool-rejection:"+key):
				cj.Review = "rejected"
				if why := words["tool-rejection:"+key]; why != "" {
					cj.Review += ": " + why
				}
			case hasStep(cps, "tool-approval:"+key):
				cj.Review = "approved"
			case hasStep(cps, "tool-call:"+key):
				cj.Review = "took effect: " + words["tool-call:"+key]
				wait = "tool-call:" + key
			}
			if sig, ok := signalled[wait]; ok && cj.Review != "" {
				at := sig.At
				cj.Reviewer, cj.ReviewedAt = sig.Actor, &at
			}
			if paused != nil && *paused == "tool-child:"+cj.CallID {
				cj.Waiting = "its child workflow to end"
			}
			if paused != nil && strings.HasSuffix(*paused, ":"+key) {
				switch {
				case strings.HasPrefix(*paused, "tool-approval:"):
					cj.Waiting = "approval"
				case strings.HasPrefix(*paused, "tool-call:"):
					cj.Waiting = "a person to say whether it took effect"
				}
			}
			tj.Calls = append(tj.Calls, cj)
		}
		out.Turns = append(out.Turns, tj)
	}
	return out, nil
}

func hasStep(cps []dao.Checkpoint, step string) bool {
	for _, cp := range cps {
		if cp.Step == step {
			return true
		}
	}
	return false
}
