// Package llmtest is a chat model server for tests, on loopback, that speaks OpenAI's chat
// completions API, Anthropic's Messages API and Ollama's chat API. It answers every prompt
// deterministically ("answer to: <prompt>") with token usage (offered tools, it first calls
// each of them once, in order, with arguments from their schemas), counts the requests per
// prompt and records when each arrived, records the high-water mark of requests in flight,
// and misbehaves on demand: an HTTP error (429 with Retry-After, 5xx, 400, 401) for the next
// n requests whose prompt contains a string, a delay, or a hold until the test releases it.
// The worker under test reaches it through a provider whose base-url is BaseURL (openai,
// anthropic) or URL (ollama), in-process or from a real worker process.
package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is the test model server.
type Server struct {
	*httptest.Server
	// Key, if set, is the API key every request must carry (else 401): a bearer token for
	// OpenAI's API, x-api-key for Anthropic's; Ollama's takes none.
	Key string

	mu       sync.Mutex
	rules    []*rule
	prompts  []string    // every request's user prompt, in arrival order
	arrived  []time.Time // when each of prompts arrived
	answered []string    // the prompts answered with 200
	// toolResults are the tool results the requests carried.
	toolResults []string
	inFlight    int
	high        int
	served      time.Duration // time spent answering the 200s, delays included
	changed     chan struct{} // closed and replaced at every change
}

type rule struct {
	prefix     string
	answers    []string // final answers to give in turn; the last one again once they are spent
	status     int
	retryAfter string
	times      int // requests left to apply to; <0 for every one
	delay      time.Duration
	hold       chan struct{}
}

// New starts a server, closed when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{changed: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

// BaseURL is what an openai or anthropic provider's base-url should be; an ollama
// provider's is URL.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Fail makes the next times requests whose prompt starts with prefix fail with status (and,
// for a 429, Retry-After: retryAfter when it is not ""). times < 0 means every one.
func (s *Server) Fail(prefix string, status, times int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{prefix: prefix, status: status, times: times, retryAfter: retryAfter})
}

// Delay makes every request whose prompt starts with prefix wait d before its answer.
func (s *Server) Delay(prefix string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{prefix: prefix, times: -1, delay: d})
}

// Hold makes requests whose prompt starts with prefix wait until release is called (or the
// client goes away). release may be called more than once.
func (s *Server) Hold(prefix string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.rules = append(s.rules, &rule{prefix: prefix, times: -1, hold: ch})
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// Calls returns how many requests had a prompt starting with prefix, failed ones included.
func (s *Server) Calls(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return count(s.prompts, prefix)
}

// Answered returns how many requests with a prompt starting with prefix were answered with 200.
func (s *Server) Answered(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return count(s.answered, prefix)
}

// Prompts returns every prompt received, in order.
func (s *Server) Prompts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.prompts...)
}

// Arrivals returns when each request with a prompt starting with prefix arrived, failed ones
// included, in arrival order.
func (s *Server) Arrivals(prefix string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var at []time.Time
	for i, p := range s.prompts {
		if strings.HasPrefix(p, prefix) {
			at = append(at, s.arrived[i])
		}
	}
	return at
}

// HighWater returns the most requests that were in flight at once.
func (s *Server) HighWater() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.high
}

// Served returns how many requests were answered with 200 and the time the server spent on
// them, delays included: the server's own share of a call's latency.
func (s *Server) Served() (int, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.answered), s.served
}

// WaitCalls waits up to d until at least n requests with a prompt starting with prefix have
// arrived, and fails the test otherwise.
func (s *Server) WaitCalls(t testing.TB, prefix string, n int, d time.Duration) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got, changed := count(s.prompts, prefix), s.changed
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("llmtest: %d requests with %q after %v, want %d; prompts so far: %q", got, prefix, d, n, s.Prompts())
		}
	}
}

// Answer is the server's reply to prompt.
func Answer(prompt string) string { return "answer to: " + prompt }

func count(list []string, prefix string) int {
	n := 0
	for _, p := range list {
		if strings.HasPrefix(p, prefix) {
			n++
		}
	}
	return n
}

