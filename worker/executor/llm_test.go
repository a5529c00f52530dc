package executor

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
)

// memCheckpoints is a Checkpointer in memory; refuse makes Save fail from that step on, as a
// refused token does.
type memCheckpoints struct {
	mu     sync.Mutex
	steps  map[string]Checkpoint
	saved  []string
	refuse string
}

func (m *memCheckpoints) Load(context.Context) (map[string]Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Checkpoint, len(m.steps))
	for k, v := range m.steps {
		out[k] = v
	}
	return out, nil
}

func (m *memCheckpoints) Save(_ context.Context, step string, cp Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if step == m.refuse {
		return errors.New("fencing token refused")
	}
	cp.Attempt = 9
	m.steps[step] = cp
	m.saved = append(m.saved, step)
	return nil
}

func testProviders(t *testing.T) (*llm.Providers, *llmtest.Server) {
	t.Helper()
	srv := llmtest.New(t)
	return llm.NewProviders(map[string]llm.Provider{
		"test": {Type: llm.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "m"},
	}, llm.Options{Backoff: time.Millisecond, Log: zerolog.Nop()}), srv
}

func agentTask(cps Checkpointer) Task {
	return Task{
		Params:   map[string]string{"who": "ops"},
		Upstream: map[string]workflow.Upstream{"fetch": {Output: "notes"}},
		Spec: workflow.Task{Type: "agent", Provider: "test", System: "for {{ .params.who }}", Steps: []workflow.Step{
			{Name: "a", Prompt: "A {{ .upstream.fetch.output }}"},
			{Name: "b", Prompt: "B [{{ .steps.a }}]"},
			{Name: "c", Prompt: "C [{{ .steps.b }}]"},
		}},
		Checkpoints: cps,
	}
}

func TestAgentGoesOnFromCheckpoints(t *testing.T) {
	t.Parallel()
	providers, srv := testProviders(t)
	a := llmtest.Answer("A notes")
	cps := &memCheckpoints{steps: map[string]Checkpoint{"a": {Output: a, Usage: llm.Usage{TotalTokens: 7, Calls: 1}, Attempt: 1}}}
	var log bytes.Buffer
	res := Agent{Providers: providers}.Run(context.Background(), agentTask(cps), &log)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	b := llmtest.Answer("B [" + a + "]")
	if want := llmtest.Answer("C [" + b + "]"); res.Output != want {
		t.Errorf("output = %q, want %q", res.Output, want)
	}
	if got := srv.Prompts(); !slices.Equal(got, []string{"B [" + a + "]", "C [" + b + "]"}) {
		t.Errorf("prompts sent = %q, want steps b and c only", got)
	}
	if !slices.Equal(cps.saved, []string{"b", "c"}) {
		t.Errorf("saved %v, want b and c", cps.saved)
	}
	if res.Usage.Calls != 2 || res.TaskUsage.Calls != 3 || res.TaskUsage.TotalTokens != res.Usage.TotalTokens+7 {
		t.Errorf("usage %+v, task usage %+v: want this attempt's 2 calls, and the restored step's on top", res.Usage, res.TaskUsage)
	}
	if !strings.Contains(log.String(), "step 1/3 a: done by attempt 1, taken from its checkpoint (7 tokens)") {
		t.Errorf("log:\n%s", log.String())
	}
}

func TestAgentStopsWhenACheckpointIsRefused(t *testing.T) {
	t.Parallel()
	providers, srv := testProviders(t)
	cps := &memCheckpoints{steps: map[string]Checkpoint{}, refuse: "b"}
	res := Agent{Providers: providers}.Run(context.Background(), agentTask(cps), &bytes.Buffer{})
	if res.Err == nil || !strings.Contains(res.Err.Error(), `checkpoint step "b": fencing token refused`) {
		t.Fatalf("error = %v", res.Err)
	}
	if n := len(srv.Prompts()); n != 2 {
		t.Errorf("%d calls, want 2: step c must not run after b's checkpoint was refused", n)
	}
}

