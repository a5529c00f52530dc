package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
)

// TestAgentConversationIsShown: a tool-calling agent's turns and calls, as the worker stores
// them, come back in the task's JSON and on its page: each call's state, result and starts,
// and the call the task waits to have approved.
func TestAgentConversationIsShown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	id := f.byName["t3"]
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE task_instance SET type = 'agent' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	tok := dao.Token{TaskID: id, WorkerID: "w1", Attempt: 1}
	turn1 := json.RawMessage(`{"text": "", "tool_calls": [{"id": "call_1", "name": "lookup", "arguments": "{\"host\":\"db-1\"}"}]}`)
	turn2 := json.RawMessage(`{"text": "paging", "tool_calls": [{"id": "call_2", "name": "page", "arguments": "{\"team\":\"data\"}"}]}`)
	lookup := dao.ToolCall{Turn: 1, Seq: 1, CallID: fmt.Sprintf("zk-%d-1-1", id), Tool: "lookup", Arguments: `{"host":"db-1"}`}
	for _, step := range []func() error{
		func() error {
			return b.db.AgentTurnSaveIfRunning(b.ctx, tok, 1, "d1", turn1, json.RawMessage(`{"total_tokens": 12, "prompt_tokens": 10, "completion_tokens": 2}`))
		},
		func() error { return b.db.ToolCallStartIfRunning(b.ctx, tok, lookup) },
		func() error { return b.db.ToolCallStartIfRunning(b.ctx, tok, lookup) },
		func() error { return b.db.ToolCallEndIfRunning(b.ctx, tok, lookup, "db-1 is <up>", false) },
		func() error { return b.db.AgentTurnSaveIfRunning(b.ctx, tok, 2, "d2", turn2, nil) },
		func() error {
			return b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomePaused, Next: dao.TaskWaiting,
				PausedStep: "tool-approval:2.1"})
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	var task struct {
		AgentLoop struct {
			Turns []struct {
				Turn    int    `json:"turn"`
				Attempt int    `json:"attempt"`
				Text    string `json:"text"`
				Usage   struct {
					TotalTokens int `json:"total_tokens"`
				} `json:"usage"`
				Calls []struct {
					CallID  string  `json:"call_id"`
					Tool    string  `json:"tool"`
					State   string  `json:"state"`
					Starts  int     `json:"starts"`
					Result  *string `json:"result"`
					Waiting string  `json:"waiting"`
				} `json:"tool_calls"`
			} `json:"turns"`
		} `json:"agent_loop"`
	}
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d", id), "").json(t, &task)
	turns := task.AgentLoop.Turns
	if len(turns) != 2 || turns[0].Usage.TotalTokens != 12 || turns[1].Text != "paging" {
		t.Fatalf("turns = %+v", turns)
	}
	if c := turns[0].Calls; len(c) != 1 || c[0].State != "ended" || c[0].Starts != 2 || c[0].Result == nil || *c[0].Result != "db-1 is <up>" {
		t.Errorf("turn 1's calls = %+v; want the lookup ended, started twice", c)
	}
	if c := turns[1].Calls; len(c) != 1 || c[0].State != "pending" || c[0].Waiting != "approval" || c[0].CallID != fmt.Sprintf("zk-%d-2-1", id) {
		t.Errorf("turn 2's calls = %+v; want the page pending, waiting for approval", c)
	}
	page := b.do(t, "GET", fmt.Sprintf("/tasks/%d", id), "").body
	for _, want := range []string{`id="conversation"`, `id="turn-2"`, "started 2 times", "db-1 is &lt;up&gt;", "waits for approval", "tool-approval:2.1"} {
		if !strings.Contains(page, want) {
			t.Errorf("the task page lacks %q", want)
		}
	}
}
