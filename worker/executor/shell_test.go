package executor

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/mcptest"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/workflow"
)

// TestMain lets the test binary act as the supervisor (as the zksched binary does), and as
// stand-in worker processes: one that the orphan test kills with SIGKILL, one holding secrets
// in its environment (secretWorker).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == SuperviseArg {
		os.Exit(SuperviseMain(os.Args[2:]))
	}
	mcptest.Main()
	if cmd := os.Getenv("ZKSCHED_TEST_SECRET_WORKER"); cmd != "" {
		os.Exit(secretWorker(cmd))
	}
	if cmd := os.Getenv("ZKSCHED_TEST_FAKE_WORKER"); cmd != "" {
		// Non-dumpable as a real worker is: its supervisors still watch it through /proc.
		if err := ProtectFromTasks(); err != nil {
			panic(err)
		}
		self, _ := os.Executable()
		sh := Shell{Self: self, KillGrace: time.Second, ParentStopLimit: time.Second, Cgroup: os.Getenv("ZKSCHED_TEST_FAKE_WORKER_CGROUP"),
			// Its worker.task-env: the escape tests name their files in these.
			BaseEnv: TaskEnv(os.Environ(), append(slices.Clone(DefaultTaskEnv), "PIDFILE", "TICKS"), nil)}
		sh.Run(context.Background(), Task{Spec: workflow.Task{Command: cmd}}, os.Stdout)
		os.Exit(0)
	}
	if cmd := os.Getenv("ZKSCHED_TEST_DYING_WORKER"); cmd != "" {
		self, _ := os.Executable()
		sh := Shell{Self: self, KillGrace: time.Second}
		go sh.Run(context.Background(), Task{Spec: workflow.Task{Command: cmd}}, &syncBuffer{})
		// Die as the supervisor begins: once it runs the binary, after the delay the test asks
		// for (a few hundred microseconds to a few milliseconds: its runtime starting).
		delay, _ := time.ParseDuration(os.Getenv("ZKSCHED_TEST_DYING_DELAY"))
		for !childRuns(self) {
		}
		time.Sleep(delay)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	os.Exit(m.Run())
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func shell(t *testing.T) Shell {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Shell{Self: self, KillGrace: 500 * time.Millisecond}
}

func TestShellRunsWithEnvAndReportsOutput(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	task := Task{ID: 42, WorkflowInstanceID: 7, Attempt: 3, WorkerID: "h:1_2",
		Spec:   workflow.Task{Name: "hello", Command: `echo "task=$ZKSCHED_TASK_INSTANCE attempt=$ZKSCHED_ATTEMPT worker=$ZKSCHED_WORKER $FOO $ZKSCHED_PARAM_day"; echo oops >&2; echo; echo result-line; echo`, Env: map[string]string{"FOO": "bar"}},
		Params: map[string]string{"day": "monday"}}
	res := shell(t).Run(context.Background(), task, &log)
	if res.Err != nil || res.ExitCode == nil || *res.ExitCode != 0 || res.Stopped {
		t.Fatalf("result = %+v, want success, not stopped", res)
	}
	if res.Output != "result-line" {
		t.Errorf("output = %q, want %q", res.Output, "result-line")
	}
	for _, want := range []string{"task=42 attempt=3 worker=h:1_2 bar monday", "oops"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log %q lacks %q", log.String(), want)
		}
	}
}

// TestShellGetsItsItem: an item of a for-each task reads its item and index from its
// environment.
func TestShellGetsItsItem(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	task := Task{ID: 1, Spec: workflow.Task{Name: "sum", Command: `echo "$ZKSCHED_INDEX:$ZKSCHED_ITEM"`},
		Item: &workflow.Item{Value: "docs/a b.md", Index: 4}}
	if res := shell(t).Run(context.Background(), task, &log); res.Err != nil || res.Output != "4:docs/a b.md" {
		t.Fatalf("result = %+v, want the output 4:docs/a b.md", res)
	}
}

func TestShellExitCodeAndWorkdir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var log syncBuffer
	res := shell(t).Run(context.Background(), Task{Spec: workflow.Task{Command: "pwd; exit 3", Workdir: dir}}, &log)
	if res.Err == nil || res.ExitCode == nil || *res.ExitCode != 3 {
		t.Fatalf("result = %+v, want exit status 3", res)
	}
	if strings.TrimSpace(log.String()) != dir {
		t.Errorf("ran in %q, want %q", strings.TrimSpace(log.String()), dir)
	}
}