// notify wakes WaitCalls; s.mu is held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string            `json:"role"`
		Content    json.RawMessage   `json:"content"`
		ToolCalls  []json.RawMessage `json:"tool_calls"`
		ToolCallID string            `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

// Answer makes the final answers (those that call no tool) to requests whose prompt starts
// with prefix be answers, one after the other, the last one again once they are spent.
func (s *Server) Answer(prefix string, answers ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{prefix: prefix, answers: answers, times: -1})
}

// ToolResults returns the tool results the requests carried, as "call-id: content", in
// arrival order (a conversation's results come again with each later turn). An Ollama
// result names its call by the tool_call_id the client sent, else by its tool_name.
func (s *Server) ToolResults() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.toolResults...)
}

// toolArguments are the arguments the server calls a tool with: each property's default,
// else its first enum value, else a value of its type.
func toolArguments(schema map[string]any) string {
	out := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		prop, _ := p.(map[string]any)
		switch e, _ := prop["enum"].([]any); {
		case prop["default"] != nil:
			out[name] = prop["default"]
		case len(e) > 0:
			out[name] = e[0]
		case prop["type"] == "integer" || prop["type"] == "number":
			out[name] = 1
		case prop["type"] == "boolean":
			out[name] = true
		default:
			out[name] = "test"
		}
	}
	raw, _ := json.Marshal(out)
	return string(raw)
}

// text reads a message's content, a string or a list of parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// conversation is what the server reads of a request, whatever API it came by.
type conversation struct {
	model, prompt, system string
	// called counts the tool calls of the model's earlier answers.
	called int
	tools  []offered
	// results are the tool results, as "call-id: content".
	results []string
}

// offered is a tool a request offers.
type offered struct {
	name   string
	params map[string]any
}

// api is one of the APIs the server speaks: how it reads a request, checks its key, and
// writes an answer or an error.
type api struct {
	read       func(r *http.Request) (conversation, error)
	authorized func(s *Server, r *http.Request) bool
	// answer writes the final answer, or (call > 0) the call-th tool call, of tool.
	answer   func(w http.ResponseWriter, c conversation, text string, call int, tool offered, promptTokens, completionTokens int)
	writeErr func(w http.ResponseWriter, status int, retryAfter, msg string)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var a api
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		a = openAI
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
		a = anthropicAPI
	case r.Method == http.MethodPost && r.URL.Path == "/api/chat":
		a = ollamaAPI
	default:
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	c, err := a.read(r)
	if err != nil {
		a.writeErr(w, http.StatusBadRequest, "", err.Error())
		return
	}
	prompt := c.prompt

	s.mu.Lock()
	s.prompts = append(s.prompts, prompt)
	s.toolResults = append(s.toolResults, c.results...)
	s.arrived = append(s.arrived, start)
	s.inFlight++
	s.high = max(s.high, s.inFlight)
	var fail *rule
	var delay time.Duration
	var holds []chan struct{}
	answer := Answer(prompt)
	for _, ru := range s.rules {
		if ru.times == 0 || !strings.HasPrefix(prompt, ru.prefix) {
			continue
		}
		switch {
		case len(ru.answers) > 0:
			if c.called >= len(c.tools) {
				answer = ru.answers[0]
				if len(ru.answers) > 1 {
					ru.answers = ru.answers[1:]
				}
			}
		case ru.status != 0 && fail == nil:
			fail = ru
			if ru.times > 0 {
				ru.times--
			}
		case ru.delay > 0:
			delay += ru.delay
		case ru.hold != nil:
			holds = append(holds, ru.hold)
		}
	}
	s.notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.notify()
		s.mu.Unlock()
	}()

	if s.Key != "" && !a.authorized(s, r) {
		a.writeErr(w, http.StatusUnauthorized, "", "Incorrect API key provided")
		return
	}
	for _, h := range holds {
		select {
		case <-h:
		case <-r.Context().Done():
			return
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if fail != nil {
		a.writeErr(w, fail.status, fail.retryAfter, fmt.Sprintf("injected failure %d", fail.status))
		return
	}
	promptTokens := len(strings.Fields(c.system)) + len(strings.Fields(prompt))
	completionTokens := len(strings.Fields(answer))
	// Offered tools, the server calls each once, in order, one a turn, and then answers.
	call, tool := 0, offered{}
	if c.called < len(c.tools) {
		call, tool = c.called+1, c.tools[c.called]
	}
	a.answer(w, c, answer, call, tool, promptTokens, completionTokens)
	s.mu.Lock()
	s.answered = append(s.answered, prompt)
	s.served += time.Since(start)
	s.mu.Unlock()
}

// openAI is OpenAI's chat completions API (POST …/chat/completions).
var openAI = api{
	read: func(r *http.Request) (conversation, error) {
		var req chatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			return conversation{}, fmt.Errorf("malformed request: %w", err)
		}
		c := conversation{model: req.Model}
		for _, m := range req.Messages {
			switch m.Role {
			case "user":
				// The conversation's prompt is its first user message; later ones (a repair's
				// request) follow it.
				if c.prompt == "" {
					c.prompt = text(m.Content)
				}
			case "system":
				c.system = text(m.Content)
			case "assistant":
				c.called += len(m.ToolCalls)
			case "tool":
				c.results = append(c.results, m.ToolCallID+": "+text(m.Content))
			}
		}
		for _, t := range req.Tools {
			c.tools = append(c.tools, offered{name: t.Function.Name, params: t.Function.Parameters})
		}
		return c, nil
	},
	authorized: func(s *Server, r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+s.Key },
	answer: func(w http.ResponseWriter, c conversation, answer string, call int, tool offered, promptTokens, completionTokens int) {
		choice := map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer}}
		if call > 0 {
			choice = map[string]any{"index": 0, "finish_reason": "tool_calls",
				"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
					"id": fmt.Sprintf("call_%d", call), "type": "function",
					"function": map[string]any{"name": tool.name, "arguments": toolArguments(tool.params)}}}}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion", "created": time.Now().Unix(), "model": c.model,
			"choices": []map[string]any{choice},
			"usage": map[string]int{"prompt_tokens": promptTokens, "completion_tokens": completionTokens,
				"total_tokens": promptTokens + completionTokens},
		})
	},
	writeErr: writeError,
}

func writeError(w http.ResponseWriter, status int, retryAfter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "test", "code": status}})
}
