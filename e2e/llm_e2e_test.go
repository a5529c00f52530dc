package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
)

// llmEnv points the processes' provider "test" at the test server, with its API key in a
// variable of their environment.
func llmEnv(srv *llmtest.Server) []string {
	return []string{
		"ZKSCHED_LLM_PROVIDERS_TEST_TYPE=openai",
		"ZKSCHED_LLM_PROVIDERS_TEST_BASE_URL=" + srv.BaseURL(),
		"ZKSCHED_LLM_PROVIDERS_TEST_MODEL=test-model",
		"ZKSCHED_LLM_PROVIDERS_TEST_API_KEY_ENV=LLMTEST_API_KEY",
		"LLMTEST_API_KEY=" + srv.Key,
	}
}

// TestAgentResumesAcrossKillAndRetry runs two 4-step agent tasks on real processes. The
// first one's worker is killed with kill -9 while step 3 is in flight, after step 2 was
// checkpointed: the task fails over, another worker finishes it from step 3. The second one
// fails step 3 once with a 400 and is retried. The model server sees steps 1 and 2 of each
// exactly once.
func TestAgentResumesAcrossKillAndRetry(t *testing.T) {
	t.Parallel()
	srv := llmtest.New(t)
	srv.Key = "sk-e2e"
	holdStep3 := srv.Hold("A3")
	defer holdStep3()
	srv.Fail("B3", 400, 1, "")
	e := setupE2E(t, nil, "", llmEnv(srv)...)
	e.Master("master")
	w1 := e.Worker("worker-1")
	wfFile := e.file(t, "agents.yaml", `
name: agents
tasks:
  - name: killed
    type: agent
    provider: test
    steps:
      - {name: one, prompt: 'A1'}
      - {name: two, prompt: 'A2 [{{ .steps.one }}]'}
      - {name: three, prompt: 'A3 [{{ .steps.two }}]'}
      - {name: four, prompt: 'A4 [{{ .steps.three }}]'}
  - name: retried
    type: agent
    provider: test
    depends-on: [killed]
    retries: 1
    steps:
      - {name: one, prompt: 'B1 [{{ .upstream.killed.output }}]'}
      - {name: two, prompt: 'B2 [{{ .steps.one }}]'}
      - {name: three, prompt: 'B3 [{{ .steps.two }}]'}
      - {name: four, prompt: 'B4 [{{ .steps.three }}]'}
`)
	if out, code := e.Run("submit", wfFile); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	srv.WaitCalls(t, "A3", 1, 60*time.Second)
	killed := e.tasks(t, 1)["killed"]
	cps, err := e.db.CheckpointListForTask(context.Background(), killed.ID)
	if err != nil || len(cps) != 2 {
		t.Fatalf("checkpoints while step 3 is in flight = %+v, %v; want steps one and two", cps, err)
	}
	if err := w1.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w1.Wait(t, 10*time.Second)
	holdStep3()
	e.Worker("worker-2")
	waitUntil(t, 60*time.Second, "the workflow to finish", func() bool {
		wf, err := e.db.WorkflowGet(context.Background(), 1)
		return err == nil && wf.State.Terminal()
	})
	if wf, _ := e.db.WorkflowGet(context.Background(), 1); wf.State != dao.WorkflowSucceeded {
		t.Fatalf("workflow %s: %v", wf.State, wf.Error)
	}
	for prefix, want := range map[string]int{"A1": 1, "A2": 1, "A3": 2, "A4": 1, "B1": 1, "B2": 1, "B3": 2, "B4": 1} {
		if got := srv.Calls(prefix); got != want {
			t.Errorf("the server saw %s %d times, want %d", prefix, got, want)
		}
	}
	ts := e.tasks(t, 1)
	if o := e.outcomes(t, ts["killed"].ID); !strings.HasPrefix(o, "failed_over@") || !strings.Contains(o, ",succeeded@") {
		t.Errorf("killed task attempts = %s, want failed over then succeeded", o)
	}
	if o := e.outcomes(t, ts["retried"].ID); !strings.HasPrefix(o, "failed@") || !strings.Contains(o, ",succeeded@") {
		t.Errorf("retried task attempts = %s, want failed then succeeded", o)
	}
	a1 := llmtest.Answer("A1")
	a2 := llmtest.Answer("A2 [" + a1 + "]")
	a3 := llmtest.Answer("A3 [" + a2 + "]")
	if o := ts["killed"].Output; o == nil || *o != llmtest.Answer("A4 ["+a3+"]") {
		t.Errorf("killed task output = %v", o)
	}
	cps, err = e.db.CheckpointListForTask(context.Background(), ts["killed"].ID)
	if err != nil {
		t.Fatal(err)
	}
	var byAttempt []string
	for _, cp := range cps {
		byAttempt = append(byAttempt, fmt.Sprintf("%s@%d", cp.Step, cp.Attempt))
	}
	if got := strings.Join(byAttempt, ","); got != "one@1,two@1,three@2,four@2" {
		t.Errorf("checkpoints by attempt = %s, want steps one and two from attempt 1, the rest from attempt 2", got)
	}
	if ts["killed"].Usage == nil || ts["retried"].Usage == nil {
		t.Error("no task usage recorded")
	}
}

