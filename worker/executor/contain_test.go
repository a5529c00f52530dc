package executor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/workflow"
)

// containment is one way the supervisor holds a task's processes.
type containment struct {
	name   string
	cgroup string // the parent of the attempts' cgroups; empty: the subreaper walk
}

// containments returns both ways: a cgroup leaf per attempt where this machine lets the test
// create one (it is skipped otherwise), and the subreaper fallback, forced by giving no cgroup.
func containments(t *testing.T) []containment {
	t.Helper()
	cs := []containment{{name: "subreaper"}}
	dir, err := TaskCgroupParent("auto")
	if err != nil {
		requireCgroupsInCI(t, err)
		t.Logf("no cgroup containment here, testing the subreaper only: %v", err)
		return cs
	}
	return append(cs, containment{name: "cgroup", cgroup: dir})
}

// requireCgroupsInCI fails the test where CI runs (as root, on a machine with cgroup v2): there
// the cgroup path must be tested, not passed over.
func requireCgroupsInCI(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI must test cgroup containment, but: %v", err)
	}
}

// escapes are ways a task's process leaves bash's process group or its parent. Each starts
// a loop that writes its pid to $PIDFILE and then appends to $TICKS, keeping the task's
// stdout and stderr open, and waits until the loop has written its pid.
var escapes = []struct{ name, command string }{
	{"setsid", `setsid bash -c 'echo $$ > "$PIDFILE"; while :; do date >> "$TICKS"; sleep .05; done' & `},
	{"double fork", `( setsid bash -c 'echo $$ > "$PIDFILE"; while :; do date >> "$TICKS"; sleep .05; done' & ) & `},
	{"set -m job", `set -m; bash -c 'echo $$ > "$PIDFILE"; while :; do date >> "$TICKS"; sleep .05; done' & set +m; `},
}

const waitForPid = `until [ -s "$PIDFILE" ]; do sleep .01; done; `

// escapeEnv returns the task's variables that name the escaped loop's files in dir.
func escapeEnv(dir string) map[string]string {
	return map[string]string{"PIDFILE": filepath.Join(dir, "loop.pid"), "TICKS": filepath.Join(dir, "ticks")}
}

// TestEscapedProcessesDieWhenBashExits: a task that started a process outside its process
// group and exited 0 succeeds with its own last line, although the escaped process held its
// stdout, and nothing of it is left when Run returns.
func TestEscapedProcessesDieWhenBashExits(t *testing.T) {
	t.Parallel()
	for _, c := range containments(t) {
		for _, e := range escapes {
			t.Run(c.name+"/"+e.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				sh := shell(t)
				sh.Cgroup = c.cgroup
				var log syncBuffer
				task := Task{ID: time.Now().UnixNano(), Spec: workflow.Task{Env: escapeEnv(dir),
					Command: e.command + waitForPid + `cat /proc/self/cgroup >&2; echo result`}}
				start := time.Now()
				res := sh.Run(context.Background(), task, &log)
				took := time.Since(start)
				if res.Err != nil || res.ExitCode == nil || *res.ExitCode != 0 || res.Stopped || res.Output != "result" {
					t.Fatalf("result = %+v (took %v, log %q), want success with output %q", res, took, log.String(), "result")
				}
				// The old supervisor left the escaped process running and the worker waited for
				// it to close the pipes, until it gave up reading them and said so.
				if strings.Contains(log.String(), "holds its output") {
					t.Errorf("Run took %v: it waited for the escaped process's pipes (log %q)", took, log.String())
				}
				if pid := readPid(t, escapeEnv(dir)["PIDFILE"]); alive(pid) {
					t.Errorf("escaped process %d is alive after Run returned", pid)
				}
				assertContainedIn(t, c, task, log.String())
			})
		}
	}
}

// TestEscapedProcessesDieWhenTheTaskIsStopped: a stop (timeout, kill, hand-back) ends the
// escaped process too, and gives it the kill grace to end on its SIGTERM, though bash itself
// ended at once.
func TestEscapedProcessesDieWhenTheTaskIsStopped(t *testing.T) {
	t.Parallel()
	for _, c := range containments(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			env := escapeEnv(dir)
			termed := filepath.Join(dir, "termed")
			sh := shell(t)
			sh.Cgroup = c.cgroup
			ctx, cancel := context.WithCancel(context.Background())
			task := Task{ID: time.Now().UnixNano(), Spec: workflow.Task{Env: env,
				Command: `setsid bash -c 'trap "echo TERM > ` + termed + `; exit 0" TERM; echo $$ > "$PIDFILE"; while :; do date >> "$TICKS"; sleep .05; done' & ` +
					waitForPid + `echo started; sleep 60`}}
			var log syncBuffer
			done := make(chan Result, 1)
			go func() { done <- sh.Run(ctx, task, &log) }()
			waitFor(t, "the task to start", func() bool { return strings.Contains(log.String(), "started") })
			cancel()
			res := <-done
			if !res.Stopped || res.Err == nil {
				t.Fatalf("result = %+v, want stopped", res)
			}
			if pid := readPid(t, env["PIDFILE"]); alive(pid) {
				t.Errorf("escaped process %d is alive after Run returned", pid)
			}
			if b, err := os.ReadFile(termed); err != nil || strings.TrimSpace(string(b)) != "TERM" {
				t.Errorf("the escaped process did not end on SIGTERM within the grace: %q, %v", b, err)
			}
			assertContainedIn(t, c, task, "")
		})
	}
}

