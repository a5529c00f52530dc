package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/api"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// BenchmarkPagesWithAMillionTasks measures the pages and the API over a table of 1,000,000
// task instances (10,000 workflow instances of 100 tasks, 30 days of history, 20 workers,
// states as a busy cluster has them). Loading takes about a minute; run it on its own:
//
//	go test -run '^$' -bench PagesWithAMillionTasks -benchtime 200x ./api
//
// Each case reports p50_ms, p95_ms and p99_ms of whole requests over loopback HTTP, rendering
// included.
func BenchmarkPagesWithAMillionTasks(b *testing.B) {
	db, _ := daotest.New(b)
	ctx := context.Background()
	start := time.Now()
	ids := loadMillion(b, db)
	b.Logf("loaded 1,000,000 task instances in %v", time.Since(start).Round(time.Second))
	s, err := api.New(api.Config{NodeID: "bench", Version: "bench", Cluster: fakeCluster{}, AllowUnauthenticated: true, Log: zerolog.Nop()}, db)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	b.Cleanup(srv.Close)
	_ = ctx
	tenDaysAgo := time.Now().UTC().Add(-10 * 24 * time.Hour)
	window := fmt.Sprintf("from=%s&to=%s", tenDaysAgo.Format("2006-01-02T15:04"), tenDaysAgo.Add(time.Hour).Format("2006-01-02T15:04"))
	for _, c := range []struct{ name, path string }{
		{"ui-list-first-page", "/tasks"},
		{"ui-overview", "/"},
		{"ui-list-deep-page", fmt.Sprintf("/tasks?before=%d", ids.middle)},
		{"ui-list-state-failed", "/tasks?state=failed"},
		{"ui-list-state-queued", "/tasks?state=queued"},
		{"ui-list-worker", "/tasks?worker=worker-07"},
		{"ui-list-task-name", "/tasks?task=task-42"},
		{"ui-list-workflow", fmt.Sprintf("/tasks?workflow=%d", ids.workflow)},
		{"ui-list-time-window", "/tasks?" + window},
		{"ui-list-failed-on-worker", "/tasks?state=failed&worker=worker-03"},
		{"ui-list-live-rows", "/tasks?partial=rows&state=failed"},
		{"api-list", "/api/v1/task-instances?limit=50"},
		{"api-list-state-running", "/api/v1/task-instances?state=running"},
		{"ui-task-page", fmt.Sprintf("/tasks/%d", ids.task)},
		{"api-task", fmt.Sprintf("/api/v1/task-instances/%d", ids.task)},
		{"ui-workflow-page", fmt.Sprintf("/workflows/%d", ids.workflow)},
		{"ui-workflow-list", "/workflows"},
	} {
		b.Run(c.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				resp, err := http.Get(srv.URL + c.path)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				took = append(took, time.Since(t0))
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET %s: status %d", c.path, resp.StatusCode)
				}
			}
			slices.Sort(took)
			pct := func(p float64) float64 {
				return float64(took[min(int(p*float64(len(took))), len(took)-1)].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.5), "p50_ms")
			b.ReportMetric(pct(0.95), "p95_ms")
			b.ReportMetric(pct(0.99), "p99_ms")
		})
	}
}

type benchIDs struct {
	// middle is an id halfway down the table; task one with attempts and a log; workflow
	// one with 100 tasks.
	middle, task, workflow int64
}

