package executor

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/workflow"
)

// Secrets the stand-in worker holds in its environment, as a real one would.
const (
	testDSN      = "postgres://zksched:dsn-password-4711@db.example:5432/zksched"
	testAPIToken = "api-token-0123456789abcdef"
	testModelKey = "sk-model-key-9876543210"
)

// secretEnv is the stand-in worker's environment: what a worker under systemd has, its
// secrets, and variables no task needs.
func secretEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=/var/lib/zksched", "USER=zksched", "LOGNAME=zksched", "SHELL=/bin/bash",
		"LANG=C.UTF-8", "LC_TIME=C", "TZ=UTC", "TMPDIR=" + os.TempDir(),
		"ZKSCHED_DB_DSN=" + testDSN, "ZKSCHED_API_TOKEN=" + testAPIToken, "ZKSCHED_WORKER_SLOTS=4", "OPENAI_API_KEY=" + testModelKey,
		"AWS_REGION=eu-west-1", "AWS_SECRET_ACCESS_KEY=aws-secret", "MY_A=1", "MY_B=2", "INVOCATION_ID=abc", "GORACE=atexit_sleep_ms=0"}
}

// secretWorker is a stand-in worker process (see TestMain): it runs one shell task, command,
// as a worker would, writing the task's log to its standard output. ZKSCHED_TEST_TASK_ENV is
// its worker.task-env (unset: the Shell's default environment), ZKSCHED_TEST_PROTECT=1 makes
// it call ProtectFromTasks as a worker does at start. The task gets the stand-in's pid as the
// param worker_pid.
func secretWorker(command string) int {
	if os.Getenv("ZKSCHED_TEST_PROTECT") == "1" {
		if err := ProtectFromTasks(); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	sh := Shell{Self: self, KillGrace: time.Second}
	if allow, ok := os.LookupEnv("ZKSCHED_TEST_TASK_ENV"); ok {
		sh.BaseEnv = TaskEnv(os.Environ(), append(slices.Clone(DefaultTaskEnv), strings.Split(allow, ",")...),
			[]string{"ZKSCHED_*", "OPENAI_API_KEY"})
	}
	res := sh.Run(context.Background(), Task{ID: 5, WorkflowInstanceID: 6, Attempt: 1, WorkerID: "w",
		Spec: workflow.Task{Name: "t", Command: command}, Params: map[string]string{"worker_pid": strconv.Itoa(os.Getpid())}}, os.Stdout)
	if res.Err != nil {
		fmt.Println("task:", res.Err)
	}
	return 0
}

// runSecretWorker runs secretWorker with command and extra variables and returns what it
// printed. As root it runs as the test task user, from a copy of the test binary that user
// may execute: a task running as root may read any process's memory, which is not the case
// under test.
func runSecretWorker(t *testing.T, command string, extra ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(append(secretEnv(), "ZKSCHED_TEST_SECRET_WORKER="+command), extra...)
	if os.Geteuid() == 0 {
		u := testenv.TaskUser(t)
		tu, err := LookupTaskUser(u.Username)
		if err != nil {
			t.Fatal(err)
		}
		dir := worldDir(t)
		bin := filepath.Join(dir, "worker")
		copyFile(t, self, bin)
		cmd = exec.Command(bin)
		cmd.Env = append(append(secretEnv(), "ZKSCHED_TEST_SECRET_WORKER="+command), extra...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tu.credential()}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("stand-in worker: %v\n%s", err, out)
	}
	return string(out)
}

// worldDir returns a new directory every user may use, removed when the test ends: t.TempDir
// is reachable by its owner only.
func worldDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "zksched-taskenv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTaskEnvIsTheAllowList runs `env` in a real shell task of a worker whose environment
// holds its DSN, API token, a model key and unrelated variables: the task sees exactly the
// allow-list, worker.task-env's additions and its own variables.
func TestTaskEnvIsTheAllowList(t *testing.T) {
	t.Parallel()
	base := map[string]string{"PATH": os.Getenv("PATH"), "HOME": "/var/lib/zksched", "USER": "zksched", "LOGNAME": "zksched",
		"SHELL": "/bin/bash", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC", "TMPDIR": os.TempDir(),
		"ZKSCHED_TASK_INSTANCE": "5", "ZKSCHED_WORKFLOW_INSTANCE": "6", "ZKSCHED_ATTEMPT": "1", "ZKSCHED_WORKER": "w",
		"ZKSCHED_TASK_NAME": "t", "ZKSCHED_PARAM_worker_pid": "*", "ZKSCHED_WORKDIR": "*",
		// bash's own
		"PWD": "*", "SHLVL": "*", "_": "*"}
	withTaskEnv := maps.Clone(base)
	withTaskEnv["AWS_REGION"], withTaskEnv["MY_A"], withTaskEnv["MY_B"], withTaskEnv["GORACE"] = "eu-west-1", "1", "2", "atexit_sleep_ms=0"
	for _, tc := range []struct {
		name  string
		extra []string
		want  map[string]string // "*": any value
	}{
		{"default", nil, base},
		// OPENAI_API_KEY is denied (a provider's key) though listed: config validation refuses
		// that, and the filter holds anyway.
		{"task-env", []string{"ZKSCHED_TEST_TASK_ENV=AWS_REGION,MY_*,GORACE,OPENAI_API_KEY"}, withTaskEnv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := runSecretWorker(t, "env", tc.extra...)
			got := map[string]string{}
			for line := range strings.Lines(out) {
				k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
				if !ok {
					t.Fatalf("stand-in worker printed %q, not a variable:\n%s", line, out)
				}
				got[k] = v
			}
			for k, v := range got {
				if w, ok := tc.want[k]; !ok || (w != "*" && w != v) {
					t.Errorf("the task sees %s=%s; want it %s", k, v, map[bool]string{true: "= " + w, false: "absent"}[ok])
				}
			}
			for k := range tc.want {
				if _, ok := got[k]; !ok {
					t.Errorf("the task lacks %s", k)
				}
			}
			for _, secret := range []string{testDSN, testAPIToken, testModelKey} {
				if strings.Contains(out, secret) {
					t.Errorf("the task's environment holds a secret of its worker:\n%s", out)
				}
			}
		})
	}
}