// TestEscapedProcessesDieWithTheWorker kills a stand-in worker with SIGKILL, or freezes it
// with SIGSTOP past its parent-stop limit (1 s), while its task's escaped process (outside
// the process group the old supervisor killed) keeps appending to a file: the process must
// die, whatever holds it.
func TestEscapedProcessesDieWithTheWorker(t *testing.T) {
	t.Parallel()
	for _, c := range containments(t) {
		for _, e := range escapes[:2] {
			for _, fault := range []struct {
				name string
				sig  syscall.Signal
			}{{"kill -9", syscall.SIGKILL}, {"SIGSTOP", syscall.SIGSTOP}} {
				t.Run(c.name+"/"+e.name+"/"+fault.name, func(t *testing.T) {
					t.Parallel()
					dir := t.TempDir()
					env := escapeEnv(dir)
					self, _ := os.Executable()
					w := exec.Command(self)
					w.Env = append(os.Environ(), "ZKSCHED_TEST_FAKE_WORKER="+e.command+" sleep 40",
						"ZKSCHED_TEST_FAKE_WORKER_CGROUP="+c.cgroup, "PIDFILE="+env["PIDFILE"], "TICKS="+env["TICKS"])
					if err := w.Start(); err != nil {
						t.Fatal(err)
					}
					defer func() {
						_ = w.Process.Signal(syscall.SIGCONT)
						_ = w.Process.Kill()
						_ = w.Wait()
					}()
					waitFor(t, "the task to tick", func() bool { return size(env["TICKS"]) > 0 })
					pid := readPid(t, env["PIDFILE"])
					if err := w.Process.Signal(fault.sig); err != nil {
						t.Fatal(err)
					}
					waitFor(t, "the process to be gone", func() bool { return !alive(pid) })
				})
			}
		}
	}
}

// TestWorkerEndsTheCgroupOfAKilledSupervisor: a supervisor killed outright cannot end its
// task; the worker finds its cgroup left behind and ends it.
func TestWorkerEndsTheCgroupOfAKilledSupervisor(t *testing.T) {
	t.Parallel()
	dir, err := TaskCgroupParent("auto")
	if err != nil {
		requireCgroupsInCI(t, err)
		t.Skipf("no cgroup containment here: %v", err)
	}
	tmp := t.TempDir()
	sh := shell(t)
	sh.Cgroup = dir
	task := Task{ID: time.Now().UnixNano(), Spec: workflow.Task{Env: escapeEnv(tmp),
		Command: escapes[0].command + waitForPid + `echo $PPID > ` + filepath.Join(tmp, "supervisor.pid") + `; sleep 60`}}
	done := make(chan Result, 1)
	go func() { done <- sh.Run(context.Background(), task, &syncBuffer{}) }()
	waitFor(t, "the supervisor to write its pid", func() bool { return size(filepath.Join(tmp, "supervisor.pid")) > 0 })
	if err := syscall.Kill(readPid(t, filepath.Join(tmp, "supervisor.pid")), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Err == nil {
		t.Fatalf("result = %+v, want a failure", res)
	}
	if pid := readPid(t, escapeEnv(tmp)["PIDFILE"]); alive(pid) {
		t.Errorf("escaped process %d is alive after Run returned", pid)
	}
	assertContainedIn(t, containment{name: "cgroup", cgroup: dir}, task, "")
}

// TestOrphansAreReapedWhileTheTaskRuns: an orphan that came to the supervisor (a subreaper)
// is reaped when it ends, not when the task does, so a long task that keeps leaving orphans
// does not fill the process table with zombies.
func TestOrphansAreReapedWhileTheTaskRuns(t *testing.T) {
	t.Parallel()
	for _, c := range containments(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sh := shell(t)
			sh.Cgroup = c.cgroup
			// $PPID is the supervisor. The script ends as soon as it has no zombie children.
			cmd := `( sleep .01 & ); for i in $(seq 200); do ` +
				`if [ -z "$(ps --ppid $PPID -o stat= | grep Z)" ]; then echo reaped; exit 0; fi; sleep .05; done; ` +
				`ps --ppid $PPID -o pid=,stat=,args=; exit 1`
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var log syncBuffer
			res := sh.Run(ctx, Task{ID: time.Now().UnixNano(), Spec: workflow.Task{Command: cmd}}, &log)
			if res.Err != nil || res.Output != "reaped" {
				t.Fatalf("result = %+v, log %q; want the orphan reaped while bash runs", res, log.String())
			}
		})
	}
}

