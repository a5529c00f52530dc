package metrics_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/metrics"
	"github.com/zksched/zksched/registry"
)

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestWorkerMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New("w1", "worker", "v1")
	state := registry.Disconnected
	m.WatchSession(func() registry.Status { return registry.Status{State: state} })
	m.Gauge("zksched_tasks_running", "running", func() float64 { return 3 })
	queued := time.Now()
	started := queued.Add(30 * time.Millisecond)
	m.Claimed(&dao.TaskInstance{WorkerGroup: "gpu", QueuedAt: queued, StartedAt: &started})
	m.Ended(dao.OutcomeSucceeded, false)
	m.Ended(dao.OutcomeKilled, false)
	m.Ended(dao.OutcomeFailed, true)
	state = registry.Connected
	out := scrape(t, m)
	for _, want := range []string{
		`zksched_node_info{node="w1",role="worker",version="v1"} 1`,
		`zksched_task_claims_total{group="gpu"} 1`,
		`zksched_task_attempts_total{outcome="succeeded"} 1`,
		`zksched_task_attempts_total{outcome="killed"} 1`,
		`zksched_task_results_refused_total 1`,
		`zksched_task_dispatch_seconds_bucket{le="0.05"} 1`,
		`zksched_task_dispatch_seconds_bucket{le="0.025"} 0`,
		`zksched_zookeeper_session_state{state="connected"} 1`,
		`zksched_zookeeper_session_state{state="disconnected"} 0`,
		`zksched_tasks_running 3`,
		`go_goroutines`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(out, "zksched_queue_depth") {
		t.Error("a worker exposes the masters' queue depth")
	}
}

type markers []registry.MarkerEntry

func (m markers) Markers(context.Context) ([]registry.MarkerEntry, error) { return m, nil }

func TestMasterClusterCounts(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	wf := daotest.Submit(t, db, "wf", map[string]any{"name": "wf"})
	if _, err := db.TaskCreateMany(ctx, []dao.NewTask{
		{WorkflowInstanceID: wf, Name: "a", Type: "noop", State: dao.TaskQueued, Group: "gpu"},
		{WorkflowInstanceID: wf, Name: "b", Type: "noop", State: dao.TaskQueued, Group: "gpu"},
		{WorkflowInstanceID: wf, Name: "c", Type: "noop", State: dao.TaskQueued, Group: "cpu"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FailoverEventRecord(ctx, dao.FailoverEvent{NodeID: "w9", Role: "worker", LostAt: time.Now(),
		FencedAt: time.Now(), Leader: "m1", TasksRequeued: 1}); err != nil {
		t.Fatal(err)
	}
	m := metrics.New("m1", "master", "v1")
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		m.RunClusterCounts(rctx, db, markers{{Role: registry.RoleWorker, ID: "w9"}}, time.Hour, zerolog.Nop())
		close(done)
	}()
	want := []string{`zksched_queue_depth{group="gpu"} 2`, `zksched_queue_depth{group="cpu"} 1`,
		`zksched_queue_depth{group="default"} 0`, `zksched_failovers_total{role="worker"} 1`,
		`zksched_failovers_total{role="master"} 0`, `zksched_fenced_nodes{role="worker"} 1`, `zksched_fenced_nodes{role="master"} 0`}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := scrape(t, m)
		missing := ""
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %q:\n%s", missing, out)
		}
		time.Sleep(20 * time.Millisecond) // the first refresh runs at once; nothing signals it
	}
	cancel()
	<-done
}
