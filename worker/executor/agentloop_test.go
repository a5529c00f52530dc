package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
)

// memLoop is a LoopStore in memory, keeping what a database would.
type memLoop struct {
	mu      sync.Mutex
	attempt int
	turns   map[int]Turn
	calls   map[[2]int]ToolCall
	writes  []string
}

func newMemLoop() *memLoop {
	return &memLoop{attempt: 1, turns: map[int]Turn{}, calls: map[[2]int]ToolCall{}}
}

func (m *memLoop) Load(context.Context) ([]Turn, []ToolCall, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var turns []Turn
	for _, t := range m.turns {
		turns = append(turns, t)
	}
	var calls []ToolCall
	for _, c := range m.calls {
		calls = append(calls, c)
	}
	return turns, calls, nil
}

func (m *memLoop) SaveTurn(_ context.Context, t Turn) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Attempt = m.attempt
	m.turns[t.Turn] = t
	m.writes = append(m.writes, "turn "+itoa(t.Turn))
	return nil
}

func (m *memLoop) StartCall(_ context.Context, c ToolCall) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]int{c.Turn, c.Seq}
	prev, ok := m.calls[k]
	if ok && prev.State == CallEnded {
		return errors.New("started an ended call")
	}
	c.State, c.Attempt, c.Starts = CallStarted, m.attempt, prev.Starts+1
	m.calls[k] = c
	m.writes = append(m.writes, "start "+c.ID)
	return nil
}

func (m *memLoop) EndCall(_ context.Context, c ToolCall) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]int{c.Turn, c.Seq}
	prev, ok := m.calls[k]
	if !ok || prev.State == CallEnded {
		return errors.New("ended a call that was not started")
	}
	prev.State, prev.Result, prev.IsError = CallEnded, c.Result, c.IsError
	m.calls[k] = prev
	m.writes = append(m.writes, "end "+c.ID)
	return nil
}

func (m *memLoop) InterruptCall(_ context.Context, c ToolCall) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]int{c.Turn, c.Seq}
	prev := m.calls[k]
	prev.State = CallInterrupted
	m.calls[k] = prev
	m.writes = append(m.writes, "interrupt "+c.ID)
	return nil
}

// memEvents records an agent's events as "turn model|replayed" and "call OUTCOME".
type memEvents struct {
	mu  sync.Mutex
	got []string
}

func (m *memEvents) AgentTurn(provider string, replayed bool, tokens int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	src := "model"
	if replayed {
		src = "replayed"
	}
	m.got = append(m.got, "turn "+src)
}

func (m *memEvents) AgentToolCall(outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, "call "+outcome)
}

func itoa(n int) string { return strconv.Itoa(n) }

func offlineProviders() *llm.Providers {
	return llm.NewProviders(map[string]llm.Provider{"offline": {Type: llm.ProviderOffline}},
		llm.Options{Backoff: time.Millisecond, Log: zerolog.Nop()})
}

// toolAgent is a tool-calling agent whose two shell tools append a line to ledger.
func toolAgent(ledger string, store LoopStore, cps Checkpointer) Task {
	return Task{ID: 77, Attempt: 1,
		Params: map[string]string{"who": "ops"},
		Spec: workflow.Task{Name: "act", Type: "agent", Provider: "offline", Prompt: "Help {{ .params.who }}",
			Env: map[string]string{"LEDGER": ledger},
			Tools: []workflow.Tool{
				{Name: "lookup", Description: "looks a host up", Type: workflow.ToolShell, Idempotent: true,
					Arguments: map[string]any{"type": "object", "properties": map[string]any{
						"host": map[string]any{"type": "string", "default": "db-1"}}},
					Command: `echo "lookup $ZKSCHED_ARG_host $ZKSCHED_TOOL_CALL_ID" >> "$LEDGER"; echo "host $ZKSCHED_ARG_host is up"`},
				{Name: "page", Description: "pages a person", Type: workflow.ToolShell,
					Arguments: map[string]any{"type": "object", "properties": map[string]any{
						"who": map[string]any{"type": "string", "enum": []any{"oncall"}},
						"n":   map[string]any{"type": "integer"}}},
					Command: `echo "page $ZKSCHED_ARG_who $ZKSCHED_ARG_n $ZKSCHED_ARGS" >> "$LEDGER"; echo paged`},
			}},
		Loop: store, Checkpoints: cps}
}

