package e2e

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
)

// The secrets every worker of these tests holds in its environment, as one under systemd
// would from its EnvironmentFile.
const (
	attackDBPassword = "attack-db-password-4711"
	taskAttackToken  = "attack-api-token-0123456789"
	attackModelKey   = "sk-attack-model-key-9876543210"
)

// secretE2E is a cluster whose processes hold a DSN with a password (bin/services.sh's, or
// attackDBPassword where the test server trusts loopback and so checks none), an API token and
// a model provider's key. It returns the cluster and every secret value a task must never see.
func secretE2E(t *testing.T) (*e2e, []string) {
	t.Helper()
	e := setupE2E(t, nil, "", "ZKSCHED_API_TOKEN="+taskAttackToken,
		"ZKSCHED_LLM_PROVIDERS_PAID_TYPE=openai", "ZKSCHED_LLM_PROVIDERS_PAID_MODEL=m",
		"ZKSCHED_LLM_PROVIDERS_PAID_BASE_URL=http://127.0.0.1:9/v1", "ZKSCHED_LLM_PROVIDERS_PAID_API_KEY_ENV=ATTACK_MODEL_KEY",
		"ATTACK_MODEL_KEY="+attackModelKey)
	var dsn string
	for _, kv := range e.Env {
		if v, ok := strings.CutPrefix(kv, "ZKSCHED_DB_DSN="); ok {
			dsn = v
		}
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	password, ok := u.User.Password()
	if !ok {
		password = attackDBPassword
		u.User = url.UserPassword(u.User.Username(), password)
		e.Env = append(e.Env, "ZKSCHED_DB_DSN="+u.String())
	}
	return e, []string{u.String(), password, taskAttackToken, attackModelKey}
}

// storedText returns everything stored of a workflow instance's task: its first attempt's
// log, its output and its error.
func (e *e2e) storedText(t *testing.T, wf int64, task string) (log, output string) {
	t.Helper()
	ti := e.tasks(t, wf)[task]
	log, err := e.db.TaskLogRead(context.Background(), ti.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ti.Output != nil {
		output = *ti.Output
	}
	if ti.Error != nil {
		output += "\n" + *ti.Error
	}
	return log, output
}

func assertNoSecret(t *testing.T, secrets []string, what, text string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s holds the secret %q:\n%s", what, s, text)
		}
	}
}

// TestAttackTaskReadsItsEnvironment: a shell task prints its environment and its
// supervisor's, the process between it and the worker. Neither holds the worker's DSN, API
// token or model key; and a secret the task is handed anyway (here as a param) is stored as
// *** in its log and output. A worker told to pass a secret variable through
// worker.task-env refuses to start.
func TestAttackTaskReadsItsEnvironment(t *testing.T) {
	t.Parallel()
	e, secrets := secretE2E(t)
	e.Master("master")
	e.Worker("worker")
	wfFile := e.file(t, "env.yaml", `
name: env
params: {leak: {}}
tasks:
  - name: snoop
    type: shell
    command: |
      echo "== env"; env
      echo "== supervisor"; tr '\0' '\n' < /proc/$PPID/environ; echo
      echo "param: $ZKSCHED_PARAM_leak"
`)
	out, code := e.Run("submit", "--wait", "--param", "leak="+attackModelKey, wfFile)
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	log, output := e.storedText(t, 1, "snoop")
	if !strings.Contains(log, "== env\n") || !strings.Contains(log, "== supervisor\n") || strings.Count(log, "ZKSCHED_TASK_NAME=snoop\n") != 2 {
		t.Fatalf("the task did not print its environment and its supervisor's:\n%s", log)
	}
	assertNoSecret(t, secrets, "the task's stored log", log)
	assertNoSecret(t, secrets, "the task's stored output", output)
	if output != "param: ***" || !strings.Contains(log, "ZKSCHED_PARAM_leak=***\n") {
		t.Errorf("the secret handed to the task is not masked: output %q, log:\n%s", output, log)
	}

	bad := e.Worker("worker-with-a-secret-in-task-env", "ZKSCHED_WORKER_TASK_ENV=ATTACK_MODEL_KEY")
	if code := bad.Wait(t, 30*time.Second); code != exitUsage {
		t.Errorf("a worker passing a model key to tasks exited %d, want %d", code, exitUsage)
	}
	if !strings.Contains(bad.Log(), `worker.task-env[0]: "ATTACK_MODEL_KEY" would pass ATTACK_MODEL_KEY, a model provider's API key`) {
		t.Errorf("the refusal does not say why:\n%s", bad.Log())
	}
}

