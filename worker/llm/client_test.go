package llm_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/worker/llm"
)

type testBundle struct {
	srv *llmtest.Server
	ctx context.Context
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{srv: llmtest.New(t), ctx: context.Background()}
}

// client returns a client of an openai provider on the test server with a short backoff;
// change adjusts the provider first.
func (b *testBundle) client(t *testing.T, change func(p *llm.Provider)) *llm.Client {
	t.Helper()
	return b.clientOn(t, nil, change)
}

// clientOn is client on clock (nil: the real one).
func (b *testBundle) clientOn(t *testing.T, clock clockwork.Clock, change func(p *llm.Provider)) *llm.Client {
	t.Helper()
	p := llm.Provider{Type: llm.ProviderOpenAI, BaseURL: b.srv.BaseURL(), Model: "test-model", MaxAttempts: 4}
	if change != nil {
		change(&p)
	}
	c, err := llm.New("test", p, llm.Options{Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Log: zerolog.Nop(),
		Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenerateReturnsTextAndUsage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	temp := 0.3
	resp, err := b.client(t, nil).Generate(b.ctx, llm.Request{System: "be brief", Prompt: "name three rivers", Temperature: &temp, MaxTokens: 50})
	if err != nil {
		t.Fatal(err)
	}
	if want := llmtest.Answer("name three rivers"); resp.Text != want {
		t.Errorf("text = %q, want %q", resp.Text, want)
	}
	// The server counts words: 2 + 3 of prompt, 5 of its answer.
	if want := (llm.Usage{PromptTokens: 5, CompletionTokens: 5, TotalTokens: 10, Calls: 1}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
}

func TestGenerateRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		times     int
		wantErr   llm.Class // "" for success
		wantCalls int
	}{
		{"429 twice, then an answer", 429, 2, "", 3},
		{"500 then an answer", 500, 1, "", 2},
		{"503 three times, then an answer", 503, 3, "", 4},
		{"429 every time: attempts spent", 429, -1, llm.ClassRateLimit, 4},
		{"502 every time: attempts spent", 502, -1, llm.ClassServer, 4},
		{"400 is not retried", 400, -1, llm.ClassBadRequest, 1},
		{"404 is not retried", 404, -1, llm.ClassBadRequest, 1},
		{"401 is not retried", 401, -1, llm.ClassAuth, 1},
		{"403 is not retried", 403, -1, llm.ClassAuth, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.srv.Fail("hello", tt.status, tt.times, "")
			resp, err := b.client(t, nil).Generate(b.ctx, llm.Request{Prompt: "hello"})
			if got := b.srv.Calls("hello"); got != tt.wantCalls {
				t.Errorf("server saw %d calls, want %d", got, tt.wantCalls)
			}
			if resp.Usage.Calls != tt.wantCalls {
				t.Errorf("usage counts %d calls, want %d", resp.Usage.Calls, tt.wantCalls)
			}
			if tt.wantErr == "" {
				if err != nil || resp.Text != llmtest.Answer("hello") {
					t.Fatalf("Generate = %q, %v; want the answer", resp.Text, err)
				}
				return
			}
			var e *llm.Error
			if !errors.As(err, &e) {
				t.Fatalf("error = %v (%T), want *llm.Error", err, err)
			}
			if e.Class != tt.wantErr || e.Status != tt.status || e.Attempts != tt.wantCalls {
				t.Errorf("error = %+v, want class %s, status %d, %d attempts", e, tt.wantErr, tt.status, tt.wantCalls)
			}
			if !strings.Contains(err.Error(), `llm provider "test"`) || !strings.Contains(err.Error(), "injected failure") {
				t.Errorf("message %q does not name the provider and what it said", err)
			}
		})
	}
}

// waitingOn returns once something waits on the fake clock: the client waits on its retry
// timer or on its requests-per-minute window.
func waitingOn(t *testing.T, clock *clockwork.FakeClock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the client never waited on the clock")
	}
}

// generate runs a call of c in the background; its error arrives on the channel.
func (b *testBundle) generate(ctx context.Context, c *llm.Client, prompt string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Generate(ctx, llm.Request{Prompt: prompt})
		done <- err
	}()
	return done
}

func ended(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end within 10s")
		return nil
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Fail("slow down", 429, 1, "1")
	clock := clockwork.NewFakeClock()
	done := b.generate(b.ctx, b.clientOn(t, clock, nil), "slow down")
	waitingOn(t, clock)
	clock.Advance(time.Second - time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the call ended (%v) before the 1 s Retry-After", err)
	default:
	}
	if n := b.srv.Calls("slow down"); n != 1 {
		t.Fatalf("server saw %d calls before the 1 s Retry-After, want 1", n)
	}
	clock.Advance(time.Millisecond)
	if err := ended(t, done); err != nil {
		t.Fatal(err)
	}
	if n := b.srv.Calls("slow down"); n != 2 {
		t.Errorf("server saw %d calls, want 2", n)
	}
}

func TestRequestTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Delay("sleepy", 5*time.Second)
	c := b.client(t, func(p *llm.Provider) { p.Timeout, p.MaxAttempts = 100*time.Millisecond, 2 })
	start := time.Now()
	_, err := c.Generate(b.ctx, llm.Request{Prompt: "sleepy"})
	var e *llm.Error
	if !errors.As(err, &e) || e.Class != llm.ClassTimeout || e.Attempts != 2 {
		t.Fatalf("error = %v, want a timeout after 2 attempts", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v: the request timeout did not cut the calls short", took)
	}
	if n := b.srv.Calls("sleepy"); n != 2 {
		t.Errorf("server saw %d calls, want 2", n)
	}
}

// TestCancelDuringCall stops a call in flight, as a kill or the task's timeout does: Generate
// returns the context's cause at once, and nothing is retried.
func TestCancelDuringCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := b.srv.Hold("forever")
	defer release()
	cause := errors.New("killed by an operator")
	ctx, cancel := context.WithCancelCause(b.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.client(t, nil).Generate(ctx, llm.Request{Prompt: "forever"})
		done <- err
	}()
	b.srv.WaitCalls(t, "forever", 1, 10*time.Second)
	cancel(cause)
	select {
	case err := <-done:
		if !errors.Is(err, cause) {
			t.Errorf("error = %v, want the cancellation cause", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Generate did not return after its context was cancelled")
	}
	if n := b.srv.Calls("forever"); n != 1 {
		t.Errorf("server saw %d calls, want 1", n)
	}
}

// TestDeadlineStopsRetries: a task whose deadline is nearer than the next backoff fails now
// with the provider's error, instead of sleeping into its timeout.
func TestDeadlineStopsRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Fail("doomed", 500, -1, "")
	c, err := llm.New("test", llm.Provider{Type: llm.ProviderOpenAI, BaseURL: b.srv.BaseURL(), Model: "m"},
		llm.Options{Backoff: 20 * time.Second, MaxBackoff: 40 * time.Second, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	_, err = c.Generate(ctx, llm.Request{Prompt: "doomed"})
	var e *llm.Error
	if !errors.As(err, &e) || e.Class != llm.ClassServer || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("error = %v, want the server error, not retried for the deadline", err)
	}
	// A client that slept into the deadline would have returned only once ctx was done.
	if ctx.Err() != nil {
		t.Errorf("Generate returned at the deadline (%v), want an immediate failure", ctx.Err())
	}
}

func TestNetworkErrorIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := b.srv.BaseURL()
	b.srv.Close()
	c := b.client(t, func(p *llm.Provider) { p.BaseURL, p.MaxAttempts = url, 3 })
	_, err := c.Generate(b.ctx, llm.Request{Prompt: "anyone?"})
	var e *llm.Error
	if !errors.As(err, &e) || e.Class != llm.ClassNetwork || e.Attempts != 3 {
		t.Fatalf("error = %v, want a network error after 3 attempts", err)
	}
}

func TestMaxConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Delay("busy", 100*time.Millisecond)
	c := b.client(t, func(p *llm.Provider) { p.MaxConcurrent = 2 })
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if _, err := c.Generate(b.ctx, llm.Request{Prompt: "busy"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if h := b.srv.HighWater(); h != 2 {
		t.Errorf("%d requests in flight at once, want the cap, 2", h)
	}
}

func TestRequestsPerMinute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClock()
	c := b.clientOn(t, clock, func(p *llm.Provider) { p.RequestsPerMinute = 3 })
	for range 3 {
		if _, err := c.Generate(b.ctx, llm.Request{Prompt: "quick"}); err != nil {
			t.Fatal(err)
		}
	}
	// The fourth must wait for the first to leave the minute: it is still waiting when its
	// task ends, just short of the minute.
	ctx, cancel := context.WithCancel(b.ctx)
	done := b.generate(ctx, c, "quick")
	waitingOn(t, clock)
	clock.Advance(time.Minute - time.Millisecond)
	cancel()
	if err := ended(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("fourth call in the minute = %v, want it held until its task ended", err)
	}
	if n := b.srv.Calls("quick"); n != 3 {
		t.Errorf("server saw %d calls in the minute, want 3", n)
	}
	// The next one goes as the first leaves the minute.
	done = b.generate(b.ctx, c, "quick")
	waitingOn(t, clock)
	clock.Advance(time.Millisecond)
	if err := ended(t, done); err != nil {
		t.Fatal(err)
	}
	if n := b.srv.Calls("quick"); n != 4 {
		t.Errorf("server saw %d calls, want 4", n)
	}
}

