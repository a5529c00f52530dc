package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

// The upstream and downstream workflows of the workflow sensor tests: report's sensor waits
// for a run of load that succeeds, then reads it.
const (
	runWaitLoad = `
name: load
tasks:
  - {name: load, type: shell, command: 'sleep 2 && echo loaded'}
`
	runWaitReport = `
name: report
tasks:
  - name: loaded
    type: sensor
    workflow: {name: load, state: succeeded}
    timeout: 5m
  - {name: report, type: shell, depends-on: [loaded], command: 'echo "after $ZKSCHED_UPSTREAM_loaded_OUTPUT"'}
`
)

// submitID submits file and returns the instance id the command prints last.
func (e *e2e) submitID(t *testing.T, file string) int64 {
	t.Helper()
	out, code := e.Run("submit", file)
	if code != 0 {
		t.Fatalf("submit %s: exit %d\n%s", file, code, out)
	}
	out = strings.TrimSpace(out)
	id, err := strconv.ParseInt(out[strings.LastIndex(out, "\n")+1:], 10, 64)
	if err != nil {
		t.Fatalf("submit printed no instance id:\n%s", out)
	}
	return id
}

// checkReportAfterLoad checks that the run report succeeded once its sensor was ended by the
// run load, which it names as its output, on no worker: the sensor had no attempt, and the
// task below it ran once.
func (e *e2e) checkReportAfterLoad(t *testing.T, report, load int64) {
	t.Helper()
	waitUntil(t, 90*time.Second, "report to end", func() bool {
		got, err := e.db.WorkflowGet(context.Background(), report)
		return err == nil && got.State.Terminal()
	})
	if got, err := e.db.WorkflowGet(context.Background(), report); err != nil || got.State != dao.WorkflowSucceeded {
		t.Fatalf("report = %+v, %v; want succeeded", got, err)
	}
	ts := e.tasks(t, report)
	loaded, after := ts["loaded"], ts["report"]
	var run struct {
		ID    int64  `json:"id"`
		State string `json:"state"`
	}
	if loaded.Output == nil || json.Unmarshal([]byte(*loaded.Output), &run) != nil || run.ID != load || run.State != "succeeded" {
		t.Errorf("sensor output = %v; want run %d of load, succeeded", loaded.Output, load)
	}
	if loaded.Attempt != 0 || loaded.WorkerID != nil {
		t.Errorf("sensor ran attempt %d on worker %v; want no attempt on any worker", loaded.Attempt, loaded.WorkerID)
	}
	var read struct {
		ID int64 `json:"id"`
	}
	if after.Attempt != 1 || after.Output == nil || !strings.HasPrefix(*after.Output, "after ") ||
		json.Unmarshal([]byte(strings.TrimPrefix(*after.Output, "after ")), &read) != nil || read.ID != load {
		t.Errorf("report task: attempt %d, output %q; want one attempt reading the sensor's output", after.Attempt, deref(after.Output))
	}
	loadTasks := e.tasks(t, load)
	if l := loadTasks["load"]; l.EndedAt == nil || loaded.EndedAt == nil || loaded.EndedAt.Before(*l.EndedAt) {
		t.Errorf("load ended %v, the sensor %v; want the sensor to end with load", l.EndedAt, loaded.EndedAt)
	}
	var runs int
	if err := e.db.SQL().Get(&runs, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'report'`); err != nil || runs != 1 {
		t.Errorf("report runs = %d, %v; want one", runs, err)
	}
}

// TestWorkflowSensorHoldsNoSlot: on a worker with one slot, report's workflow sensor waits
// for a run of load on no worker, so load runs on that slot; load's end ends the sensor, and
// report goes on.
func TestWorkflowSensorHoldsNoSlot(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	e.Master("master")
	e.Worker("worker", "ZKSCHED_WORKER_SLOTS=1")
	report := e.submitID(t, e.file(t, "report.yaml", runWaitReport))
	waitUntil(t, 30*time.Second, "the sensor to wait", func() bool {
		s, ok := e.tasks(t, report)["loaded"]
		return ok && s.State == dao.TaskWaiting
	})
	load := e.submitID(t, e.file(t, "load.yaml", runWaitLoad))
	e.checkReportAfterLoad(t, report, load)
}

// TestWorkflowSensorSurvivesAMasterKilled: a master is killed (SIGKILL) after it created
// report's workflow sensor and before it looked whether load's run, which ended meanwhile,
// satisfies it; the next master's poll finds it does, and report completes once.
func TestWorkflowSensorSurvivesAMasterKilled(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	e.Worker("worker", "ZKSCHED_WORKER_SLOTS=1")
	// No master yet: report waits to be claimed, and load, one task, runs and ends on the
	// worker alone, before any sensor waits for it.
	report := e.submitID(t, e.file(t, "report.yaml", runWaitReport))
	load := e.submitID(t, e.file(t, "load.yaml", runWaitLoad))
	waitUntil(t, 60*time.Second, "load to succeed", func() bool {
		got, err := e.db.WorkflowGet(context.Background(), load)
		return err == nil && got.State == dao.WorkflowSucceeded
	})
	doomed := e.Master("doomed", "ZKSCHED_TEST_FAULT=runwait-before-look")
	doomed.Wait(t, 30*time.Second)
	if doomed.KilledBy() != syscall.SIGKILL || !strings.Contains(doomed.Log(), "fault injection") {
		t.Fatalf("the doomed master did not die at the fault point; log:\n%s", doomed.Log())
	}
	if s := e.tasks(t, report)["loaded"]; s.State != dao.TaskWaiting {
		t.Fatalf("after the kill the sensor is %s; want waiting, unlooked at", s.State)
	}
	e.Master("master")
	e.checkReportAfterLoad(t, report, load)
}
