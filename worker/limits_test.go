package worker_test

import (
	"context"
	"fmt"
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

// limitedWorker is a worker of the tests of cluster-wide limits.
type limitedWorker struct {
	slots int
	// provider is the provider "limited", on the test server.
	provider llm.Provider
	// window is what requests-per-minute and tokens-per-minute count over; 0 is a minute.
	window time.Duration
	// limits, if set, wraps the worker's database as the keeper of its limits.
	limits func(llm.Limits) llm.Limits
}

// startLimited runs a worker with a database connection of its own, as a worker process
// has, whose only executor is llm; it stops when the test ends.
func (b *testBundle) startLimited(t *testing.T, id string, w limitedWorker) {
	t.Helper()
	db, err := dao.Open(b.ctx, b.dsn, 4, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var limits llm.Limits = db
	if w.limits != nil {
		limits = w.limits(db)
	}
	providers := llm.NewProviders(map[string]llm.Provider{"limited": w.provider}, llm.Options{Backoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, Log: zerolog.Nop(), Limits: limits, Window: w.window})
	wk := worker.New(worker.Config{ID: id, Groups: []string{"default"}, Slots: w.slots, PollInterval: 100 * time.Millisecond,
		ShutdownTimeout: time.Second, LogLimit: 1 << 20, Log: zerolog.Nop()}, db, openGate{},
		executor.Set{"llm": executor.LLM{Providers: providers}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { wk.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// llmWorkflow is a workflow of n independent llm tasks on the provider "limited", whose
// prompts are prefix and their number; extra is added to each task.
func llmWorkflow(name, prefix string, n int, extra string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "name: %s\ntasks:\n", name)
	for i := range n {
		fmt.Fprintf(&s, "  - {name: t%02d, type: llm, provider: limited, prompt: \"%s %02d\"%s}\n", i, prefix, i, extra)
	}
	return s.String()
}

// succeededOn checks that every task of the finished instance wf succeeded, and returns the
// workers that ran them.
func (b *testBundle) succeededOn(t *testing.T, wf int64) map[string]bool {
	t.Helper()
	inst, tasks := b.waitDone(t, wf)
	if inst.State != dao.WorkflowSucceeded {
		t.Fatalf("workflow %s: %v", inst.State, inst.Error)
	}
	workers := map[string]bool{}
	for _, ti := range tasks {
		if ti.WorkerID != nil {
			workers[*ti.WorkerID] = true
		}
	}
	return workers
}

// TestClusterRequestsPerMinute: three workers, each running several llm tasks at once, send
// the provider no more than requests-per-minute in any window between them, and the next
// requests go as soon as the first leave the window. The test's minute is a second.
func TestClusterRequestsPerMinute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := llmtest.New(t)
	const limit, window = 4, time.Second
	for _, id := range []string{"w1", "w2", "w3"} {
		b.startLimited(t, id, limitedWorker{slots: 4, window: window,
			provider: llm.Provider{Type: llm.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "m", RequestsPerMinute: limit}})
	}
	workers := b.succeededOn(t, b.submit(t, llmWorkflow("rpm", "rpm", 12, "")))
	if len(workers) < 2 {
		t.Errorf("the tasks ran on %v; want several workers", workers)
	}

	at := srv.Arrivals("rpm")
	if len(at) != 12 {
		t.Fatalf("the provider saw %d requests, want 12", len(at))
	}
	for i := range at {
		n := 0
		for _, a := range at[i:] {
			if a.Sub(at[i]) < window {
				n++
			}
		}
		if n > limit {
			t.Errorf("%d requests arrived within %v from request %d (at +%v); want at most %d", n, window, i+1, at[i].Sub(at[0]), limit)
		}
	}
	// The fifth is admitted when the first start has left the window (with its margin),
	// not at some poll much later.
	if d := at[limit].Sub(at[0]); d < window || d > window+llm.AdmissionMargin+1500*time.Millisecond {
		t.Errorf("request %d arrived %v after the first; want once the first left the %v window and its %v margin",
			limit+1, d, window, llm.AdmissionMargin)
	}
}

// TestClusterTokensPerMinute: requests reserve their prompt's estimate and max-tokens across
// the workers, so no more are in flight at once than the reservations allow; each answer's
// usage replaces its reservation, so the rest go long before the minute is over.
func TestClusterTokensPerMinute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := llmtest.New(t)
	srv.Delay("tpm", 300*time.Millisecond)
	// Each request reserves 2 tokens of prompt ("tpm 00") and 100 of max-tokens: two fit in
	// 250, three do not. Each uses 6 (the server counts words: 2 of prompt, 4 of answer).
	for _, id := range []string{"w1", "w2", "w3"} {
		b.startLimited(t, id, limitedWorker{slots: 2,
			provider: llm.Provider{Type: llm.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "m", TokensPerMinute: 250}})
	}
	start := time.Now()
	workers := b.succeededOn(t, b.submit(t, llmWorkflow("tpm", "tpm", 6, ", max-tokens: 100")))
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %v: the usage did not give the reservations back", took)
	}
	if len(workers) < 2 {
		t.Errorf("the tasks ran on %v; want several workers", workers)
	}
	if n := srv.Calls("tpm"); n != 6 {
		t.Errorf("the provider saw %d requests, want 6", n)
	}
	if h := srv.HighWater(); h > 2 {
		t.Errorf("%d requests in flight at once; the reservations allow 2", h)
	}
	var tokens int
	if err := b.db.SQL().Get(&tokens, `SELECT tokens FROM llm_limit WHERE provider = 'limited'`); err != nil {
		t.Fatal(err)
	}
	if tokens != 6*6 {
		t.Errorf("the window holds %d tokens, want the 6 requests' usage, 36", tokens)
	}
}

// blockSignal is the keeper of a worker's limits that says when a block has been written.
type blockSignal struct {
	llm.Limits
	blocked chan<- struct{}
}

func (s blockSignal) LLMLimitBlock(ctx context.Context, provider string, d time.Duration) error {
	err := s.Limits.LLMLimitBlock(ctx, provider, d)
	if err == nil {
		s.blocked <- struct{}{}
	}
	return err
}

// TestClusterRetryAfter: a 429 with Retry-After: 2 to one worker holds back the requests of
// the others for 2 s, whether the provider has limits configured or not.
func TestClusterRetryAfter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		rpm  int
	}{{"limited", 1000}, {"unlimited", 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testClusterRetryAfter(t, c.rpm)
		})
	}
}