func TestProviders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Key = "sk-test-secret"
	env := map[string]string{"GOOD_KEY": "sk-test-secret", "WRONG_KEY": "sk-nope"}
	ps := llm.NewProviders(map[string]llm.Provider{
		"good":    {Type: llm.ProviderOpenAI, BaseURL: b.srv.BaseURL(), Model: "m", APIKeyEnv: "GOOD_KEY"},
		"wrong":   {Type: llm.ProviderOpenAI, BaseURL: b.srv.BaseURL(), Model: "m", APIKeyEnv: "WRONG_KEY"},
		"unset":   {Type: llm.ProviderOpenAI, BaseURL: b.srv.BaseURL(), Model: "m", APIKeyEnv: "UNSET_KEY"},
		"offline": {Type: llm.ProviderOffline},
	}, llm.Options{Getenv: func(k string) string { return env[k] }, Backoff: time.Millisecond, Log: zerolog.Nop()})

	good, err := ps.Get("good")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := good.Generate(b.ctx, llm.Request{Prompt: "with a key"}); err != nil {
		t.Errorf("with the right key: %v", err)
	}
	wrong, err := ps.Get("wrong")
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.Generate(b.ctx, llm.Request{Prompt: "wrong key"})
	if e := new(llm.Error); !errors.As(err, &e) || e.Class != llm.ClassAuth || strings.Contains(err.Error(), "sk-nope") {
		t.Errorf("with a wrong key: %v; want an auth error that does not show the key", err)
	}
	for name, want := range map[string]string{
		"unset":  `llm provider "unset": config: the API key variable UNSET_KEY is not set in the worker's environment (llm.providers.unset.api-key-env)`,
		"absent": `llm provider "absent": config: no such provider in this worker's config (llm.providers; configured: good, offline, unset, wrong)`,
	} {
		_, err := ps.Get(name)
		if e := new(llm.Error); !errors.As(err, &e) || e.Class != llm.ClassConfig || err.Error() != want {
			t.Errorf("Get(%q) = %v, want %q", name, err, want)
		}
	}
	off, err := ps.Get("offline")
	if err != nil {
		t.Fatal(err)
	}
	r1, err := off.Generate(b.ctx, llm.Request{Prompt: "Failover moves tasks; failover fences workers before tasks move."})
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := off.Generate(b.ctx, llm.Request{Prompt: "Failover moves tasks; failover fences workers before tasks move."})
	r3, _ := off.Generate(b.ctx, llm.Request{Prompt: "Something else entirely."})
	if r1.Text != r2.Text || r1.Text == r3.Text || !strings.HasPrefix(r1.Text, "[offline model] 9 words; key terms: failover, tasks, before, fences") {
		t.Errorf("offline answers %q, %q, %q: want deterministic, prompt-derived, marked offline", r1.Text, r2.Text, r3.Text)
	}
	if r1.Usage.PromptTokens != 9 || r1.Usage.TotalTokens == 0 || r1.Usage.Calls != 1 {
		t.Errorf("offline usage = %+v", r1.Usage)
	}
}

// TestProviderTypes builds a client of every type against the test server's address, so
// that a change in the libraries' constructors is found here rather than by a user.
func TestProviderTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []llm.Provider{
		{Type: llm.ProviderOpenAI, Model: "gpt-4o-mini"},
		{Type: llm.ProviderOllama, Model: "llama3.2", BaseURL: b.srv.URL},
		{Type: llm.ProviderAnthropic, Model: "claude-x", APIKeyEnv: "K", BaseURL: b.srv.URL},
		{Type: llm.ProviderOffline},
	} {
		if _, err := llm.New(p.Type, p, llm.Options{Getenv: func(string) string { return "k" }}); err != nil {
			t.Errorf("New(%s): %v", p.Type, err)
		}
	}
}

