package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

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

// TestAgentConversationNamesReviewers: each tool call a person approved, rejected or said had
// taken effect shows who did it and when, read from the signal's audit row, which names the
// step it ended: an operator's approval and an admin's rejection through the API, and a word
// on an interrupted call from the command line.
func TestAgentConversationNamesReviewers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{usersFile: writeUsers(t)})
	f := b.seed(t, 6)
	claimed, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 1)
	if err != nil || len(claimed) != 1 || claimed[0].ID != f.byName["t5"] {
		t.Fatalf("claim of t5: %+v, %v", claimed, err)
	}
	ids := []int64{f.byName["t3"], f.byName["t4"], f.byName["t5"]}
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE task_instance SET type = 'agent' WHERE id = ANY($1)`, pq.Array(ids)); err != nil {
		t.Fatal(err)
	}
	// Each agent asked for one call in its first turn and waits: t3 and t4 for its approval,
	// t5 for a word on it, since it started and never ended.
	for i, id := range ids {
		tok := dao.Token{TaskID: id, WorkerID: "w1", Attempt: 1}
		turn := json.RawMessage(`{"text": "", "tool_calls": [{"id": "call_1", "name": "deploy", "arguments": "{}"}]}`)
		if err := b.db.AgentTurnSaveIfRunning(b.ctx, tok, 1, "d1", turn, nil); err != nil {
			t.Fatal(err)
		}
		step := "tool-approval:1.1"
		if i == 2 {
			step = "tool-call:1.1"
			if err := b.db.ToolCallStartIfRunning(b.ctx, tok, dao.ToolCall{Turn: 1, Seq: 1, CallID: fmt.Sprintf("zk-%d-1-1", id), Tool: "deploy", Arguments: "{}"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomePaused, Next: dao.TaskWaiting, PausedStep: step}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sig := range []struct {
		id          int64
		token, body string
	}{
		{ids[0], operatorToken, `{"output": "go ahead"}`},
		{ids[1], adminToken, `{"output": "not on a Friday", "fail": true}`},
	} {
		if r := b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/signal", sig.id), sig.body, "Authorization", "Bearer "+sig.token); r.status != 200 {
			t.Fatalf("signal of task %d: %d %s", sig.id, r.status, r.body)
		}
	}
	word := "deployed by hand at 10:02"
	cli := dao.AuditEvent{Actor: "cli:ops", Role: "admin", Action: dao.AuditTaskSignal, Params: dao.AuditParams(map[string]any{"fail": false})}
	if _, err := b.db.TaskEndIfWaiting(b.ctx, ids[2], dao.TaskSucceeded, &word, nil, "", &cli); err != nil {
		t.Fatal(err)
	}

	var rows []struct {
		Target string          `db:"target"`
		Params json.RawMessage `db:"params"`
	}
	if err := b.db.SQL().SelectContext(b.ctx, &rows, `SELECT target, params FROM audit_event WHERE action = 'task.signal' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || !strings.Contains(string(rows[1].Params), `"paused_step": "tool-approval:1.1"`) ||
		!strings.Contains(string(rows[1].Params), `"fail": true`) || !strings.Contains(string(rows[1].Params), `"output_bytes": 15`) {
		t.Errorf("audit rows %s; want each signal's row to name the step it ended beside its own params", rows)
	}
	for i, want := range []struct{ review, reviewer string }{
		{"approved", "otto"},
		{"rejected: not on a Friday", "ada"},
		{"took effect: " + word, "cli:ops"},
	} {
		var task struct {
			AgentLoop struct {
				Turns []struct {
					Calls []struct {
						Review     string     `json:"review"`
						Reviewer   string     `json:"reviewer"`
						ReviewedAt *time.Time `json:"reviewed_at"`
					} `json:"tool_calls"`
				} `json:"turns"`
			} `json:"agent_loop"`
		}
		path := fmt.Sprintf("/api/v1/task-instances/%d", ids[i])
		b.do(t, "GET", path, "", "Authorization", "Bearer "+viewerToken).json(t, &task)
		turns := task.AgentLoop.Turns
		if len(turns) != 1 || len(turns[0].Calls) != 1 {
			t.Fatalf("task %d's conversation = %+v; want one turn of one call", ids[i], turns)
		}
		c := turns[0].Calls[0]
		if c.Review != want.review || c.Reviewer != want.reviewer || c.ReviewedAt == nil || time.Since(*c.ReviewedAt) > time.Minute {
			t.Errorf("task %d's call = %+v; want %q by %s, just now", ids[i], c, want.review, want.reviewer)
		}
		page := b.do(t, "GET", fmt.Sprintf("/tasks/%d", ids[i]), "", "Authorization", "Bearer "+viewerToken).body
		if !strings.Contains(page, `<span class="reviewer">by `+want.reviewer+`</span>`) {
			t.Errorf("task %d's page does not name its reviewer %s", ids[i], want.reviewer)
		}
	}
}

// TestTaskPageOfAnAgentWaitingForItsToolsChild: an agent paused at tool-child:CALL waits for
// its tool's child, not for a person: its page says so, offers no signal form, and marks the
// call as waiting for the child.
func TestTaskPageOfAnAgentWaitingForItsToolsChild(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: "s3cret"})
	b.seed(t, 6)
	claimed, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	id := claimed[0].ID
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE task_instance SET type = 'agent' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	tok := dao.Token{TaskID: id, WorkerID: "w1", Attempt: 1}
	turn := json.RawMessage(`{"text": "", "tool_calls": [{"id": "call_1", "name": "report", "arguments": "{}"}]}`)
	if err := b.db.AgentTurnSaveIfRunning(b.ctx, tok, 1, "d1", turn, nil); err != nil {
		t.Fatal(err)
	}
	call := fmt.Sprintf("zk-%d-1-1", id)
	if err := b.db.ToolCallStartIfRunning(b.ctx, tok, dao.ToolCall{Turn: 1, Seq: 1, CallID: call, Tool: "report", Arguments: "{}"}); err != nil {
		t.Fatal(err)
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomePaused, Next: dao.TaskWaiting, PausedStep: "tool-child:" + call}); err != nil {
		t.Fatal(err)
	}
	r := b.do(t, "GET", fmt.Sprintf("/tasks/%d", id), "")
	if r.status != 200 || !strings.Contains(r.body, "waiting for its tool&#39;s child workflow to end") || strings.Contains(r.body, `id="signal"`) ||
		!strings.Contains(r.body, "waits for its child workflow to end") {
		t.Errorf("the page of an agent waiting for its tool's child: %d; want it said, the call marked, no signal form\n%s", r.status, r.body)
	}
	if r := b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/signal", id), `{"output": "done"}`); r.status != 409 {
		t.Errorf("a signal to it: %d %s; want 409", r.status, r.body)
	}
}