func TestLLMRendersAndReportsUsage(t *testing.T) {
	t.Parallel()
	providers, srv := testProviders(t)
	temp := 0.0
	task := Task{Params: map[string]string{"who": "ops"}, Upstream: map[string]workflow.Upstream{"fetch-data": {Output: "notes"}},
		Spec: workflow.Task{Type: "llm", Provider: "test", Temperature: &temp, MaxTokens: 10,
			Prompt: `Sum up {{ index .upstream "fetch-data" "output" }} for {{ .params.who }}`}}
	res := LLM{Providers: providers}.Run(context.Background(), task, &bytes.Buffer{})
	if res.Err != nil || res.Output != llmtest.Answer("Sum up notes for ops") || res.Usage == nil || res.Usage.Calls != 1 {
		t.Fatalf("result = %+v", res)
	}
	if got := srv.Prompts(); len(got) != 1 {
		t.Errorf("prompts = %q", got)
	}
	// A shell task downstream gets the same outputs in its environment.
	env := task.Env()
	if !slices.Contains(env, "ZKSCHED_UPSTREAM_fetch_data_OUTPUT=notes") {
		t.Errorf("env %q lacks the upstream output", env)
	}
}

// TestLLMPromptSeesItsItem: the prompt of a for-each task's item renders its item and index.
func TestLLMPromptSeesItsItem(t *testing.T) {
	t.Parallel()
	providers, _ := testProviders(t)
	task := Task{Item: &workflow.Item{Value: "a.md", Index: 2},
		Spec: workflow.Task{Type: "llm", Provider: "test", ForEach: "a.md", Prompt: `Summarise {{ .item }} ({{ .index }})`}}
	res := LLM{Providers: providers}.Run(context.Background(), task, &bytes.Buffer{})
	if res.Err != nil || res.Output != llmtest.Answer("Summarise a.md (2)") {
		t.Fatalf("result = %+v", res)
	}
}

// loopingPrompt stays within every bound of a prompt template but takes minutes: each of its
// 100,000 turns escapes a 60 KB param.
const loopingPrompt = `{{range 100000}}{{if eq (html $.params.big) ""}}{{end}}{{end}}`

// runWithin runs f and waits for its result once ctx has ended, far longer than a stopped
// render takes, far shorter than the looping prompt takes unstopped.
func runWithin(t *testing.T, ctx context.Context, f func() Result) Result {
	t.Helper()
	done := make(chan Result, 1)
	go func() { done <- f() }()
	select {
	case res := <-done:
		return res
	case <-ctx.Done():
	}
	select {
	case res := <-done:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("the task did not end within 10 s of its context ending")
		return Result{}
	}
}

// cancelOn is a task log that cancels the attempt (a kill) when a line it is written holds
// marker.
type cancelOn struct {
	mu     sync.Mutex
	marker string
	cancel context.CancelFunc
	bytes.Buffer
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.Contains(string(p), c.marker) {
		c.cancel()
	}
	return c.Buffer.Write(p)
}

// TestLoopingPromptEndsWithItsContext checks an llm task whose prompt loops ends at its
// timeout, and an agent whose second step's prompt loops ends at a kill arriving after the
// first step, without a model call for the looping prompt.
func TestLoopingPromptEndsWithItsContext(t *testing.T) {
	t.Parallel()
	params := map[string]string{"big": strings.Repeat("<", 60<<10)}
	t.Run("llm timeout", func(t *testing.T) {
		t.Parallel()
		providers, srv := testProviders(t)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		task := Task{Params: params, Spec: workflow.Task{Type: "llm", Provider: "test", Prompt: loopingPrompt}}
		res := runWithin(t, ctx, func() Result { return LLM{Providers: providers}.Run(ctx, task, &bytes.Buffer{}) })
		if !errors.Is(res.Err, context.DeadlineExceeded) {
			t.Errorf("error = %v; want the prompt's rendering stopped by the timeout", res.Err)
		}
		if got := srv.Prompts(); len(got) != 0 {
			t.Errorf("%d prompts sent; want none", len(got))
		}
	})
	t.Run("agent kill", func(t *testing.T) {
		t.Parallel()
		providers, srv := testProviders(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		task := Task{Params: params, Checkpoints: &memCheckpoints{steps: map[string]Checkpoint{}},
			Spec: workflow.Task{Type: "agent", Provider: "test", Steps: []workflow.Step{
				{Name: "a", Prompt: "first"}, {Name: "b", Prompt: loopingPrompt}}}}
		log := &cancelOn{marker: "step 1/2 a: answered", cancel: cancel}
		res := runWithin(t, ctx, func() Result { return Agent{Providers: providers}.Run(ctx, task, log) })
		if !errors.Is(res.Err, context.Canceled) {
			t.Errorf("error = %v; want step b's rendering stopped by the kill", res.Err)
		}
		if got := srv.Prompts(); !slices.Equal(got, []string{"first"}) {
			t.Errorf("prompts sent = %q; want step a's only", got)
		}
	})
}