func TestTaskCgroupParent(t *testing.T) {
	t.Parallel()
	if got, err := TaskCgroupParent("off"); got != "" || err != nil {
		t.Errorf(`TaskCgroupParent("off") = %q, %v; want "", nil`, got, err)
	}
	got, err := TaskCgroupParent(t.TempDir())
	if got != "" || err == nil || errors.Is(err, ErrNoTaskCgroup) {
		t.Errorf("TaskCgroupParent(a plain directory) = %q, %v; want an error of its own", got, err)
	}
	got, err = TaskCgroupParent("auto")
	if err != nil {
		if !errors.Is(err, ErrNoTaskCgroup) || got != "" {
			t.Errorf(`TaskCgroupParent("auto") = %q, %v; want "" and ErrNoTaskCgroup when there is none`, got, err)
		}
		return
	}
	if _, err := os.Stat(filepath.Join(got, "cgroup.procs")); err != nil {
		t.Errorf(`TaskCgroupParent("auto") = %q, not a cgroup: %v`, got, err)
	}
	if again, err := TaskCgroupParent(got); again != got || err != nil {
		t.Errorf("TaskCgroupParent(%q) = %q, %v; want it back", got, again, err)
	}
}

func TestCgroupDir(t *testing.T) {
	t.Parallel()
	const (
		unified = "25 30 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
		hybrid  = "26 25 0:24 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n" +
			"27 26 0:25 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw\n" +
			"28 26 0:26 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,memory\n"
		// A container's cgroup namespace: the mount shows the host's /kubepods/pod1 as its root.
		namespaced = "40 35 0:30 /kubepods/pod1 /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n"
		spaced     = "41 35 0:30 / /run/my\\040cgroups rw,relatime - cgroup2 cgroup2 rw\n"
	)
	for _, tt := range []struct {
		name, cgroups, mountinfo, want, err string
	}{
		{"unified", "0::/system.slice/zksched-worker.service\n", unified, "/sys/fs/cgroup/system.slice/zksched-worker.service", ""},
		{"hybrid", "1:memory:/x\n0::/system.slice/zksched-worker.service\n", hybrid, "/sys/fs/cgroup/unified/system.slice/zksched-worker.service", ""},
		{"root", "0::/\n", unified, "/sys/fs/cgroup", ""},
		{"namespace", "0::/kubepods/pod1/worker\n", namespaced, "/sys/fs/cgroup/worker", ""},
		{"escaped mount point", "0::/w\n", spaced, "/run/my cgroups/w", ""},
		{"only v1", "4:memory:/x\n1:name=systemd:/x\n", hybrid, "", "no cgroup v2 hierarchy"},
		{"no cgroup2 mount", "0::/x\n", "26 25 0:24 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n", "", "no cgroup2 mount"},
		{"outside the mount's root", "0::/other/w\n", namespaced, "", "no cgroup2 mount"},
		{"sibling of the mount's root", "0::/kubepods/pod10\n", namespaced, "", "no cgroup2 mount"},
	} {
		got, err := cgroupDir(tt.cgroups, tt.mountinfo)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: cgroupDir = %q, %v; want %q, %q", tt.name, got, err, tt.want, tt.err)
		}
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{`/sys/fs/cgroup`: `/sys/fs/cgroup`, `/a\040b\134c`: `/a b\c`, `/x\04`: `/x\04`} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

// assertContainedIn checks, for a cgroup containment, that the task ran in a leaf of its own
// (when log holds the task's /proc/self/cgroup) and that the leaf is gone.
func assertContainedIn(t *testing.T, c containment, task Task, log string) {
	t.Helper()
	if c.cgroup == "" {
		return
	}
	prefix := "zksched-task-" + strconv.FormatInt(task.ID, 10) + "-"
	if log != "" && !strings.Contains(log, "/"+prefix) {
		t.Errorf("the task did not run in a cgroup of its own: %q", log)
	}
	left, err := filepath.Glob(filepath.Join(c.cgroup, prefix+"*"))
	if err != nil || len(left) > 0 {
		t.Errorf("task cgroups left behind: %v %v", left, err)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// alive reports whether pid runs; a zombie has ended.
func alive(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.state != 'Z'
}