// TestWorkerEnvironIsHiddenFromItsTasks: a task running as its worker's user reads the
// worker's /proc/PID/environ (the worker's pid is no secret: it is its supervisor's parent,
// and here a param) and its supervisor's. Without ProtectFromTasks the read shows the DSN,
// which proves the attack works here; with it, it is refused, and the supervisor, readable,
// holds only the task's own environment.
func TestWorkerEnvironIsHiddenFromItsTasks(t *testing.T) {
	t.Parallel()
	// The refusal of the worker's environ is a line on stderr, which the executor reads from a
	// pipe of its own: sent to stdout, it comes before "supervisor:" as it was written.
	command := `echo "worker:"; { tr '\0' '\n' < /proc/$ZKSCHED_PARAM_worker_pid/environ; } 2>&1; ` +
		`echo "supervisor:"; tr '\0' '\n' < /proc/$PPID/environ; ` +
		`echo "supervisor's parent: $(awk '/^PPid:/ {print $2}' /proc/$PPID/status)"`
	t.Run("unprotected", func(t *testing.T) {
		t.Parallel()
		out := runSecretWorker(t, command)
		if !strings.Contains(out, testDSN) {
			t.Fatalf("the task could not read an unprotected worker's environ, so the protected case proves nothing:\n%s", out)
		}
	})
	t.Run("protected", func(t *testing.T) {
		t.Parallel()
		out := runSecretWorker(t, command, "ZKSCHED_TEST_PROTECT=1")
		for _, secret := range []string{testDSN, testAPIToken, testModelKey} {
			if strings.Contains(out, secret) {
				t.Errorf("the task read a secret of its protected worker:\n%s", out)
			}
		}
		if !strings.Contains(out, "Permission denied") {
			t.Errorf("the task's read of the worker's environ was not refused:\n%s", out)
		}
		if !strings.Contains(out, "supervisor:\nPATH=") {
			t.Errorf("the task could not read its supervisor's environ (the task's own):\n%s", out)
		}
	})
}

// TestLookupTaskUser: an unknown user and a worker that is not root are refused with a clear
// error; a known user is resolved with its groups and home.
func TestLookupTaskUser(t *testing.T) {
	t.Parallel()
	u := testenv.TaskUser(t)
	tu, err := LookupTaskUser(u.Username)
	if err != nil {
		t.Fatal(err)
	}
	if strconv.Itoa(int(tu.UID)) != u.Uid || strconv.Itoa(int(tu.GID)) != u.Gid || tu.Home != u.HomeDir || len(tu.Groups) == 0 {
		t.Errorf("LookupTaskUser(%s) = %+v, want uid %s gid %s home %s and its groups", u.Username, tu, u.Uid, u.Gid, u.HomeDir)
	}
	if byID, err := LookupTaskUser(u.Uid); err != nil || byID.Name != u.Username {
		t.Errorf("LookupTaskUser(%s) = %+v, %v; want %s", u.Uid, byID, err, u.Username)
	}
	if _, err := LookupTaskUser("zksched-no-such-user"); err == nil || !strings.Contains(err.Error(), `task user "zksched-no-such-user": user: unknown user`) {
		t.Errorf("LookupTaskUser(unknown) = %v, want an unknown user error", err)
	}
	if _, err := LookupTaskUser("root"); err == nil || !strings.Contains(err.Error(), "is root") {
		t.Errorf("LookupTaskUser(root) = %v, want a refusal", err)
	}
	if err := tu.CheckDirs(tu.Home, os.TempDir()); err != nil {
		t.Errorf("CheckDirs(home, tmp) = %v", err)
	}
	if err := tu.CheckDirs(t.TempDir()); err == nil || !strings.Contains(err.Error(), "cannot write in") {
		t.Errorf("CheckDirs(a directory of root's) = %v, want an error", err)
	}
	// The same lookup in a worker that is not root.
	self, _ := os.Executable()
	dir := worldDir(t)
	bin := filepath.Join(dir, "worker")
	copyFile(t, self, bin)
	cmd := exec.Command(bin, "-test.run=^TestLookupTaskUserAsNonRoot$")
	cmd.Env = []string{"ZKSCHED_TEST_LOOKUP_AS_NON_ROOT=" + u.Username}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tu.credential()}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("as a non-root worker: %v\n%s", err, out)
	}
}