// TestShellRunsInAScratchDirectory: a task without a workdir runs in a directory of its
// attempt's own, named in ZKSCHED_WORKDIR, where it may write, and which is gone once the
// attempt has ended; with a workdir, ZKSCHED_WORKDIR names that.
func TestShellRunsInAScratchDirectory(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	task := Task{ID: 9, Attempt: 2, Spec: workflow.Task{Command: `echo data > file && test "$(pwd)" = "$ZKSCHED_WORKDIR" && echo "$ZKSCHED_WORKDIR"`}}
	res := shell(t).Run(context.Background(), task, &log)
	if res.Err != nil {
		t.Fatalf("result = %+v, log %q; want success", res, log.String())
	}
	if !strings.HasPrefix(filepath.Base(res.Output), "zksched-task-9-2-") {
		t.Errorf("ZKSCHED_WORKDIR = %q, want a directory named for task 9 attempt 2", res.Output)
	}
	if _, err := os.Stat(res.Output); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the scratch directory %s after the attempt: %v, want it removed", res.Output, err)
	}

	dir := t.TempDir()
	res = shell(t).Run(context.Background(), Task{Spec: workflow.Task{Command: `echo "$ZKSCHED_WORKDIR"`, Workdir: dir}}, &log)
	if res.Err != nil || res.Output != dir {
		t.Errorf("result = %+v, want the output %s", res, dir)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the task's own workdir after the attempt: %v, want it kept", err)
	}
}

// TestScratchDirectoryGoesWithAKilledWorker: the supervisor removes the scratch directory of a
// task whose worker was killed with kill -9.
func TestScratchDirectoryGoesWithAKilledWorker(t *testing.T) {
	t.Parallel()
	named := filepath.Join(t.TempDir(), "workdir")
	self, _ := os.Executable()
	w := exec.Command(self)
	w.Env = append(os.Environ(), "ZKSCHED_TEST_FAKE_WORKER=echo \"$ZKSCHED_WORKDIR\" > "+named+"; sleep 60")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task to name its directory", func() bool { return size(named) > 0 })
	b, _ := os.ReadFile(named)
	dir := strings.TrimSpace(string(b))
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the scratch directory while the task runs: %v", err)
	}
	if err := w.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w.Wait()
	waitFor(t, "the scratch directory to go", func() bool {
		_, err := os.Stat(dir)
		return errors.Is(err, fs.ErrNotExist)
	})
}

func TestShellStopKillsTheGroupAfterGrace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The script ignores SIGTERM and leaves a child of its own: both must be gone when Run
	// returns, the script only by SIGKILL after the grace.
	cmd := `trap '' TERM; sleep 300 & echo $! > ` + pidFile + `; echo started; while true; do sleep 0.05; done`
	ctx, cancel := context.WithCancel(context.Background())
	var log syncBuffer
	done := make(chan Result, 1)
	go func() { done <- shell(t).Run(ctx, Task{Spec: workflow.Task{Command: cmd}}, &log) }()
	waitFor(t, "the task to start", func() bool { return strings.Contains(log.String(), "started") })
	stopAt := time.Now()
	cancel()
	res := <-done
	took := time.Since(stopAt)
	if res.ExitCode == nil || *res.ExitCode != 128+int(syscall.SIGKILL) || !res.Stopped {
		t.Fatalf("result = %+v, want stopped, killed by SIGKILL", res)
	}
	if took < 500*time.Millisecond {
		t.Errorf("stopped after %v, before the 500ms grace", took)
	}
	assertGone(t, pidFile)
	if !strings.Contains(log.String(), "SIGKILL") {
		t.Errorf("log does not say the group was killed: %q", log.String())
	}
}

func TestShellKillsWhatTheScriptLeftBehind(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "bg.pid")
	res := shell(t).Run(context.Background(), Task{Spec: workflow.Task{Command: "sleep 300 & echo $! > " + pidFile}}, &syncBuffer{})
	if res.Err != nil {
		t.Fatalf("result = %+v", res)
	}
	assertGone(t, pidFile)
}

// TestTaskDiesWithItsWorker kills a stand-in worker with SIGKILL while its task's grandchild
// keeps appending to a file: the file must stop growing.
func TestTaskDiesWithItsWorker(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "ticks")
	pidFile := filepath.Join(t.TempDir(), "pid")
	self, _ := os.Executable()
	w := exec.Command(self)
	w.Env = append(os.Environ(), "ZKSCHED_TEST_FAKE_WORKER=bash -c 'echo $$ > "+pidFile+"; while true; do echo tick >> "+out+"; sleep 0.05; done'; true")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task to write", func() bool { return size(out) > 0 })
	if err := w.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w.Wait()
	killedAt := time.Now()
	// Within a moment of the worker's death the task is gone.
	assertGone(t, pidFile)
	t.Logf("task gone %v after the worker was killed", time.Since(killedAt))
}