func ledgerLines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

func TestToolLoopCallsEachToolAndAnswers(t *testing.T) {
	t.Parallel()
	ledger := filepath.Join(t.TempDir(), "ledger")
	store := newMemLoop()
	var log syncBuffer
	res := Agent{Providers: offlineProviders(), Shell: shell(t)}.Run(context.Background(), toolAgent(ledger, store, &memCheckpoints{steps: map[string]Checkpoint{}}), &log)
	if res.Err != nil {
		t.Fatalf("%v\n%s", res.Err, log.String())
	}
	want := []string{"lookup db-1 zk-77-1-1", `page oncall 1 {"n":1,"who":"oncall"}`}
	if got := ledgerLines(t, ledger); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("ledger %q, want %q", got, want)
	}
	if !strings.HasPrefix(res.Output, "[offline model]") || !strings.Contains(res.Output, "key terms") {
		t.Errorf("output %q, want the offline model's final answer", res.Output)
	}
	if got := strings.Join(store.writes, ","); got != "turn 1,start zk-77-1-1,end zk-77-1-1,turn 2,start zk-77-2-1,end zk-77-2-1,turn 3" {
		t.Errorf("writes %s", got)
	}
	if c := store.calls[[2]int{1, 1}]; c.Result != "host db-1 is up" || c.IsError {
		t.Errorf("call 1 result %q (error %v)", c.Result, c.IsError)
	}
	if res.Usage.Calls != 3 {
		t.Errorf("usage %+v, want 3 model calls", res.Usage)
	}
}

func TestToolLoopReplaysWhatEndedAndNeverRunsItAgain(t *testing.T) {
	t.Parallel()
	ledger := filepath.Join(t.TempDir(), "ledger")
	store := newMemLoop()
	ev := &memEvents{}
	a := Agent{Providers: offlineProviders(), Shell: shell(t), Events: ev}
	if res := a.Run(context.Background(), toolAgent(ledger, store, &memCheckpoints{steps: map[string]Checkpoint{}}), &syncBuffer{}); res.Err != nil {
		t.Fatal(res.Err)
	}
	// A later attempt of a task that already ran to its end (its result lost) replays it.
	store.attempt = 2
	store.writes = nil
	var log syncBuffer
	res := a.Run(context.Background(), toolAgent(ledger, store, &memCheckpoints{steps: map[string]Checkpoint{}}), &log)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if n := len(ledgerLines(t, ledger)); n != 2 {
		t.Errorf("ledger has %d lines, want 2: a replay must not run a tool again", n)
	}
	want := "turn model,call succeeded,turn model,call succeeded,turn model," +
		"turn replayed,call replayed,turn replayed,call replayed,turn replayed"
	if got := strings.Join(ev.got, ","); got != want {
		t.Errorf("events %s\nwant %s", got, want)
	}
	if len(store.writes) != 0 || res.Usage.Calls != 0 {
		t.Errorf("the replay wrote %v and made %d model calls, want nothing", store.writes, res.Usage.Calls)
	}
	if !strings.Contains(log.String(), "turn 2 call 1 page (zk-77-2-1): ended in attempt 1, its result replayed") {
		t.Errorf("log:\n%s", log.String())
	}
}

