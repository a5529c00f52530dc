package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

// runAs runs `zksched args…` as u (nil: the test's own user) with the cluster's environment
// plus env, and returns its combined output and exit code.
func runAs(t *testing.T, e *e2e, bin string, u *user.User, env []string, args ...string) (string, int) {
	t.Helper()
	return runCommandAs(t, u, append(append(os.Environ(), e.Env...), env...), bin, args...)
}

// runCommandAs runs name with args as u (nil: the test's own user) in env.
func runCommandAs(t *testing.T, u *user.User, env []string, name string, args ...string) (string, int) {
	t.Helper()
	if u != nil {
		args = append([]string{"--reuid", u.Uid, "--regid", u.Gid, "--init-groups", name}, args...)
		name = "setpriv"
	}
	cmd := exec.Command(name, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s %v: %v", name, args, err)
	}
	return out.String(), 0
}

// TestAttackLocalUserIsNoAdmin: a master started with neither a token nor a users file, on
// loopback, by a user whose home the others may enter. A request without a credential is
// refused (it used to be served as an anonymous admin, so any local account stored and ran
// workflows); the master generated its token into ~/.local/state/zksched/api-token, mode
// 0600 in a folder of mode 0700, and said where; the CLI of the same user reaches the master
// with --server and no other flag; another local user cannot read the token and is refused
// when it stores a workflow, with the CLI or with curl.
func TestAttackLocalUserIsNoAdmin(t *testing.T) {
	t.Parallel()
	other := testenv.TaskUser(t) // skips unless root; CI is root
	e := setupE2E(t, nil, "")
	dir, bin := worldBinary(t)
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// The state folder as on a machine: the default under HOME, not the cluster's.
	asOwner := []string{"HOME=" + home, "XDG_STATE_HOME=", "ZKSCHED_NODE_STATE_DIR="}
	m := e.Master("master", asOwner...)
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)

	c := client(t, "127.0.0.1", nil)
	wf := "name: local-attack\ntasks: [{name: a, type: shell, command: 'cat /etc/shadow'}]\n"
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/workflow-instances", ""},
		{"GET", "/api/v1/cluster", ""},
		{"POST", "/api/v1/definitions", wf},
	} {
		if got := call(t, c, r.method, base+r.path, r.body, "Content-Type", "application/yaml"); got.status != 401 {
			t.Errorf("%s %s without a credential: %d, want 401\n%.300s", r.method, r.path, got.status, got.body)
		}
	}

	state := filepath.Join(home, ".local", "state", "zksched")
	tokenPath := filepath.Join(state, "api-token")
	line := m.WaitLog(t, 5*time.Second, `"token_file":"`+tokenPath+`"`)
	if !strings.Contains(line, "generated the admin token") {
		t.Errorf("the master's line on its token does not say it generated it: %s", line)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{state, os.ModeDir | 0o700}, {tokenPath, 0o600}} {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != f.mode || st.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
			t.Errorf("%s: mode %v, owner %d; want %v, the master's user %d", f.path, st.Mode(), st.Sys().(*syscall.Stat_t).Uid, f.mode, os.Geteuid())
		}
	}

	// The master's user: the CLI finds the token where the master put it.
	wfFile := filepath.Join(dir, "local-attack.yaml")
	if err := os.WriteFile(wfFile, []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runAs(t, e, bin, nil, asOwner, "submit", wfFile); code != 0 {
		t.Fatalf("submit on the database: exit %d\n%s", code, out)
	}
	if out, code := runAs(t, e, bin, nil, asOwner, "status", "1", "--server", base); code != 0 || !strings.Contains(out, "local-attack") {
		t.Errorf("status --server as the master's user: exit %d, want 0 with the workflow\n%s", code, out)
	}

	// Another local user, with the same HOME to look in: no token, and the master refuses it.
	if out, code := runCommandAs(t, other, os.Environ(), "cat", tokenPath); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Errorf("%s read the token file (exit %d):\n%s", other.Username, code, out)
	}
	if out, code := runAs(t, e, bin, other, asOwner, "status", "1", "--server", base); code == 0 || !strings.Contains(out, "401") {
		t.Errorf("status --server as %s: exit %d, want a 401 refusal\n%s", other.Username, code, out)
	}
	curl := fmt.Sprintf(`curl -sS -o /dev/null -w '%%{http_code}' -X POST -H "Authorization: Bearer $(cat %s 2>/dev/null)" `+
		`-H 'Content-Type: application/yaml' --data-binary @%s %s/api/v1/definitions`, tokenPath, wfFile, base)
	if out, _ := runCommandAs(t, other, os.Environ(), "bash", "-c", curl); out != "401" {
		t.Errorf("%s storing a workflow with curl: %q, want 401", other.Username, out)
	}
}

// TestAttackRootWorkerNeedsATaskUser: a worker running as root without worker.task-user
// refuses to start, naming the keys (it used to run every shell task as root, so anyone who
// could submit read /etc/shadow); with a task user, a task that reads /etc/shadow fails.
func TestAttackRootWorkerNeedsATaskUser(t *testing.T) {
	t.Parallel()
	u := testenv.TaskUser(t) // skips unless root; CI is root
	e := setupE2E(t, nil, "")
	e.Master("master")
	root := e.Worker("root-worker", "ZKSCHED_WORKER_ALLOW_ROOT_TASKS=false")
	if code := root.Wait(t, 30*time.Second); code != exitUsage ||
		!strings.Contains(root.Log(), "zksched worker: conf: worker.task-user: empty while the worker runs as root") ||
		!strings.Contains(root.Log(), "worker.allow-root-tasks: true") {
		t.Fatalf("a root worker without a task user exited %d, want %d naming worker.task-user and worker.allow-root-tasks:\n%s",
			code, exitUsage, root.Log())
	}

	w := e.Worker("task-user-worker", "ZKSCHED_WORKER_ALLOW_ROOT_TASKS=false", "ZKSCHED_WORKER_TASK_USER="+u.Username)
	w.WaitLog(t, 30*time.Second, "shell tasks run as the task user")
	wfFile := e.file(t, "shadow.yaml", "name: shadow\ntasks: [{name: read, type: shell, command: 'cat /etc/shadow'}]\n")
	if out, code := e.Run("submit", "--wait", wfFile); code == 0 {
		t.Fatalf("submit --wait of a task reading /etc/shadow succeeded:\n%s", out)
	}
	ti := e.tasks(t, 1)["read"]
	log, _ := e.storedText(t, 1, "read")
	if ti.State != dao.TaskFailed || !strings.Contains(log, "Permission denied") || strings.Contains(log, "root:") {
		t.Errorf("the task reading /etc/shadow: %s, log:\n%s\nwant failed with Permission denied", ti.State, log)
	}
}
