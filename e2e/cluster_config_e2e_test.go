package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/otlptest"
)

// TestSubmitReadsTheClustersConfig: a command line set up by its environment alone (no
// providers, pools or tracing of its own) checks a workflow against what the cluster's nodes
// stored — the worker's providers, the master's pools — and traces what it submits as the
// master does; a provider no worker has is still refused.
func TestSubmitReadsTheClustersConfig(t *testing.T) {
	t.Parallel()
	recv := otlptest.New(t)
	e := setupE2E(t, nil, "")
	e.Master("master", append(traceEnv(recv, "1"), "ZKSCHED_POOLS_OPENAI=2")...)
	e.Worker("worker", "ZKSCHED_LLM_PROVIDERS_MAIN_TYPE=offline")
	ctx := context.Background()
	waitUntil(t, 30*time.Second, "the nodes to store their providers, pools and tracing", func() bool {
		providers, okP, err1 := e.db.SettingProviders(ctx)
		pools, _, err2 := e.db.PoolNamesLimited(ctx)
		tr, okT, err3 := e.db.SettingTracingGet(ctx)
		return err1 == nil && err2 == nil && err3 == nil && okP && slices.Contains(providers, "main") &&
			slices.Equal(pools, []string{"openai"}) && okT && tr.SampleRatio == 1
	})

	ok := e.file(t, "ask.yaml", "name: ask\ntasks:\n  - {name: ask, type: llm, provider: main, pool: openai, prompt: say hello}\n")
	out, code := e.Run("submit", ok, "--wait")
	if code != 0 {
		t.Fatalf("submit of a workflow naming the worker's provider and the master's pool: exit %d\n%s", code, out)
	}
	if tp := e.traceparentOf(t, firstID(t, out)); tp == "" {
		t.Errorf("the instance submitted has no trace; the master traces every one")
	}

	bad := e.file(t, "other.yaml", "name: other\ntasks:\n  - {name: ask, type: llm, provider: other, prompt: say hello}\n")
	out, code = e.Run("submit", bad)
	if code != 1 || !strings.Contains(out, `provider "other"`) || !strings.Contains(out, "configured: demo, main") {
		t.Errorf("submit of a workflow naming a provider no worker has: exit %d\n%s\nwant exit 1 naming the workers' providers", code, out)
	}
}