func TestToolLoopInterruptedCalls(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, onInterrupted string, cps map[string]Checkpoint) (*memLoop, Result, string, string) {
		ledger := filepath.Join(t.TempDir(), "ledger")
		store := newMemLoop()
		// Attempt 1 answered turn 1, asked for the lookup, and died in it.
		store.turns[1] = Turn{Turn: 1, Attempt: 1, Response: llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"host":"db-1"}`}}}}
		store.calls[[2]int{1, 1}] = ToolCall{Turn: 1, Seq: 1, ID: "zk-77-1-1", Tool: "lookup", Arguments: `{"host":"db-1"}`, State: CallStarted, Attempt: 1, Starts: 1}
		store.attempt = 2
		task := toolAgent(ledger, store, &memCheckpoints{steps: cps})
		task.Attempt = 2
		task.Spec.Tools[0].Idempotent = onInterrupted == workflow.OnInterruptedRetry
		task.Spec.Tools[0].OnInterrupted = onInterrupted
		var log syncBuffer
		res := Agent{Providers: offlineProviders(), Shell: shell(t)}.Run(context.Background(), task, &log)
		return store, res, strings.Join(ledgerLines(t, ledger), "|"), log.String()
	}
	t.Run("retry runs an idempotent call again with its id", func(t *testing.T) {
		store, res, ledger, log := run(t, workflow.OnInterruptedRetry, map[string]Checkpoint{})
		if res.Err != nil {
			t.Fatal(res.Err, log)
		}
		if !strings.HasPrefix(ledger, "lookup db-1 zk-77-1-1|page") {
			t.Errorf("ledger %q", ledger)
		}
		if c := store.calls[[2]int{1, 1}]; c.Starts != 2 || c.State != CallEnded {
			t.Errorf("call %+v: want started twice, ended", c)
		}
		if _, again := store.turns[1]; !again || res.Usage.Calls != 2 {
			t.Errorf("made %d model calls; turn 1 must be replayed, not sent again", res.Usage.Calls)
		}
	})
	t.Run("fail fails the task naming the call", func(t *testing.T) {
		_, res, ledger, _ := run(t, workflow.OnInterruptedFail, map[string]Checkpoint{})
		if res.Err == nil || !strings.Contains(res.Err.Error(), "turn 1 call 1 lookup (zk-77-1-1): started in attempt 1 and never ended; on-interrupted: fail") {
			t.Fatalf("error %v", res.Err)
		}
		if ledger != "" {
			t.Errorf("ledger %q: nothing may run", ledger)
		}
	})
	t.Run("ask pauses for a person, holding the call interrupted", func(t *testing.T) {
		store, res, ledger, _ := run(t, workflow.OnInterruptedAsk, map[string]Checkpoint{})
		if res.Err != nil || res.Paused == nil || res.Paused.Step != "tool-call:1.1" {
			t.Fatalf("result %+v: want paused at tool-call:1.1", res)
		}
		if ledger != "" || store.calls[[2]int{1, 1}].State != CallInterrupted {
			t.Errorf("ledger %q, call %+v: want nothing run and the call interrupted", ledger, store.calls[[2]int{1, 1}])
		}
	})
	t.Run("a person's word ends the call with their text", func(t *testing.T) {
		store, res, ledger, _ := run(t, workflow.OnInterruptedAsk, map[string]Checkpoint{"tool-call:1.1": {Output: "db-1 was up", Attempt: 2}})
		if res.Err != nil || res.Paused != nil {
			t.Fatalf("result %+v", res)
		}
		if c := store.calls[[2]int{1, 1}]; c.State != CallEnded || c.Result != "db-1 was up" || c.Starts != 1 {
			t.Errorf("call %+v: want ended with the person's text, never started again", c)
		}
		if strings.Contains(ledger, "lookup") {
			t.Errorf("ledger %q: the lookup ran again", ledger)
		}
	})
}

func TestToolLoopBounds(t *testing.T) {
	t.Parallel()
	ledger := filepath.Join(t.TempDir(), "ledger")
	task := toolAgent(ledger, newMemLoop(), nil)
	task.Spec.MaxTurns = 2
	res := Agent{Providers: offlineProviders(), Shell: shell(t)}.Run(context.Background(), task, &syncBuffer{})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "the agent used its 2 turns (max-turns) without a final answer") {
		t.Errorf("max-turns: error %v", res.Err)
	}
	task = toolAgent(ledger, newMemLoop(), nil)
	task.Spec.MaxToolCalls = 1
	res = Agent{Providers: offlineProviders(), Shell: shell(t)}.Run(context.Background(), task, &syncBuffer{})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "more than 1 tool calls (max-tool-calls)") {
		t.Errorf("max-tool-calls: error %v", res.Err)
	}
	task = toolAgent(ledger, newMemLoop(), nil)
	task.Spec.MaxTotalTokens = 3
	res = Agent{Providers: offlineProviders(), Shell: shell(t)}.Run(context.Background(), task, &syncBuffer{})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "reaching max-total-tokens 3") {
		t.Errorf("max-total-tokens: error %v", res.Err)
	}
}

func TestToolLoopApprovals(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, cps map[string]Checkpoint) (*memLoop, Result, string) {
		ledger := filepath.Join(t.TempDir(), "ledger")
		store := newMemLoop()
		task := toolAgent(ledger, store, &memCheckpoints{steps: cps})
		task.Spec.Tools[1].Approve = true
		res := Agent{Providers: offlineProviders(), Shell: shell(t)}.Run(context.Background(), task, &syncBuffer{})
		return store, res, strings.Join(ledgerLines(t, ledger), "|")
	}
	t.Run("a call waits for approval, not started", func(t *testing.T) {
		store, res, ledger := run(t, map[string]Checkpoint{})
		if res.Err != nil || res.Paused == nil || res.Paused.Step != "tool-approval:2.1" {
			t.Fatalf("result %+v: want paused at tool-approval:2.1", res)
		}
		if _, started := store.calls[[2]int{2, 1}]; started || strings.Contains(ledger, "page") {
			t.Errorf("the page call started before its approval (ledger %q)", ledger)
		}
	})
	t.Run("approved, it runs", func(t *testing.T) {
		store, res, ledger := run(t, map[string]Checkpoint{"tool-approval:2.1": {Output: "ok"}})
		if res.Err != nil || res.Paused != nil {
			t.Fatalf("result %+v", res)
		}
		if c := store.calls[[2]int{2, 1}]; c.State != CallEnded || c.Result != "paged" || !strings.Contains(ledger, "page oncall") {
			t.Errorf("call %+v, ledger %q: want the page run", c, ledger)
		}
	})
	t.Run("rejected, the model is told and it never runs", func(t *testing.T) {
		store, res, ledger := run(t, map[string]Checkpoint{"tool-rejection:2.1": {Output: "not at night"}})
		if res.Err != nil || res.Paused != nil {
			t.Fatalf("result %+v", res)
		}
		c := store.calls[[2]int{2, 1}]
		if c.State != CallEnded || !c.IsError || c.Result != "a reviewer rejected this call, so it did not run: not at night" {
			t.Errorf("call %+v: want ended with the rejection", c)
		}
		if strings.Contains(ledger, "page") {
			t.Errorf("ledger %q: a rejected call ran", ledger)
		}
		if !strings.Contains(res.Output, "night") {
			t.Errorf("output %q: the offline model's answer covers the results it was given, the rejection's too", res.Output)
		}
	})
}

func TestToolLoopJSONOutputGetsOneRepairTurn(t *testing.T) {
	t.Parallel()
	task := func(store LoopStore) Task {
		return Task{ID: 3, Attempt: 1, Spec: workflow.Task{Name: "judge", Type: "agent", Provider: "test", Prompt: "Judge it",
			OutputFormat: workflow.OutputJSON, OutputSchema: map[string]any{"type": "object", "required": []any{"verdict"},
				"properties": map[string]any{"verdict": map[string]any{"enum": []any{"ok", "bad"}}}},
			Tools: []workflow.Tool{{Name: "look", Description: "looks", Type: workflow.ToolShell, Command: "echo seen"}}},
			Loop: store}
	}
	t.Run("repaired", func(t *testing.T) {
		providers, srv := testProviders(t)
		srv.Answer("Judge it", "it looks fine", "```json\n{\"verdict\": \"ok\"}\n```")
		store := newMemLoop()
		res := Agent{Providers: providers, Shell: shell(t)}.Run(context.Background(), task(store), &syncBuffer{})
		if res.Err != nil || res.Output != `{"verdict": "ok"}` {
			t.Fatalf("result %+v: want the repaired JSON, unfenced", res)
		}
		if len(store.turns) != 3 || res.Usage.Calls != 3 {
			t.Errorf("%d turns, %d calls: want the tool's turn, the bad answer and the repair", len(store.turns), res.Usage.Calls)
		}
	})
	t.Run("still wrong", func(t *testing.T) {
		providers, srv := testProviders(t)
		srv.Answer("Judge it", `{"verdict": "maybe"}`)
		res := Agent{Providers: providers, Shell: shell(t)}.Run(context.Background(), task(newMemLoop()), &syncBuffer{})
		if res.Err == nil || !strings.Contains(res.Err.Error(), "turn 3: the final answer is still not what output-format asks after a repair turn: "+
			"the answer does not match output-schema: at '/verdict': value must be one of 'ok', 'bad'") {
			t.Errorf("error %v", res.Err)
		}
	})
	t.Run("a replay repairs the stored answer", func(t *testing.T) {
		providers, srv := testProviders(t)
		srv.Answer("Judge it", `{"verdict": "bad"}`)
		store := newMemLoop()
		store.turns[1] = Turn{Turn: 1, Attempt: 1, Response: llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "look", Arguments: "{}"}}}}
		store.calls[[2]int{1, 1}] = ToolCall{Turn: 1, Seq: 1, ID: "zk-3-1-1", Tool: "look", State: CallEnded, Result: "seen", Attempt: 1, Starts: 1}
		store.turns[2] = Turn{Turn: 2, Attempt: 1, Response: llm.Response{Text: "bad, I think"}}
		store.attempt = 2
		res := Agent{Providers: providers, Shell: shell(t)}.Run(context.Background(), task(store), &syncBuffer{})
		if res.Err != nil || res.Output != `{"verdict": "bad"}` || res.Usage.Calls != 1 {
			t.Fatalf("result %+v (usage %+v): want only the repair turn sent", res, res.Usage)
		}
	})
}