// loadMillion fills the schema in a few statements (generate_series), then analyzes it.
func loadMillion(b *testing.B, db *dao.DB) benchIDs {
	b.Helper()
	tasks := make([]map[string]any, 100)
	for i := range tasks {
		t := map[string]any{"name": fmt.Sprintf("task-%d", i), "type": "shell", "command": "true"}
		if i > 0 {
			t["depends-on"] = []string{fmt.Sprintf("task-%d", (i-1)/3)}
		}
		tasks[i] = t
	}
	spec, _ := json.Marshal(map[string]any{"name": "bench", "tasks": tasks})
	for _, q := range []string{
		`INSERT INTO workflow_definition (name, version, spec, task_count, has_timeout, when_full_skip)
		 VALUES ('bench', 1, '` + string(spec) + `', 100, false, false)`,
		`INSERT INTO workflow_instance (workflow_name, workflow_version, state, owner, created_at, started_at, ended_at)
		 SELECT 'bench', 1, CASE WHEN g > 9990 THEN 'running' WHEN g % 20 = 0 THEN 'failed' ELSE 'succeeded' END,
		        CASE WHEN g > 9990 THEN 'master-1' END,
		        now() - interval '30 days' + g * interval '259 seconds',
		        now() - interval '30 days' + g * interval '259 seconds' + interval '1 second',
		        CASE WHEN g <= 9990 THEN now() - interval '30 days' + g * interval '259 seconds' + interval '5 minutes' END
		 FROM generate_series(1, 10000) g`,
		// One row per (workflow, task), in id order of time; the state mix of a busy cluster:
		// 90.5% succeeded, 5% failed, 2% killed, 2% skipped, the rest queued or running.
		`INSERT INTO task_instance (workflow_instance_id, name, type, params, state, worker_group, worker_id, attempt,
		        queued_at, started_at, ended_at, output, error, failover_count)
		 SELECT w, 'task-' || t, 'shell', '{"task": {"name": "x", "type": "shell", "command": "true"}}',
		        s.state, 'default',
		        CASE WHEN s.state IN ('queued', 'skipped') THEN NULL ELSE 'worker-' || lpad(((w * 100 + t) % 20)::text, 2, '0') END,
		        CASE WHEN s.state IN ('queued', 'skipped') THEN 0 ELSE 1 END,
		        q, CASE WHEN s.state NOT IN ('queued', 'skipped') THEN q + interval '20 ms' END,
		        CASE WHEN s.state NOT IN ('queued', 'running') THEN q + interval '2 seconds' END,
		        CASE WHEN s.state = 'succeeded' THEN 'ok' END,
		        CASE WHEN s.state = 'failed' THEN 'exit status 1' END,
		        CASE WHEN (w * 100 + t) % 500 = 0 THEN 1 ELSE 0 END
		 FROM generate_series(1, 10000) w, generate_series(0, 99) t,
		      LATERAL (SELECT now() - interval '30 days' + w * interval '259 seconds' + t * interval '2 seconds' AS q) qq,
		      LATERAL (SELECT CASE
		          WHEN w > 9990 AND t >= 50 THEN 'queued'
		          WHEN w > 9990 AND t >= 45 THEN 'running'
		          WHEN (w * 100 + t) % 200 < 10 THEN 'failed'
		          WHEN (w * 100 + t) % 200 < 14 THEN 'killed'
		          WHEN (w * 100 + t) % 200 < 18 THEN 'skipped'
		          ELSE 'succeeded' END AS state) s
		 ORDER BY w, t`,
		`INSERT INTO task_attempt (task_instance_id, attempt, worker_id, started_at, ended_at, outcome)
		 SELECT id, 1, worker_id, started_at, ended_at,
		        CASE state WHEN 'running' THEN NULL WHEN 'killed' THEN 'killed' ELSE state END
		 FROM task_instance WHERE attempt = 1`,
		`INSERT INTO task_log (task_instance_id, attempt, seq, data)
		 SELECT t.id, 1, s, repeat('a line of output from the task ' || s || E'\n', 200)
		 FROM task_instance t, generate_series(0, 9) s WHERE t.workflow_instance_id = 5000`,
		`ANALYZE`,
	} {
		if _, err := db.SQL().Exec(q); err != nil {
			b.Fatalf("load: %v\n%s", err, q)
		}
	}
	var ids benchIDs
	if err := db.SQL().Get(&ids.task, `SELECT min(id) FROM task_instance WHERE workflow_instance_id = 5000 AND state = 'succeeded'`); err != nil {
		b.Fatal(err)
	}
	ids.middle, ids.workflow = 500_000, 5000
	return ids
}