// worldBinary copies the zksched binary where every user may run it: the built one lives in
// a directory only its owner may enter.
func worldBinary(t *testing.T) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "zksched-attack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(testcluster.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin = filepath.Join(dir, "zksched")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// userWorker is a worker process that runs as an unprivileged user.
type userWorker struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startWorkerAs starts a worker as u (nil: the test's own user, which must not be root), with
// the cluster's environment plus env.
func startWorkerAs(t *testing.T, e *e2e, u *user.User, env ...string) *userWorker {
	t.Helper()
	dir, bin := worldBinary(t)
	args := []string{"worker"}
	if u != nil {
		args = append([]string{"--reuid", u.Uid, "--regid", u.Gid, "--init-groups", bin}, args...)
		bin = "setpriv"
	}
	cmd := exec.Command(bin, args...)
	// The worker supervises its tasks with its own copy, which its user can run: the cluster's
	// supervisor build is in the test's private folder.
	cmd.Env = append(append(append(os.Environ(), e.Env...), fmt.Sprintf("ZKSCHED_WORKER_PORT=%d", testcluster.FreePort(t)),
		"ZKSCHED_TEST_SUPERVISOR="), env...)
	cmd.Dir = dir
	w := &userWorker{cmd: cmd, log: filepath.Join(t.TempDir(), "worker.log"), done: make(chan struct{})}
	f, err := os.Create(w.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a worker as %v: %v", u, err)
	}
	f.Close()
	go func() { _ = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			b, _ := os.ReadFile(w.log)
			t.Logf("==== log of the worker run as %v ====\n%s", u, b)
		}
	})
	return w
}

// TestAttackTaskReadsItsWorkersProcess: the worker runs as an unprivileged user and its task
// as the same user, the deployment of deploy/zksched-worker.service. The task finds its
// worker's pid (its supervisor's parent; the param gives it too) and reads the worker's
// /proc/PID/environ, where the DSN, token and key are: the read is refused, since the worker
// is not dumpable. The same worker told to run tasks as another user refuses to start: only
// root can.
func TestAttackTaskReadsItsWorkersProcess(t *testing.T) {
	t.Parallel()
	var u *user.User
	if os.Geteuid() == 0 {
		u = testenv.TaskUser(t)
	}
	e, secrets := secretE2E(t)
	e.Master("master")
	w := startWorkerAs(t, e, u)
	wfFile := e.file(t, "proc.yaml", `
name: proc
params: {worker_pid: {type: integer}}
tasks:
  - name: snoop
    type: shell
    command: |
      worker=$(awk '/^PPid:/ {print $2}' /proc/$PPID/status)
      echo "uid $(id -u), worker $worker, param $ZKSCHED_PARAM_worker_pid"
      echo "== worker environ"; tr '\0' '\n' < /proc/$worker/environ
      echo "== worker memory"; head -c 4096 /proc/$worker/mem | wc -c
      echo "== worker fds"; ls -l /proc/$worker/fd | wc -l
      echo "== worker environ by param"; tr '\0' '\n' < /proc/$ZKSCHED_PARAM_worker_pid/environ
      true
`)
	out, code := e.Run("submit", "--wait", "--param", "worker_pid="+strconv.Itoa(w.cmd.Process.Pid), wfFile)
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	log, output := e.storedText(t, 1, "snoop")
	pid := strconv.Itoa(w.cmd.Process.Pid)
	if !strings.Contains(log, "worker "+pid+", param "+pid) {
		t.Fatalf("the task did not find its worker %s:\n%s", pid, log)
	}
	if uid := strconv.Itoa(os.Geteuid()); u != nil {
		uid = u.Uid
		if !strings.Contains(log, "uid "+uid+",") {
			t.Fatalf("the task did not run as the worker's user %s:\n%s", uid, log)
		}
	}
	assertNoSecret(t, secrets, "the task's stored log", log)
	assertNoSecret(t, secrets, "the task's stored output", output)
	if n := strings.Count(log, "Permission denied"); n < 2 {
		t.Errorf("the task's reads of its worker's environ were not refused:\n%s", log)
	}

	refused := startWorkerAs(t, e, u, "ZKSCHED_WORKER_TASK_USER=nobody")
	select {
	case <-refused.done:
	case <-time.After(30 * time.Second):
		t.Fatal("a worker that is not root but has a task user did not exit")
	}
	b, _ := os.ReadFile(refused.log)
	if code := refused.cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(string(b), "not root, and only root can run tasks as another user") {
		t.Errorf("a worker that is not root but has a task user exited %d, want %d with a clear message:\n%s", code, exitUsage, b)
	}
}