func TestToolLoopMaxCost(t *testing.T) {
	t.Parallel()
	priced := func(in, out float64) *llm.Providers {
		return llm.NewProviders(map[string]llm.Provider{"offline": {Type: llm.ProviderOffline, InputPrice: in, OutputPrice: out}},
			llm.Options{Backoff: time.Millisecond, Log: zerolog.Nop()})
	}
	ledger := filepath.Join(t.TempDir(), "ledger")
	task := toolAgent(ledger, newMemLoop(), nil)
	limit := 0.0001
	task.Spec.MaxCost = &limit
	res := Agent{Providers: priced(2, 10), Shell: shell(t)}.Run(context.Background(), task, &syncBuffer{})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "max-cost 0.0001") {
		t.Errorf("error %v", res.Err)
	}
	if res.TaskUsage == nil || res.TaskUsage.Cost < limit {
		t.Errorf("task usage %+v: want the cost counted", res.TaskUsage)
	}
	task = toolAgent(ledger, newMemLoop(), nil)
	task.Spec.MaxCost = &limit
	res = Agent{Providers: priced(0, 0), Shell: shell(t)}.Run(context.Background(), task, &syncBuffer{})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "max-cost needs the prices of provider offline") {
		t.Errorf("unpriced: error %v", res.Err)
	}
	generous := 10.0
	task = toolAgent(ledger, newMemLoop(), nil)
	task.Spec.MaxCost = &generous
	if res = (Agent{Providers: priced(2, 10), Shell: shell(t)}).Run(context.Background(), task, &syncBuffer{}); res.Err != nil {
		t.Errorf("within max-cost: %v", res.Err)
	}
}

