package e2e

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

// TestSensorHoldsNoSlotBetweenChecks: on a worker with one slot, a reschedule sensor waiting
// for a file frees the slot between its checks, so the shell task that makes the file runs
// on it; the sensor's next check then finds the file, and the task below it runs.
func TestSensorHoldsNoSlotBetweenChecks(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	e.Master("master")
	e.Worker("worker", "ZKSCHED_WORKER_SLOTS=1")
	ready := filepath.Join(e.dir, "ready")
	wfFile := e.file(t, "landed.yaml", `
name: landed
tasks:
  - name: landed
    type: sensor
    file: {path: '`+ready+`'}
    interval: 1s
    timeout: 2m
    priority: 10
  - {name: make, type: shell, command: 'sleep 2 && touch `+ready+`'}
  - {name: load, type: shell, depends-on: [landed], command: 'echo "loaded $ZKSCHED_UPSTREAM_landed_OUTPUT"'}
`)
	out, code := e.Run("submit", wfFile)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	wf, err := strconv.ParseInt(strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), 10, 64)
	if err != nil {
		t.Fatalf("submit printed no instance id:\n%s", out)
	}
	testenv.WaitFor(t, 60*time.Second, 100*time.Millisecond, "the workflow to succeed", func() bool {
		got, err := e.db.WorkflowGet(context.Background(), wf)
		return err == nil && got.State.Terminal()
	})
	if got, err := e.db.WorkflowGet(context.Background(), wf); err != nil || got.State != dao.WorkflowSucceeded {
		t.Fatalf("workflow = %+v, %v; want succeeded", got, err)
	}
	ts := e.tasks(t, wf)
	landed, maker := ts["landed"], ts["make"]
	if o := ts["load"].Output; o == nil || *o != "loaded "+ready {
		t.Errorf("load output = %v; want the sensor's output, its file's path", o)
	}
	// The sensor was claimed first (its priority), did not find the file, and paused: only
	// then could make run on the one slot; a later check found what make wrote.
	outcomes := e.outcomes(t, landed.ID)
	t.Logf("sensor attempts: %s", outcomes)
	if !strings.HasPrefix(outcomes, "paused@") || !strings.Contains(outcomes, "succeeded@") {
		t.Errorf("sensor attempts = %s; want paused checks, then one that succeeded", outcomes)
	}
	if maker.EndedAt == nil || landed.EndedAt == nil || !maker.EndedAt.Before(*landed.EndedAt) {
		t.Errorf("make ran %v..%v, the sensor ended %v; want make to end before the sensor", maker.StartedAt, maker.EndedAt, landed.EndedAt)
	}
}
