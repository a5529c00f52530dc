package testenv

import (
	"os"
	"os/exec"
	"os/user"
	"sync"
	"testing"
)

// TaskUserName is the unprivileged system user the tests run shell tasks as
// (worker.task-user). It is created on first use and left in place: tests in several
// packages use it at once.
const TaskUserName = "zksched-tasktest"

var taskUserMu sync.Mutex

// TaskUser returns the test task user, creating it (with a home directory) if the machine
// lacks it. Only root can run tasks as another user: a test that is not root is skipped,
// and one that is root fails if the user cannot be made, since CI runs as root and must
// test the task user, not pass over it.
func TaskUser(t testing.TB) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running tasks as another user needs root; CI runs this test as root")
	}
	taskUserMu.Lock()
	defer taskUserMu.Unlock()
	if u, err := user.Lookup(TaskUserName); err == nil {
		return u
	}
	out, err := exec.Command("useradd", "--system", "--create-home", "--home-dir", "/var/lib/"+TaskUserName,
		"--shell", "/usr/sbin/nologin", TaskUserName).CombinedOutput()
	// Exit status 9: another test process created it meanwhile.
	if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 9) {
		t.Fatalf("testenv: useradd %s: %v\n%s", TaskUserName, err, out)
	}
	u, err := user.Lookup(TaskUserName)
	if err != nil {
		t.Fatalf("testenv: user %s after useradd: %v", TaskUserName, err)
	}
	return u
}
