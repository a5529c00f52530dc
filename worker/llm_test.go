package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
	"github.com/zksched/zksched/worker/llm"
)

// startLLMWorker runs a worker with every executor, whose provider "test" is the test
// server and "offline" the offline model; it stops when the test ends, or at stop, which
// returns once its shutdown is over.
func (b *testBundle) startLLMWorker(t testing.TB, id string, srv *llmtest.Server, slots int) (stop func()) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	providers := llm.NewProviders(map[string]llm.Provider{
		"test":    {Type: llm.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "test-model"},
		"keyless": {Type: llm.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "test-model", APIKeyEnv: "ZKSCHED_TEST_UNSET_KEY"},
		"offline": {Type: llm.ProviderOffline},
	}, llm.Options{Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Log: zerolog.Nop()})
	w := worker.New(worker.Config{ID: id, Groups: []string{"default"}, Slots: slots, PollInterval: 100 * time.Millisecond,
		ShutdownTimeout: time.Second, LogLimit: 1 << 20, Log: zerolog.Nop()}, b.db, openGate{},
		executor.Set{"noop": executor.Noop{}, "shell": executor.Shell{Self: self, KillGrace: 500 * time.Millisecond},
			"llm": executor.LLM{Providers: providers}, "agent": executor.Agent{Providers: providers}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func usageOf(t *testing.T, raw *json.RawMessage) llm.Usage {
	t.Helper()
	var u llm.Usage
	if raw == nil {
		t.Fatal("no usage recorded")
	}
	if err := json.Unmarshal(*raw, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestLLMAndAgentTasks runs shell → llm → agent → shell: the llm prompt sees the shell
// task's output and the params, each agent step sees the earlier steps, and the last shell
// task reads the agent's output from its environment. Usage is recorded per call, per step
// and per task.
func TestLLMAndAgentTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := llmtest.New(t)
	b.startLLMWorker(t, "w1", srv, 4)
	id := b.submit(t, `
name: pipeline
params: {topic: pools}
tasks:
  - {name: fetch-data, type: shell, command: 'echo "raw notes"'}
  - name: summary
    type: llm
    provider: test
    depends-on: [fetch-data]
    system: Be brief.
    prompt: 'Summarise {{ index .upstream "fetch-data" "output" }} on {{ .params.topic }}'
  - name: digest
    type: agent
    provider: test
    depends-on: [summary]
    steps:
      - {name: themes, prompt: 'Themes of [{{ .upstream.summary.output }}]'}
      - {name: report, prompt: 'Report on [{{ .steps.themes }}]'}
  - {name: publish, type: shell, depends-on: [digest], command: 'echo "published $ZKSCHED_UPSTREAM_digest_OUTPUT"'}
`)
	wf, tasks := b.waitDone(t, id)
	if wf.State != dao.WorkflowSucceeded {
		t.Fatalf("workflow %s: %v", wf.State, wf.Error)
	}
	summary := llmtest.Answer("Summarise raw notes on pools")
	themes := llmtest.Answer("Themes of [" + summary + "]")
	report := llmtest.Answer("Report on [" + themes + "]")
	if o := tasks["summary"].Output; o == nil || *o != summary {
		t.Errorf("summary output = %v, want %q", o, summary)
	}
	if o := tasks["digest"].Output; o == nil || *o != report {
		t.Errorf("digest output = %v, want %q", o, report)
	}
	if o := tasks["publish"].Output; o == nil || *o != "published "+report {
		t.Errorf("publish output = %v, want the agent's output through $ZKSCHED_UPSTREAM_digest_OUTPUT", o)
	}

	// summary: 2 system + 5 prompt words, 7 answer words.
	if got, want := usageOf(t, tasks["summary"].Usage), (llm.Usage{PromptTokens: 7, CompletionTokens: 7, TotalTokens: 14, Calls: 1}); got != want {
		t.Errorf("summary usage = %+v, want %+v", got, want)
	}
	cps, err := b.db.CheckpointListForTask(b.ctx, tasks["digest"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 2 || cps[0].Step != "themes" || cps[0].Output != themes || cps[1].Step != "report" || cps[1].Output != report {
		t.Fatalf("checkpoints = %+v", cps)
	}
	var sum llm.Usage
	for _, cp := range cps {
		raw := json.RawMessage(cp.Usage)
		u := usageOf(t, &raw)
		if u.TotalTokens == 0 || u.Calls != 1 {
			t.Errorf("step %s usage = %+v", cp.Step, u)
		}
		sum = sum.Add(u)
	}
	if got := usageOf(t, tasks["digest"].Usage); got != sum {
		t.Errorf("digest usage = %+v, want the sum of its steps %+v", got, sum)
	}
	as, err := b.db.AttemptList(b.ctx, tasks["digest"].ID)
	if err != nil || len(as) != 1 || usageOf(t, as[0].Usage) != sum {
		t.Errorf("digest attempts = %+v, %v; want one with the steps' usage", as, err)
	}
	log, _ := b.db.TaskLogRead(b.ctx, tasks["digest"].ID, 1)
	if !strings.Contains(log, "step 2/2 report: calling provider test (model test-model)") || !strings.Contains(log, report) {
		t.Errorf("digest log lacks the call and its answer:\n%s", log)
	}
}

// TestAgentRetryResumesFromCheckpoints fails step 3 of a 4-step agent once with a 400 (not
// retried by the client): the task's retry goes on from step 3, and steps 1 and 2 are never
// sent again.
func TestAgentRetryResumesFromCheckpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := llmtest.New(t)
	srv.Fail("step three", 400, 1, "")
	b.startLLMWorker(t, "w1", srv, 4)
	id := b.submit(t, `
name: four-steps
tasks:
  - name: agent
    type: agent
    provider: test
    retries: 1
    steps:
      - {name: one, prompt: 'step one'}
      - {name: two, prompt: 'step two after [{{ .steps.one }}]'}
      - {name: three, prompt: 'step three after [{{ .steps.two }}]'}
      - {name: four, prompt: 'step four after [{{ .steps.three }}]'}
`)
	wf, tasks := b.waitDone(t, id)
	if wf.State != dao.WorkflowSucceeded {
		t.Fatalf("workflow %s: %v", wf.State, wf.Error)
	}
	for step, want := range map[string]int{"step one": 1, "step two": 1, "step three": 2, "step four": 1} {
		if got := srv.Calls(step); got != want {
			t.Errorf("server saw %q %d times, want %d", step, got, want)
		}
	}
	a := tasks["agent"]
	if got := b.attempts(t, a.ID); strings.Join(got, ",") != "failed,succeeded" {
		t.Errorf("attempts = %v, want failed then succeeded", got)
	}
	as, err := b.db.AttemptList(b.ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if as[0].Error == nil || !strings.Contains(*as[0].Error, `step "three": llm provider "test": bad request (HTTP 400)`) {
		t.Errorf("attempt 1 error = %v", as[0].Error)
	}
	first, second := usageOf(t, as[0].Usage), usageOf(t, as[1].Usage)
	if first.Calls != 3 || second.Calls != 2 {
		t.Errorf("attempt usage %+v then %+v: want 3 requests (two steps and the failed one), then 2", first, second)
	}
	total := usageOf(t, a.Usage)
	if total.Calls != 4 || total.TotalTokens != first.TotalTokens+second.TotalTokens {
		t.Errorf("task usage = %+v, want the four answered steps (%+v + %+v)", total, first, second)
	}
	log, _ := b.db.TaskLogRead(b.ctx, a.ID, 2)
	if !strings.Contains(log, "step 1/4 one: done by attempt 1, taken from its checkpoint") {
		t.Errorf("attempt 2 log does not say it resumed:\n%s", log)
	}
}

// TestLLMTaskFailures: what cannot be known at submit time fails the task at run time with a
// message saying what to fix, and a timeout stops a call in flight.
func TestLLMTaskFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := llmtest.New(t)
	release := srv.Hold("hang")
	t.Cleanup(release)
	b.startLLMWorker(t, "w1", srv, 8)
	id := b.submit(t, `
name: failures
tasks:
  - {name: unknown-provider, type: llm, provider: nowhere, prompt: hi}
  - {name: no-key, type: llm, provider: keyless, prompt: hi}
  - {name: missing-param, type: llm, provider: test, prompt: 'about {{ .params.region }}'}
  - {name: refused, type: llm, provider: test, prompt: 'forbidden words'}
  - {name: hangs, type: llm, provider: test, prompt: 'hang on', timeout: 500ms}
`)
	srv.Fail("forbidden", 401, -1, "")
	_, tasks := b.waitDone(t, id)
	for name, want := range map[string]string{
		"unknown-provider": `llm provider "nowhere": config: no such provider in this worker's config (llm.providers; configured: keyless, offline, test)`,
		"no-key":           `llm provider "keyless": config: the API key variable ZKSCHED_TEST_UNSET_KEY is not set in the worker's environment (llm.providers.keyless.api-key-env)`,
		"missing-param":    `prompt: prompt:1:16: executing "prompt" at <.params.region>: map has no entry for key "region"`,
		"refused":          `llm provider "test": auth (HTTP 401): API returned unexpected status code: 401: injected failure 401`,
		"hangs":            `timed out after 500ms`,
	} {
		ti := tasks[name]
		if ti.State != dao.TaskFailed || ti.Error == nil || *ti.Error != want {
			t.Errorf("%s: %s, error %v; want failed with %q", name, ti.State, deref(ti.Error), want)
		}
	}
	if n := srv.Calls("forbidden"); n != 1 {
		t.Errorf("the 401 was sent %d times, want once", n)
	}
	if n := srv.Calls("hang on"); n != 1 {
		t.Errorf("the hanging call was sent %d times, want once", n)
	}
	if got := b.attempts(t, tasks["hangs"].ID); strings.Join(got, ",") != "timed_out" {
		t.Errorf("hangs attempts = %v, want one timeout", got)
	}
}

// TestPoolLimitsAcrossWorkers queues more pooled LLM tasks than the pool has room for, on two
// workers with slots to spare: the test server never sees more requests at once than the
// pool allows, and tasks outside the pool are not held up.
func TestPoolLimitsAcrossWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := llmtest.New(t)
	srv.Delay("pooled", 300*time.Millisecond)
	if err := b.db.PoolSetLimits(b.ctx, map[string]int{"model": 2}); err != nil {
		t.Fatal(err)
	}
	b.startLLMWorker(t, "w1", srv, 1)
	b.startLLMWorker(t, "w2", srv, 6)
	var y strings.Builder
	y.WriteString("name: pooled\ntasks:\n")
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		y.WriteString("  - {name: " + n + ", type: llm, provider: test, pool: model, prompt: 'pooled " + n + "'}\n")
	}
	y.WriteString("  - {name: free, type: llm, provider: offline, prompt: 'not pooled'}\n")
	id := b.submit(t, y.String())
	wf, tasks := b.waitDone(t, id)
	if wf.State != dao.WorkflowSucceeded {
		t.Fatalf("workflow %s: %v", wf.State, wf.Error)
	}
	if h := srv.HighWater(); h != 2 {
		t.Errorf("the server saw %d requests at once, want the pool's limit, 2", h)
	}
	// w2 alone has slots for more than the pool, so a limit kept per worker would have let
	// the server see up to 7 at once; where the tasks ran is up to the claim race.
	ran := map[string]int{}
	for _, ti := range tasks {
		ran[*ti.WorkerID]++
	}
	t.Logf("tasks per worker: %v", ran)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// loopingPrompt stays within every bound of a prompt template but takes minutes unstopped:
// each of its 100,000 turns escapes the 60 KB param big.
const loopingPrompt = `'{{range 100000}}{{if eq (html $.params.big) ""}}{{end}}{{end}}'`

// TestLoopingPromptFreesItsSlot runs llm and agent tasks whose prompts loop on a worker with
// one slot: one ends at its timeout, one at a kill, and each time the task queued behind it
// gets the slot.
func TestLoopingPromptFreesItsSlot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := llmtest.New(t)
	b.startLLMWorker(t, "w1", srv, 1)
	big := strings.Repeat("<", 60<<10)

	// The timeout: the llm task goes first (its priority is higher), and the noop task can
	// only run once the slot is free.
	id := b.submit(t, `
name: loops-until-timeout
params: {big: "`+big+`"}
tasks:
  - {name: loops, type: llm, provider: test, priority: 10, timeout: 1s, prompt: `+loopingPrompt+`}
  - {name: behind, type: noop}
`)
	wf, tasks := b.waitDone(t, id)
	if ti := tasks["loops"]; ti.State != dao.TaskFailed || deref(ti.Error) != "timed out after 1s" {
		t.Errorf("loops: %s, error %q; want failed, timed out after 1s", ti.State, deref(ti.Error))
	}
	if tasks["behind"].State != dao.TaskSucceeded || wf.State != dao.WorkflowFailed {
		t.Errorf("behind %s, workflow %s; want the task behind run once the slot was free", tasks["behind"].State, wf.State)
	}

	// The kill: the agent's second step loops with no timeout of its own.
	id = b.submit(t, `
name: loops-until-killed
params: {big: "`+big+`"}
tasks:
  - name: loops
    type: agent
    provider: test
    priority: 10
    steps:
      - {name: first, prompt: first}
      - {name: second, prompt: `+loopingPrompt+`}
  - {name: behind, type: noop}
`)
	running := b.waitTask(t, id, "loops", "its first step answered", func(dao.TaskInstance) bool { return srv.Answered("first") == 1 })
	if _, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, running.ID); err != nil {
		t.Fatal(err)
	}
	wf, tasks = b.waitDone(t, id)
	if ti := tasks["loops"]; ti.State != dao.TaskKilled {
		t.Errorf("loops: %s, error %q; want killed", ti.State, deref(ti.Error))
	}
	if tasks["behind"].State != dao.TaskSucceeded || wf.State != dao.WorkflowFailed {
		t.Errorf("behind %s, workflow %s; want the task behind run once the slot was free", tasks["behind"].State, wf.State)
	}
	if n := srv.Calls(""); n != 1 {
		t.Errorf("%d model calls; want the first step's only", n)
	}
}