// TestAttackTaskOfARootWorker: the worker runs as root with worker.task-user, and its config
// file, which holds the DSN, is root's alone. The task runs as the task user and can read
// neither the config file nor the worker's or its supervisor's environ. An unknown task user
// stops a worker at start.
func TestAttackTaskOfARootWorker(t *testing.T) {
	t.Parallel()
	u := testenv.TaskUser(t) // skips unless root; CI is root
	e, secrets := secretE2E(t)
	var dsn string
	for _, kv := range e.Env {
		if v, ok := strings.CutPrefix(kv, "ZKSCHED_DB_DSN="); ok {
			dsn = v
		}
	}
	dir, _ := worldBinary(t)
	config := filepath.Join(dir, "zksched.yaml")
	if err := os.WriteFile(config, []byte("db:\n  dsn: \""+dsn+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Master("master")
	w := e.Start("worker", []string{fmt.Sprintf("ZKSCHED_WORKER_PORT=%d", testcluster.FreePort(t)),
		"ZKSCHED_WORKER_TASK_USER=" + u.Username}, "worker", "--config", config)
	w.WaitLog(t, 30*time.Second, "shell tasks run as the task user")
	wfFile := e.file(t, "root.yaml", `
name: root
tasks:
  - name: snoop
    type: shell
    command: |
      worker=$(awk '/^PPid:/ {print $2}' /proc/$PPID/status)
      echo "uid $(id -u) home $HOME user $USER in $(pwd) = $ZKSCHED_WORKDIR of $(stat -c %U .)"
      echo "== config"; cat `+config+`
      echo "== worker environ"; tr '\0' '\n' < /proc/$worker/environ
      echo "== supervisor environ"; tr '\0' '\n' < /proc/$PPID/environ
      true
`)
	out, code := e.Run("submit", "--wait", wfFile)
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	log, output := e.storedText(t, 1, "snoop")
	want := regexp.MustCompile("uid " + u.Uid + " home " + regexp.QuoteMeta(u.HomeDir) + " user " + u.Username +
		" in (/tmp/zksched-task-[0-9-]+) = (/tmp/zksched-task-[0-9-]+) of " + u.Username + "\n")
	if m := want.FindStringSubmatch(log); m == nil || m[1] != m[2] {
		t.Fatalf("the task did not run as the task user (want %q):\n%s", want, log)
	}
	assertNoSecret(t, secrets, "the task's stored log", log)
	assertNoSecret(t, secrets, "the task's stored output", output)
	if n := strings.Count(log, "Permission denied"); n < 3 {
		t.Errorf("the task's reads of the config file and the environs were not all refused:\n%s", log)
	}

	unknown := e.Worker("worker-with-an-unknown-task-user", "ZKSCHED_WORKER_TASK_USER=zksched-no-such-user")
	if code := unknown.Wait(t, 30*time.Second); code != exitUsage ||
		!strings.Contains(unknown.Log(), `zksched worker: conf: worker.task-user: task user "zksched-no-such-user": user: unknown user zksched-no-such-user`) {
		t.Errorf("a worker with an unknown task user exited %d, want %d with a clear message:\n%s", code, exitUsage, unknown.Log())
	}
}
