package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

// TestSignalCommand: a wait task holds no worker until `zksched signal` ends it; its output
// reaches the task below, which a worker runs; a second signal changes nothing and says why.
func TestSignalCommand(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	e.Master("master")
	e.Worker("worker")
	wfFile := e.file(t, "approve.yaml", `
name: approve
tasks:
  - {name: review, type: wait, timeout: 1h}
  - {name: publish, type: shell, depends-on: [review], command: 'echo "published $ZKSCHED_UPSTREAM_review_OUTPUT"'}
`)
	out, code := e.Run("submit", wfFile)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	wf, err := strconv.ParseInt(strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), 10, 64)
	if err != nil {
		t.Fatalf("submit printed no instance id:\n%s", out)
	}
	review := e.tasks(t, wf)["review"]
	if review.State != dao.TaskWaiting || review.WorkerID != nil || review.StartedAt == nil {
		t.Fatalf("review = %+v; want waiting since submit, on no worker", review)
	}
	id := strconv.FormatInt(review.ID, 10)
	if out, code := e.Run("signal", id, "--output", "v2 approved"); code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("signal: exit %d\n%s", code, out)
	}
	testenv.WaitFor(t, 30*time.Second, 100*time.Millisecond, "the workflow to succeed", func() bool {
		got, err := e.db.WorkflowGet(context.Background(), wf)
		return err == nil && got.State == dao.WorkflowSucceeded
	})
	ts := e.tasks(t, wf)
	if o := ts["publish"].Output; o == nil || *o != "published v2 approved" {
		t.Errorf("publish output = %v, want the signal's output passed down", o)
	}
	out, code = e.Run("signal", id, "--fail")
	if code != 1 || !strings.Contains(out, "is succeeded, not waiting") {
		t.Errorf("second signal: exit %d\n%s\nwant exit 1, refused", code, out)
	}
	if out, code := e.Run("signal", "nope"); code != 2 || !strings.Contains(out, "want the id of a waiting task instance") {
		t.Errorf("signal nope: exit %d\n%s\nwant a usage error", code, out)
	}
	events, _, err := e.db.AuditList(context.Background(), dao.AuditFilter{}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var signals int
	for _, ev := range events {
		if ev.Action == dao.AuditTaskSignal && ev.Target == "task-instance/"+id {
			signals++
		}
	}
	if signals != 1 {
		t.Errorf("%d audit rows of the signal, want 1 (the refused one writes none): %+v", signals, events)
	}
}
