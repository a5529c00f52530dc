package dao_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/zksched/zksched/dao"
)

func TestAgentLoopWritesAreFencedByToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.queue(t, 1, "default")
	got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"default"}, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim = %d, %v", len(got), err)
	}
	old := got[0].Token()
	resp := json.RawMessage(`{"text": "", "tool_calls": [{"id": "call_1", "name": "page", "arguments": "{}"}]}`)
	if err := b.db.AgentTurnSaveIfRunning(b.ctx, old, 1, "d1", resp, json.RawMessage(`{"total_tokens": 9}`)); err != nil {
		t.Fatal(err)
	}
	page := dao.ToolCall{Turn: 1, Seq: 1, CallID: "zk-1-1-1", Tool: "page", Arguments: "{}"}
	lookup := dao.ToolCall{Turn: 1, Seq: 2, CallID: "zk-1-1-2", Tool: "lookup", Arguments: `{"host": "a"}`}
	if err := b.db.ToolCallEndIfRunning(b.ctx, old, page, "early", false); !errors.Is(err, dao.ErrToolCallState) {
		t.Fatalf("ending a call never started: %v, want ErrToolCallState", err)
	}
	for _, c := range []dao.ToolCall{page, lookup} {
		if err := b.db.ToolCallStartIfRunning(b.ctx, old, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.db.ToolCallEndIfRunning(b.ctx, old, lookup, "a is up", false); err != nil {
		t.Fatal(err)
	}
	if err := b.db.ToolCallStartIfRunning(b.ctx, old, lookup); !errors.Is(err, dao.ErrToolCallState) {
		t.Fatalf("starting an ended call: %v, want ErrToolCallState", err)
	}
	// The worker is lost mid-page: its token writes nothing more.
	if _, err := b.db.TaskRequeueIfRunningOnWorker(b.ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if err := b.db.ToolCallEndIfRunning(b.ctx, old, page, "late", false); !errors.Is(err, dao.ErrTokenRefused) {
		t.Fatalf("stale end: %v, want ErrTokenRefused", err)
	}
	if err := b.db.AgentTurnSaveIfRunning(b.ctx, old, 2, "d2", resp, nil); !errors.Is(err, dao.ErrTokenRefused) {
		t.Fatalf("stale turn: %v, want ErrTokenRefused", err)
	}
	got, err = b.db.TaskClaimQueued(b.ctx, "w2", []string{"default"}, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("second claim = %d, %v", len(got), err)
	}
	tok := got[0].Token()
	turns, calls, err := b.db.AgentLoopForTask(b.ctx, tok.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 1 || turns[0].Attempt != 1 || turns[0].RequestDigest != "d1" || len(calls) != 2 {
		t.Fatalf("turns %+v calls %+v", turns, calls)
	}
	if c := calls[0]; c.State != dao.ToolCallStarted || c.Attempt != 1 || c.Result != nil {
		t.Errorf("page %+v: want started by attempt 1, no result", c)
	}
	if c := calls[1]; c.State != dao.ToolCallEnded || c.Result == nil || *c.Result != "a is up" || *c.EndedAttempt != 1 {
		t.Errorf("lookup %+v: want ended by attempt 1", c)
	}
	// Attempt 2 asks a person about the page, who says it happened.
	if err := b.db.ToolCallInterruptIfRunning(b.ctx, tok, page); err != nil {
		t.Fatal(err)
	}
	if err := b.db.ToolCallEndIfRunning(b.ctx, tok, page, "paged at 10:02", false); err != nil {
		t.Fatal(err)
	}
	_, calls, err = b.db.AgentLoopForTask(b.ctx, tok.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if c := calls[0]; c.State != dao.ToolCallEnded || *c.Result != "paged at 10:02" || *c.EndedAttempt != 2 || c.Starts != 1 {
		t.Errorf("page %+v: want ended by attempt 2 with the person's text, started once", c)
	}
	// A retry of an interrupted call starts it again, counted.
	retried := dao.ToolCall{Turn: 2, Seq: 1, CallID: "zk-1-2-1", Tool: "lookup", Arguments: "{}"}
	for range 2 {
		if err := b.db.ToolCallStartIfRunning(b.ctx, tok, retried); err != nil {
			t.Fatal(err)
		}
	}
	_, calls, _ = b.db.AgentLoopForTask(b.ctx, tok.TaskID)
	if c := calls[2]; c.Starts != 2 || c.State != dao.ToolCallStarted {
		t.Errorf("retried %+v: want 2 starts", c)
	}
}