// childRuns says whether a child of this process (started by any of its threads) runs the
// binary exe: it has been forked and has exec'd.
func childRuns(exe string) bool {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, pid := range strings.Fields(string(b)) {
			if got, _ := os.Readlink("/proc/" + pid + "/exe"); got == exe {
				return true
			}
		}
	}
	return false
}

// TestWorkerDyingAsItStartsTheSupervisor: a worker killed in the moments after it started a
// supervisor, before the supervisor could read its parent or catch the parent-death signal. The
// task must not run to its end behind the dead worker's back (the leader gives it to another).
func TestWorkerDyingAsItStartsTheSupervisor(t *testing.T) {
	t.Parallel()
	self, _ := os.Executable()
	var wg sync.WaitGroup
	outs := make([]string, 20)
	for i := range outs {
		outs[i] = filepath.Join(t.TempDir(), "ran")
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := exec.Command(self)
			w.Env = append(os.Environ(), "ZKSCHED_TEST_DYING_DELAY="+(time.Duration(i)*2500*time.Microsecond).String(),
				"ZKSCHED_TEST_DYING_WORKER=echo started >> "+outs[i]+"; sleep 1; echo ended >> "+outs[i])
			_ = w.Run() // it kills itself
		}()
	}
	wg.Wait()
	// A task that ran would have written "ended" a second after it started: real time has to
	// pass for one that escaped to show it, so the test sleeps on purpose.
	time.Sleep(2 * time.Second)
	for i, out := range outs {
		if b, _ := os.ReadFile(out); strings.Contains(string(b), "ended") {
			t.Errorf("worker %d: its task ran to its end after the worker died: %q", i, b)
		}
	}
}

// TestTaskDiesWithAFrozenWorker stops a stand-in worker with SIGSTOP: once it has been stopped
// for its parent-stop limit (1 s), its task is killed, though the worker itself cannot act.
func TestTaskDiesWithAFrozenWorker(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "ticks")
	pidFile := filepath.Join(t.TempDir(), "pid")
	self, _ := os.Executable()
	w := exec.Command(self)
	w.Env = append(os.Environ(), "ZKSCHED_TEST_FAKE_WORKER=bash -c 'echo $$ > "+pidFile+"; while true; do echo tick >> "+out+"; sleep 0.05; done'; true")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = w.Process.Signal(syscall.SIGCONT)
		_ = w.Process.Kill()
		_ = w.Wait()
	}()
	waitFor(t, "the task to write", func() bool { return size(out) > 0 })
	if err := w.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	// The task was alive at its last write and whenever this test saw it: the later of the
	// two is at least 0.9 s after the stop if the limit was honoured (the supervisor notices
	// the stop within its 100 ms tick), however a loaded machine delays either.
	var seenAlive time.Time
	pid := pidIn(t, pidFile)
	waitFor(t, "the task to be gone", func() bool {
		if alive(pid) {
			seenAlive = time.Now()
			return false
		}
		return true
	})
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	last := fi.ModTime()
	if seenAlive.After(last) {
		last = seenAlive
	}
	ran := last.Sub(stoppedAt)
	if ran < 900*time.Millisecond {
		t.Fatalf("the task stopped %v after the worker was frozen, before the 1s limit", ran)
	}
	t.Logf("task killed %v after its worker was stopped (limit 1s)", ran)
}

// TestStopWithABrokenLogPipeStillKillsTheTask: the supervisor's output goes to its worker, and
// once the worker is dead that pipe is broken. A stop must still kill the task: the supervisor
// acts before it reports, and a failed report does not end it.
func TestStopWithABrokenLogPipeStillKillsTheTask(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "ticks")
	self, _ := os.Executable()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close() // nobody reads the supervisor's output any more
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(self, SuperviseArg, "--grace", "300ms", "echo $$ > "+pidFile+"; while true; do echo tick >> "+out+"; sleep 0.05; done")
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	waitFor(t, "the task to write", func() bool { return size(out) > 0 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pidFile)
	_ = cmd.Wait()
}

func size(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func assertGone(t *testing.T, pidFile string) {
	t.Helper()
	pid := pidIn(t, pidFile)
	waitFor(t, "the process to be gone", func() bool { return !alive(pid) })
}

// pidIn reads the pid a task wrote to pidFile.
func pidIn(t *testing.T, pidFile string) int {
	t.Helper()
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitFor checks cond every 20 ms for up to 10 s: the processes under test give no signal to
// wait on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 10*time.Second, 20*time.Millisecond, what, cond)
}