func testClusterRetryAfter(t *testing.T, rpm int) {
	b := setup(t)
	srv := llmtest.New(t)
	srv.Fail("first", 429, 1, "2")
	blocked := make(chan struct{}, 3)
	for _, id := range []string{"w1", "w2", "w3"} {
		// One slot each: the worker that got the 429 waits out its Retry-After in its slot,
		// so the others run the rest.
		b.startLimited(t, id, limitedWorker{slots: 1,
			provider: llm.Provider{Type: llm.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "m", RequestsPerMinute: rpm},
			limits:   func(db llm.Limits) llm.Limits { return blockSignal{Limits: db, blocked: blocked} }})
	}
	first := b.submit(t, "name: first\ntasks:\n  - {name: t, type: llm, provider: limited, prompt: first}\n")
	select {
	case <-blocked:
	case <-time.After(20 * time.Second):
		t.Fatal("no worker blocked the provider within 20s")
	}
	others := b.submit(t, llmWorkflow("others", "others", 4, ""))
	byOthers := b.succeededOn(t, others)
	byFirst := b.succeededOn(t, first)
	for w := range byFirst {
		delete(byOthers, w)
	}
	if len(byOthers) == 0 {
		t.Error("the other requests all ran on the worker that got the 429; want them on the others")
	}

	rejected := srv.Arrivals("first")[0]
	at := srv.Arrivals("others")
	if len(at) != 4 {
		t.Fatalf("the provider saw %d other requests, want 4", len(at))
	}
	for i, a := range at {
		if d := a.Sub(rejected); d < 2*time.Second {
			t.Errorf("request %d of the others arrived %v after the 429; want 2s at least", i+1, d)
		}
	}
	if d := at[0].Sub(rejected); d > 4*time.Second {
		t.Errorf("the first of the others arrived %v after the 429; want soon after the 2s", d)
	}
}