// TestLookupTaskUserAsNonRoot is run by TestLookupTaskUser as a user that is not root.
func TestLookupTaskUserAsNonRoot(t *testing.T) {
	name := os.Getenv("ZKSCHED_TEST_LOOKUP_AS_NON_ROOT")
	if name == "" {
		t.Skip("run by TestLookupTaskUser as a user that is not root")
	}
	_, err := LookupTaskUser(name)
	if err == nil || !strings.Contains(err.Error(), "not root, and only root can run tasks as another user") {
		t.Fatalf("LookupTaskUser as uid %d = %v, want a refusal", os.Geteuid(), err)
	}
}

// TestTaskRunsAsTheTaskUser runs a task as the task user under each containment: it has the
// user's ids, groups, HOME, USER and LOGNAME, runs in a scratch directory of the user's, may reopen its output and
// write a temporary file, and what it leaves behind outside its process group is still
// killed, as is the task when it is stopped.
func TestTaskRunsAsTheTaskUser(t *testing.T) {
	t.Parallel()
	u := testenv.TaskUser(t)
	tu, err := LookupTaskUser(u.Username)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	for _, c := range containments(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sh := Shell{Self: self, KillGrace: 500 * time.Millisecond, Cgroup: c.cgroup, User: tu}
			dir := worldDir(t)
			var log syncBuffer
			cmd := `id -u; id -g; echo "groups $(id -G)"; echo "$HOME $USER $LOGNAME"; echo "in $(pwd) of $(stat -c %U .)"; echo to-stderr > /dev/stderr; ` +
				`f=$(mktemp) && echo tmp-ok && rm "$f"; ` + escapes[0].command + waitForPid + "echo last"
			res := sh.Run(context.Background(), Task{Spec: workflow.Task{Command: cmd, Env: escapeEnv(dir)}}, &log)
			if res.Err != nil || res.Output != "last" {
				t.Fatalf("result = %+v; log:\n%s", res, log.String())
			}
			// Each want is a run of stdout lines with no stderr write between them: the executor
			// reads stderr from a pipe of its own, so "to-stderr" may come before lines written
			// to stdout ahead of it.
			for _, want := range []string{u.Uid + "\n" + u.Gid + "\n", u.HomeDir + " " + u.Username + " " + u.Username + "\n",
				"in " + filepath.Join(os.TempDir(), "zksched-task-0-0-"), " of " + u.Username + "\n", "to-stderr\n", "tmp-ok\n"} {
				if !strings.Contains(log.String(), want) {
					t.Errorf("the task's log lacks %q:\n%s", want, log.String())
				}
			}
			var idGroups []string
			for line := range strings.Lines(log.String()) {
				if g, ok := strings.CutPrefix(strings.TrimSpace(line), "groups "); ok {
					idGroups = strings.Fields(g)
				}
			}
			for _, g := range tu.Groups {
				if !slices.Contains(idGroups, strconv.Itoa(int(g))) {
					t.Errorf("the task's groups %v lack the user's group %d", idGroups, g)
				}
			}
			assertGone(t, filepath.Join(dir, "loop.pid"))

			ctx, cancel := context.WithCancel(context.Background())
			var stopLog syncBuffer
			done := make(chan Result, 1)
			go func() {
				done <- sh.Run(ctx, Task{Spec: workflow.Task{Command: "trap '' TERM; echo started; while :; do sleep .05; done"}}, &stopLog)
			}()
			waitFor(t, "the task to start", func() bool { return strings.Contains(stopLog.String(), "started") })
			cancel()
			if res := <-done; !res.Stopped || res.ExitCode == nil || *res.ExitCode != 128+int(syscall.SIGKILL) {
				t.Errorf("stopped task: result = %+v, want stopped by SIGKILL; log:\n%s", res, stopLog.String())
			}
		})
	}
}