// TestSubmitRefusesUnknownProviderAndPool: what the submitter's config can tell is refused
// before anything is stored.
func TestSubmitRefusesUnknownProviderAndPool(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_POOLS_OPENAI=4")
	out, code := e.Run("submit", e.file(t, "bad.yaml", `
name: bad
tasks:
  - {name: a, type: llm, provider: openai-mian, prompt: hi, pool: openai}
  - {name: b, type: llm, provider: demo, prompt: hi, pool: opneai}
`))
	if code != 1 || !strings.Contains(out, "rejected, nothing stored") ||
		!strings.Contains(out, `task "a": provider "openai-mian" is not in the config's llm.providers (configured: demo)`) ||
		!strings.Contains(out, `task "b": pool "opneai" has no limit in the config's pools (configured: openai)`) {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	if n, err := e.db.WorkflowGet(context.Background(), 1); err == nil {
		t.Errorf("a workflow instance was stored: %+v", n)
	}
}

// TestDemoRunsOffline runs examples/demo.yaml as the quickstart does, with the default
// config: its agent step answers through the offline provider, and its four parallel tasks
// run two on each worker, the workers knowing each other from the registry. Each leaves the
// other its share for 1 s rather than the default 100 ms, which a loaded machine running the
// tests in parallel may not give a worker to come for it.
func TestDemoRunsOffline(t *testing.T) {
	t.Parallel()
	env := []string{"ZKSCHED_WORKER_SPREAD_WAIT=1s"}
	if os.Geteuid() == 0 {
		// The quickstart, run as root, runs the tasks as a user of their own.
		env = append(env, "ZKSCHED_WORKER_TASK_USER="+testenv.TaskUser(t).Username)
	}
	e := setupE2E(t, nil, "", env...)
	e.Master("master")
	workers := []*testcluster.Proc{e.Worker("worker-1"), e.Worker("worker-2")}
	for _, w := range workers {
		w.WaitLog(t, 30*time.Second, `"peers":1`)
	}
	out, code := e.Run("submit", "--wait", "--param", "limit=2000", filepath.Join("..", "examples", "demo.yaml"))
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	t.Logf("submit --wait:\n%s", out)
	ran := map[string][]string{}
	for _, name := range []string{"count-primes", "fibonacci", "word-count", "checksum"} {
		w := e.tasks(t, 1)[name].WorkerID
		if w == nil {
			t.Fatalf("%s ran on no worker", name)
		}
		ran[*w] = append(ran[*w], name)
	}
	if len(ran) != 2 || len(ran[workers[0].ID(t, time.Second)]) != 2 {
		t.Errorf("the four parallel tasks ran %v; want two on each worker", ran)
	}
	c := e.tasks(t, 1)["commentary"]
	if c.State != dao.TaskSucceeded || c.Output == nil || !strings.HasPrefix(*c.Output, "[offline model]") {
		t.Fatalf("commentary = %s, output %v", c.State, c.Output)
	}
	cps, err := e.db.CheckpointListForTask(context.Background(), c.ID)
	if err != nil || len(cps) != 2 {
		t.Fatalf("commentary checkpoints = %+v, %v", cps, err)
	}
	if !strings.Contains(cps[0].Output, "primes") {
		t.Errorf("the summary step did not see the upstream outputs: %q", cps[0].Output)
	}
}
