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

// lastRead reads fixed fence markers and then ends the run that asked for them: the
// markers are a refresh's last read, so RunClusterCounts returns as soon as the refresh is
// through, which is the test's signal that the refresh is whole.
type lastRead struct {
	markers []registry.MarkerEntry
	end     context.CancelFunc
}

func (l lastRead) Markers(context.Context) ([]registry.MarkerEntry, error) {
	l.end()
	return l.markers, nil
}

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
	defer cancel()
	done := make(chan struct{})
	go func() {
		m.RunClusterCounts(rctx, db, lastRead{markers: []registry.MarkerEntry{{Role: registry.RoleWorker, ID: "w9"}}, end: cancel},
			time.Hour, zerolog.Nop())
		close(done)
	}()
	// The interval is an hour: the run returns in time only if its first refresh runs at once.
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunClusterCounts has not refreshed within 10s")
	}
	out := scrape(t, m)
	for _, w := range []string{`zksched_queue_depth{group="gpu"} 2`, `zksched_queue_depth{group="cpu"} 1`,
		`zksched_queue_depth{group="default"} 0`, `zksched_failovers_total{role="worker"} 1`,
		`zksched_failovers_total{role="master"} 0`, `zksched_fenced_nodes{role="worker"} 1`, `zksched_fenced_nodes{role="master"} 0`} {
		if !strings.Contains(out, w) {
			t.Errorf("metrics lack %q", w)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", out)
	}
}

// TestRetentionMetrics: a master counts the rows its retention deleted by table.
func TestRetentionMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New("m1", "master", "v1")
	m.Purged("workflow_instance", 500)
	m.Purged("workflow_instance", 20)
	m.Purged("task_log", 7)
	out := scrape(t, m)
	for _, want := range []string{
		`zksched_retention_purged_rows_total{table="workflow_instance"} 520`,
		`zksched_retention_purged_rows_total{table="task_log"} 7`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestAdmissionWaitMetrics: a worker's histogram of the waits for admission, by provider.
func TestAdmissionWaitMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New("w1", "worker", "v1")
	m.AdmissionWaited("openai-main", 0)
	m.AdmissionWaited("openai-main", 3*time.Second)
	out := scrape(t, m)
	for _, want := range []string{
		`zksched_llm_admission_wait_seconds_count{provider="openai-main"} 2`,
		`zksched_llm_admission_wait_seconds_sum{provider="openai-main"} 3`,
		`zksched_llm_admission_wait_seconds_bucket{provider="openai-main",le="1"} 1`,
		`zksched_llm_admission_wait_seconds_bucket{provider="openai-main",le="5"} 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