func TestToolLoopApproveWhen(t *testing.T) {
	t.Parallel()
	for when, gated := range map[string]bool{
		`{{ gt (index .args "n") 0.5 }}`: true,
		`{{ eq .args.who "nobody" }}`:    false,
	} {
		ledger := filepath.Join(t.TempDir(), "ledger")
		task := toolAgent(ledger, newMemLoop(), &memCheckpoints{steps: map[string]Checkpoint{}})
		task.Spec.Tools[1].ApproveWhen = when
		res := Agent{Providers: offlineProviders(), Shell: shell(t)}.Run(context.Background(), task, &syncBuffer{})
		if res.Err != nil {
			t.Fatalf("%s: %v", when, res.Err)
		}
		if paused := res.Paused != nil && res.Paused.Step == "tool-approval:2.1"; paused != gated {
			t.Errorf("%s: paused %+v, want gated %t", when, res.Paused, gated)
		}
	}
	ledger := filepath.Join(t.TempDir(), "ledger")
	task := toolAgent(ledger, newMemLoop(), &memCheckpoints{steps: map[string]Checkpoint{}})
	task.Spec.Tools[1].ApproveWhen = `{{ .args.who }}`
	res := Agent{Providers: offlineProviders(), Shell: shell(t)}.Run(context.Background(), task, &syncBuffer{})
	if res.Err == nil || !strings.Contains(res.Err.Error(), `approve-when rendered "oncall"; it must render true or false`) {
		t.Errorf("error %v", res.Err)
	}
}

