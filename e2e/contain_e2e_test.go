package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/worker/executor"
)

// TestEscapedTaskProcessDiesWithItsKilledWorker is issue 15's defect 5 as a user met it: a
// shell task leaves its process group with setsid, its worker is killed with kill -9, and the
// task is failed over and run again elsewhere. The escaped loop of the first attempt must
// die with its worker, and the second attempt's must die when that attempt's bash exits.
func TestEscapedTaskProcessDiesWithItsKilledWorker(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	e.Master("master")
	w1 := e.Worker("worker-1")
	pids := filepath.Join(e.dir, "pid")
	wfFile := e.file(t, "escape.yaml", `
name: escape
tasks:
  - name: escape
    type: shell
    command: >-
      setsid bash -c 'echo $$ > `+pids+`.$ZKSCHED_ATTEMPT; while :; do date >> `+e.dir+`/ticks; sleep .2; done' &
      until [ -s `+pids+`.$ZKSCHED_ATTEMPT ]; do sleep .01; done;
      if [ "$ZKSCHED_ATTEMPT" = 1 ]; then sleep 40; fi; echo done by attempt $ZKSCHED_ATTEMPT
`)
	if out, code := e.Run("submit", wfFile); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	first := waitPidFile(t, pids+".1")
	if err := w1.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the first attempt's escaped loop to die with its worker", func() bool { return !processAlive(first) })

	e.Worker("worker-2")
	waitUntil(t, 30*time.Second, "the workflow to finish", func() bool {
		wf, err := e.db.WorkflowGet(context.Background(), 1)
		return err == nil && wf.State.Terminal()
	})
	task := e.tasks(t, 1)["escape"]
	if task.State != dao.TaskSucceeded || task.Output == nil || *task.Output != "done by attempt 2" {
		t.Fatalf("task = %s, output %v; want succeeded by attempt 2", task.State, task.Output)
	}
	if second := waitPidFile(t, pids+".2"); processAlive(second) {
		t.Errorf("the second attempt's escaped loop %d runs on after its attempt succeeded", second)
	}
	// The first worker was started the same way as this test: where the test may create
	// cgroups, so may the worker, and it must have said it does.
	if _, err := executor.TaskCgroupParent(conf.TaskCgroupAuto); err == nil {
		if !strings.Contains(w1.Log(), "cgroups of their own") {
			t.Errorf("worker-1 did not give its tasks cgroups, though it could:\n%s", w1.Log())
		}
	} else if !errors.Is(err, executor.ErrNoTaskCgroup) {
		t.Fatal(err)
	}
}

// waitPidFile waits for a task to write its pid file and returns the pid.
func waitPidFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitUntil(t, 20*time.Second, "the task to write "+path, func() bool {
		raw, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(raw)))
		return err == nil
	})
	return pid
}

// processAlive reports whether pid runs: it exists and is not a zombie.
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || !strings.HasPrefix(string(stat[i+1:]), " Z")
}
