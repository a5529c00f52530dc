package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testenv"
)

// TestPurgedInstanceIsNotFoundWithAWordOnRetention: a workflow instance and its task purged by
// retention answer 404 in the API and the UI, saying they may have been purged and by which
// setting; an id never issued, or any id when nothing is purged, is a plain 404.
func TestPurgedInstanceIsNotFoundWithAWordOnRetention(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true, instanceRetention: 30 * 24 * time.Hour})
	f := b.seed(t, 6)
	task := f.byName["t0"]
	if _, err := b.db.SQL().Exec(`UPDATE workflow_instance SET state = 'succeeded', owner = NULL, ended_at = now() - interval '31 days'
		WHERE id = $1`, f.wf); err != nil {
		t.Fatal(err)
	}
	if p, err := b.db.PurgeFinishedInstances(b.ctx, 30*24*time.Hour, 10); err != nil || p["workflow_instance"] != 1 {
		t.Fatalf("purge: %v, %v; want the instance purged", p, err)
	}
	const word = "it may have been purged; retention deletes finished workflow instances, with their tasks, 30d after they end (retention.instances)"
	for _, tc := range []struct {
		method, path string
		want         string
	}{
		{"GET", fmt.Sprintf("/api/v1/workflow-instances/%d", f.wf), fmt.Sprintf("workflow instance %d not found: %s", f.wf, word)},
		{"GET", fmt.Sprintf("/api/v1/task-instances/%d", task), fmt.Sprintf("task instance %d not found: %s", task, word)},
		{"GET", fmt.Sprintf("/api/v1/task-instances/%d/log", task), fmt.Sprintf("task instance %d not found: %s", task, word)},
		{"POST", fmt.Sprintf("/api/v1/workflow-instances/%d/stop", f.wf), fmt.Sprintf("workflow instance %d: no such instance: %s", f.wf, word)},
		{"POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", task), fmt.Sprintf("task instance %d: no such instance: %s", task, word)},
		{"POST", fmt.Sprintf("/api/v1/task-instances/%d/rerun", task), fmt.Sprintf("task instance %d not found: %s", task, word)},
		{"GET", "/api/v1/workflow-instances/999999", "workflow instance 999999 not found"},
		{"GET", "/api/v1/task-instances/999999", "task instance 999999 not found"},
	} {
		r := b.do(t, tc.method, tc.path, "")
		if got := r.errorMessage(t); r.status != 404 || got != tc.want {
			t.Errorf("%s %s = %d %q, want 404 %q", tc.method, tc.path, r.status, got, tc.want)
		}
	}
	for _, path := range []string{fmt.Sprintf("/workflows/%d", f.wf), fmt.Sprintf("/tasks/%d", task)} {
		r := b.do(t, "GET", path, "")
		if r.status != 404 || !strings.Contains(r.body, "it may have been purged") || !strings.Contains(r.body, "retention.instances") {
			t.Errorf("GET %s = %d, want 404 with a word on retention:\n%s", path, r.status, r.body)
		}
	}
	if r := b.do(t, "GET", "/workflows/999999", ""); r.status != 404 || strings.Contains(r.body, "purged") {
		t.Errorf("GET /workflows/999999 = %d, want a plain 404:\n%s", r.status, r.body)
	}

	// docs/retention.md shows the answer as it is.
	page := testenv.DocSection(t, "docs/retention.md", "Retention")
	shown := fmt.Sprintf(`{"error": {"status": 404, "message": "workflow instance 42 not found: %s"}}`, word)
	if !strings.Contains(page, shown) {
		t.Errorf("docs/retention.md lacks the purged instance's answer:\n%s", shown)
	}

	// A master that keeps instances for ever says nothing of retention.
	keep := setup(t, setupOpts{open: true, db: b.db})
	r := keep.do(t, "GET", fmt.Sprintf("/api/v1/workflow-instances/%d", f.wf), "")
	if got, want := r.errorMessage(t), fmt.Sprintf("workflow instance %d not found", f.wf); r.status != 404 || got != want {
		t.Errorf("without retention: %d %q, want 404 %q", r.status, got, want)
	}
}