// TestToolLoopThroughEachProvider runs the whole tool loop (two turns that call a tool, the
// tools' results, a final answer) against the test server through each provider type that
// speaks an API: the calls' ids the provider gave come back with their results.
func TestToolLoopThroughEachProvider(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind string
		ids  [2]string // the provider's ids of the two calls
	}{
		{llm.ProviderOpenAI, [2]string{"call_1", "call_2"}},
		{llm.ProviderAnthropic, [2]string{"toolu_1", "toolu_2"}},
		{llm.ProviderOllama, [2]string{"call_1", "call_2"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.New(t)
			srv.Answer("Help ops", "db-1 is up and oncall is paged")
			p := llm.Provider{Type: tc.kind, BaseURL: srv.BaseURL(), Model: "m"}
			switch tc.kind {
			case llm.ProviderAnthropic:
				srv.Key, p.APIKeyEnv = "sk-test", "ANTHROPIC_KEY"
			case llm.ProviderOllama:
				p.BaseURL = srv.URL
			}
			providers := llm.NewProviders(map[string]llm.Provider{"test": p}, llm.Options{Backoff: time.Millisecond,
				Log: zerolog.Nop(), Getenv: func(string) string { return "sk-test" }})
			ledger := filepath.Join(t.TempDir(), "ledger")
			store := newMemLoop()
			task := toolAgent(ledger, store, &memCheckpoints{steps: map[string]Checkpoint{}})
			task.Spec.Provider = "test"
			var log syncBuffer
			res := Agent{Providers: providers, Shell: shell(t)}.Run(context.Background(), task, &log)
			if res.Err != nil {
				t.Fatalf("%v\n%s", res.Err, log.String())
			}
			if res.Output != "db-1 is up and oncall is paged" {
				t.Errorf("output %q, want the final answer", res.Output)
			}
			want := []string{"lookup db-1 zk-77-1-1", `page oncall 1 {"n":1,"who":"oncall"}`}
			if got := ledgerLines(t, ledger); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("ledger %q, want %q", got, want)
			}
			if got := strings.Join(store.writes, ","); got != "turn 1,start zk-77-1-1,end zk-77-1-1,turn 2,start zk-77-2-1,end zk-77-2-1,turn 3" {
				t.Errorf("writes %s", got)
			}
			for i, k := range [][2]int{{1, 1}, {2, 1}} {
				if c := store.calls[k]; c.ModelID != tc.ids[i] {
					t.Errorf("call %v has the provider's id %q, want %q", k, c.ModelID, tc.ids[i])
				}
			}
			wantResults := []string{tc.ids[0] + ": host db-1 is up", tc.ids[0] + ": host db-1 is up", tc.ids[1] + ": paged"}
			if got := srv.ToolResults(); strings.Join(got, "|") != strings.Join(wantResults, "|") {
				t.Errorf("tool results the server saw: %q, want %q", got, wantResults)
			}
			if res.Usage.Calls != 3 || res.Usage.PromptTokens == 0 || res.Usage.CompletionTokens == 0 ||
				res.Usage.TotalTokens != res.Usage.PromptTokens+res.Usage.CompletionTokens {
				t.Errorf("usage %+v, want 3 model calls with their tokens", res.Usage)
			}
		})
	}
}