// TestToolCallsThroughOpenAI: tools offered through langchaingo reach an OpenAI-compatible
// server as its tools, its tool calls come back as ToolCalls, and the conversation sent with
// the next turn carries the calls and their results.
func TestToolCallsThroughOpenAI(t *testing.T) {
	t.Parallel()
	srv := llmtest.New(t)
	p := llm.NewProviders(map[string]llm.Provider{"t": {Type: llm.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "m"}},
		llm.Options{Backoff: time.Millisecond, Log: zerolog.Nop()})
	c, err := p.Get("t")
	if err != nil {
		t.Fatal(err)
	}
	tools := []llm.ToolSpec{{Name: "lookup", Description: "looks up", Parameters: map[string]any{"type": "object",
		"properties": map[string]any{"host": map[string]any{"type": "string", "default": "db-1"}}}}}
	req := llm.Request{Prompt: "check the hosts", Tools: tools}
	resp, err := c.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "lookup" || resp.ToolCalls[0].ID != "call_1" ||
		resp.ToolCalls[0].Arguments != `{"host":"db-1"}` {
		t.Fatalf("tool calls %+v, want lookup {host: db-1}", resp.ToolCalls)
	}
	req.History = []llm.Message{{Assistant: true, ToolCalls: resp.ToolCalls},
		{ToolCallID: "call_1", ToolName: "lookup", Text: "db-1 is up"}}
	resp, err = c.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 0 || resp.Text != llmtest.Answer("check the hosts") {
		t.Errorf("second turn %+v, want the final answer", resp)
	}
	if got := srv.ToolResults(); len(got) != 1 || got[0] != "call_1: db-1 is up" {
		t.Errorf("tool results the server saw: %q", got)
	}
}

// toolConversation runs a conversation with two tools offered through provider p on srv:
// the model calls each tool in turn and then answers. It checks what every turn returned
// and gives the conversation's calls.
func toolConversation(t *testing.T, srv *llmtest.Server, p llm.Provider, firstText string) []llm.ToolCall {
	t.Helper()
	ps := llm.NewProviders(map[string]llm.Provider{"t": p},
		llm.Options{Backoff: time.Millisecond, Log: zerolog.Nop(), Getenv: func(string) string { return "sk-test" }})
	c, err := ps.Get("t")
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{System: "be brief", Prompt: "check the hosts", Tools: []llm.ToolSpec{
		{Name: "lookup", Description: "looks up", Parameters: map[string]any{"type": "object",
			"properties": map[string]any{"host": map[string]any{"type": "string", "default": "db-1"}}}},
		{Name: "page", Description: "pages", Parameters: map[string]any{"type": "object",
			"properties": map[string]any{"who": map[string]any{"type": "string", "enum": []any{"oncall"}}}}},
	}}
	// The server counts words: 2 + 3 of the prompts, 5 of its answer.
	wantUsage := llm.Usage{PromptTokens: 5, CompletionTokens: 5, TotalTokens: 10, Calls: 1}
	var calls []llm.ToolCall
	for i, want := range []llm.ToolCall{{Name: "lookup", Arguments: `{"host":"db-1"}`}, {Name: "page", Arguments: `{"who":"oncall"}`}} {
		resp, err := c.Generate(context.Background(), req)
		if err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID == "" || resp.ToolCalls[0].Name != want.Name ||
			resp.ToolCalls[0].Arguments != want.Arguments {
			t.Fatalf("turn %d: tool calls %+v, want one %s %s with an id", i+1, resp.ToolCalls, want.Name, want.Arguments)
		}
		if i == 0 && resp.Text != firstText {
			t.Errorf("turn 1: text %q, want %q", resp.Text, firstText)
		}
		if resp.Usage != wantUsage {
			t.Errorf("turn %d: usage %+v, want %+v", i+1, resp.Usage, wantUsage)
		}
		call := resp.ToolCalls[0]
		calls = append(calls, call)
		req.History = append(req.History, llm.Message{Assistant: true, Text: resp.Text, ToolCalls: resp.ToolCalls},
			llm.Message{ToolCallID: call.ID, ToolName: call.Name, Text: call.Name + " done"})
	}
	resp, err := c.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 0 || resp.Text != llmtest.Answer("check the hosts") || resp.Usage != wantUsage {
		t.Errorf("last turn %+v, want the final answer", resp)
	}
	if calls[0].ID == calls[1].ID {
		t.Errorf("the calls share the id %q", calls[0].ID)
	}
	// A conversation's results come again with each later turn.
	want := []string{calls[0].ID + ": lookup done", calls[0].ID + ": lookup done", calls[1].ID + ": page done"}
	if got := srv.ToolResults(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("tool results the server saw: %q, want %q", got, want)
	}
	return calls
}

