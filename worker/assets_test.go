package worker_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/master"
	"github.com/zksched/zksched/metrics"
	"github.com/zksched/zksched/workflow"
)

// scrape reads m's /metrics.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

// TestAssetMetrics: a producer task's success on a worker counts its asset events in the
// worker's zksched_asset_events_total{source="task"}, and the run they start in the
// master's zksched_asset_runs_total.
func TestAssetMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wm, mm := metrics.New("w1", "worker", "test"), metrics.New("m2", "master", "test")
	cfg := master.Config{ID: "m2", PollInterval: 200 * time.Millisecond, Log: zerolog.Nop()}
	firer := master.NewAssetFirer(master.New(cfg, b.db, openGate{}))
	firer.Started = mm.AssetRunsStarted
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = firer.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	consumer := "name: report\non-assets: {all: [orders, customers]}\ntasks: [{name: r, type: noop}]\n"
	spec, err := workflow.Parse([]byte(consumer))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.Define(b.ctx, b.db, lifecycle.Definition{Spec: spec, File: []byte(consumer)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	b.runWorker(t, "w1", 1, openGate{}, wm)
	b.waitDone(t, b.submit(t, "name: load\ntasks: [{name: load, type: noop, produces: [orders, customers]}]\n"))
	waitUntil(t, "the consumer's run", func() bool {
		var n int
		_ = b.db.SQL().Get(&n, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'report'`)
		return n == 1
	})
	if got, want := scrape(t, wm), `zksched_asset_events_total{source="task"} 2`; !strings.Contains(got, want) {
		t.Errorf("the worker's metrics lack %q:\n%s", want, got)
	}
	waitUntil(t, "the master's count of the run", func() bool {
		return strings.Contains(scrape(t, mm), "zksched_asset_runs_total 1")
	})
}
