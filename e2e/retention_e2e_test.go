package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRetentionPurgesAFinishedWorkflow: a real cluster whose masters keep finished instances
// two seconds purges one that ran, with its tasks and logs, and then answers its id with 404
// and a word on retention; the leader counts the rows it purged.
func TestRetentionPurgesAFinishedWorkflow(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_RETENTION_INSTANCES=2s", "ZKSCHED_RETENTION_LOGS=1s", "ZKSCHED_RETENTION_INTERVAL=200ms")
	m := e.Master("master")
	e.Worker("worker")
	wfFile := e.file(t, "kept.yaml", "name: kept\ntasks:\n  - {name: say, type: shell, command: 'echo soon gone'}\n")
	if out, code := e.Run("submit", "--wait", wfFile); code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	var task int64
	if err := e.db.SQL().Get(&task, `SELECT id FROM task_instance WHERE workflow_instance_id = 1`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the finished instance purged", func() bool {
		var n int
		if err := e.db.SQL().Get(&n, `SELECT count(*) FROM workflow_instance`); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	for _, table := range []string{"task_instance", "task_attempt", "task_log"} {
		var n int
		if err := e.db.SQL().Get(&n, `SELECT count(*) FROM `+table); err != nil || n != 0 {
			t.Errorf("%s holds %d rows (%v) after the purge, want none", table, n, err)
		}
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	get := func(path string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/api/v1/workflow-instances/1", fmt.Sprintf("/api/v1/task-instances/%d", task)} {
		status, body := get(path)
		if status != 404 || !strings.Contains(body, "it may have been purged; retention deletes finished workflow instances, with their tasks, 2s after they end (retention.instances)") {
			t.Errorf("GET %s = %d %s, want 404 with a word on retention", path, status, body)
		}
	}
	// The CLI says the same, on the database and through the API.
	const word = "no such workflow instance 1: it may have been purged; retention deletes finished workflow instances, with their tasks, 2s after they end (retention.instances)"
	for _, args := range [][]string{{"status", "1"}, {"status", "1", "--server", base}} {
		if out, code := e.Run(args...); code != 3 || !strings.Contains(out, word) {
			t.Errorf("zksched %s: exit %d\n%s\nwant exit 3 (no such instance) with a word on retention", strings.Join(args, " "), code, out)
		}
	}
	status, body := get("/metrics")
	if status != 200 || !strings.Contains(body, `zksched_retention_purged_rows_total{table="workflow_instance"} 1`) {
		t.Errorf("the leader's metrics lack one workflow instance purged:\n%s", grepLines(body, "zksched_retention"))
	}
}