// TestToolCallsThroughAnthropic: tools offered through langchaingo reach Anthropic's Messages
// API as its tools, its tool_use blocks come back as ToolCalls beside the text before them,
// and the next turn's conversation carries them as tool_use blocks of one assistant turn and
// their results as tool_result blocks of the user turn after it.
func TestToolCallsThroughAnthropic(t *testing.T) {
	t.Parallel()
	srv := llmtest.New(t)
	srv.Key = "sk-test"
	p := llm.Provider{Type: llm.ProviderAnthropic, BaseURL: srv.BaseURL(), Model: "claude-test", APIKeyEnv: "ANTHROPIC_KEY"}
	calls := toolConversation(t, srv, p, "I will call lookup.")
	if calls[0].ID != "toolu_1" || calls[1].ID != "toolu_2" {
		t.Errorf("call ids %q, %q, want Anthropic's", calls[0].ID, calls[1].ID)
	}

	// An answer with text and two calls: langchaingo would send its first part only, and
	// the server refuses results whose calls are not in the turn before them.
	c, err := llm.New("t", p, llm.Options{Log: zerolog.Nop(), Getenv: func(string) string { return "sk-test" }})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Generate(context.Background(), llm.Request{Prompt: "both at once", Tools: []llm.ToolSpec{{Name: "a"}, {Name: "b"}},
		History: []llm.Message{
			{Assistant: true, Text: "Both.", ToolCalls: []llm.ToolCall{{ID: "toolu_a", Name: "a", Arguments: "{}"}, {ID: "toolu_b", Name: "b", Arguments: "{}"}}},
			{ToolCallID: "toolu_a", ToolName: "a", Text: "A"}, {ToolCallID: "toolu_b", ToolName: "b", Text: "B"},
			{User: true, Text: "and now?"}}})
	if err != nil || resp.Text != llmtest.Answer("both at once") {
		t.Fatalf("two calls in one turn: %+v, %v", resp, err)
	}
	if got := srv.ToolResults(); !slices.Contains(got, "toolu_a: A") || !slices.Contains(got, "toolu_b: B") {
		t.Errorf("tool results the server saw: %q", got)
	}
}

// TestToolCallsThroughOllama: tools offered reach Ollama's /api/chat as its tools, its
// message.tool_calls come back as ToolCalls (numbered, as Ollama gives them no ids), and the
// next turn's conversation carries the calls and the results naming their tools.
func TestToolCallsThroughOllama(t *testing.T) {
	t.Parallel()
	srv := llmtest.New(t)
	calls := toolConversation(t, srv, llm.Provider{Type: llm.ProviderOllama, BaseURL: srv.URL, Model: "llama-test"}, "")
	if calls[0].ID != "call_1" || calls[1].ID != "call_2" {
		t.Errorf("call ids %q, %q, want call_1, call_2", calls[0].ID, calls[1].ID)
	}
}

// TestErrorsThroughEachProvider: the test server's failures reach a client of each provider
// type that speaks an API, with and without tools, as the classes the retries go by.
func TestErrorsThroughEachProvider(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic, llm.ProviderOllama} {
		for _, withTools := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s tools=%t", kind, withTools), func(t *testing.T) {
				t.Parallel()
				srv := llmtest.New(t)
				p := llm.Provider{Type: kind, BaseURL: srv.BaseURL(), Model: "m", MaxAttempts: 3}
				switch kind {
				case llm.ProviderAnthropic:
					p.APIKeyEnv = "ANTHROPIC_KEY"
				case llm.ProviderOllama:
					p.BaseURL = srv.URL
				}
				c, err := llm.New("t", p, llm.Options{Backoff: time.Millisecond, Log: zerolog.Nop(), Getenv: func(string) string { return "sk-test" }})
				if err != nil {
					t.Fatal(err)
				}
				req := func(prompt string) llm.Request {
					r := llm.Request{Prompt: prompt}
					if withTools {
						r.Tools = []llm.ToolSpec{{Name: "look", Description: "looks"}}
					}
					return r
				}
				srv.Fail("busy", 503, 1, "")
				resp, err := c.Generate(context.Background(), req("busy now"))
				if err != nil || resp.Usage.Calls != 2 || resp.Usage.TotalTokens == 0 {
					t.Errorf("a 503, then an answer: %+v, %v; want it retried once, with usage", resp, err)
				}
				srv.Fail("wrong", 400, -1, "")
				_, err = c.Generate(context.Background(), req("wrong request"))
				if e := new(llm.Error); !errors.As(err, &e) || e.Class != llm.ClassBadRequest || e.Attempts != 1 ||
					!strings.Contains(err.Error(), "injected failure 400") {
					t.Errorf("a 400: %v; want a bad request, not retried, with the server's message", err)
				}
			})
		}
	}
}
