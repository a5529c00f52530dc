package executor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A shell task gets only what it needs of its worker: the variables of an allow-list
// ([TaskEnv]), never the worker's secrets, and, where the worker runs as root, a user of its
// own ([TaskUser]). What it could still read as the worker's user, the worker's
// /proc/PID/environ and memory, [ProtectFromTasks] closes.

// DefaultTaskEnv are the variables of the worker's environment that every shell task
// inherits: what a shell and the usual tools need to find programs, a home, a locale, a time
// zone and a place for temporary files. worker.task-env adds to them. An entry ending in *
// is a prefix: LC_* is every locale category.
var DefaultTaskEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_*", "TZ", "TMPDIR"}

// MatchEnvPattern reports whether the environment variable name is what pattern, an entry
// of [DefaultTaskEnv] or worker.task-env, lets through: the name itself, or, for a pattern
// ending in *, every name that starts with what comes before the *.
func MatchEnvPattern(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return name == pattern
}

// TaskEnv returns the variables of environ ("K=V", os.Environ's form) that a shell task
// inherits: those an entry of allow lets through (names or prefixes followed by *, as in
// [DefaultTaskEnv]) and no entry of deny matches (conf.Config.SecretEnvNames). deny
// wins over allow, and a ZKSCHED_ variable is never inherited, whatever deny says: the task's
// own ZKSCHED_* variables come from [Task.Env].
func TaskEnv(environ, allow, deny []string) []string {
	matches := func(patterns []string, name string) bool {
		for _, p := range patterns {
			if MatchEnvPattern(p, name) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || strings.HasPrefix(name, "ZKSCHED_") || matches(deny, name) || !matches(allow, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// defaultTaskEnv is the environment of a task run by a [Shell] without a BaseEnv: the worker's
// own variables that [DefaultTaskEnv] lets through.
func defaultTaskEnv() []string {
	return TaskEnv(os.Environ(), DefaultTaskEnv, nil)
}

// TaskUser is the user shell tasks run as ([Shell.User]): the supervisor stays the worker's
// user (root), which it needs to hold and kill the task, and starts bash as this one.
type TaskUser struct {
	Name string
	UID  uint32
	GID  uint32
	// Groups are the user's supplementary groups, from the user database.
	Groups []uint32
	// Home is the user's home directory: the task's HOME.
	Home string
}

// LookupTaskUser resolves worker.task-user, a user name or a numeric uid, through the user
// database. Only root can start processes as another user, so a worker that is not root gets
// an error, as does an unknown user.
func LookupTaskUser(name string) (*TaskUser, error) {
	if euid := os.Geteuid(); euid != 0 {
		return nil, fmt.Errorf("task user %q: the worker runs as uid %d, not root, and only root can run tasks as another user: "+
			"run the worker as root or leave worker.task-user empty (tasks then run as the worker's user)", name, euid)
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if _, nerr := strconv.Atoi(name); nerr == nil && errors.As(err, &unknown) {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("task user %q: %w (create it, e.g. useradd --system --create-home %s)", name, err, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("task user %q: uid %s, gid %s: %w", name, u.Uid, u.Gid, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("task user %q is root: name an unprivileged user, or leave worker.task-user empty", name)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("task user %q: its groups: %w", name, err)
	}
	tu := &TaskUser{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("task user %q: group id %s: %w", name, id, err)
		}
		tu.Groups = append(tu.Groups, uint32(g))
	}
	return tu, nil
}

// CheckDirs checks that the user may create files in each of dirs: its home, where its tasks
// run by default, and the temporary directory they inherit. It asks the kernel by running
// `test -w` as the user, so permissions, ACLs and read-only mounts all count.
func (u *TaskUser) CheckDirs(dirs ...string) error {
	for _, dir := range dirs {
		cmd := exec.Command("bash", "-c", `test -d "$1" && test -w "$1" && test -x "$1"`, "check", dir)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.credential()}
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("task user %s (uid %d) cannot write in %s (%v): its tasks need it; create it or give the user access",
				u.Name, u.UID, dir, err)
		}
	}
	return nil
}

func (u *TaskUser) credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}

// env returns environ with HOME, USER and LOGNAME set to the user's.
func (u *TaskUser) env(environ []string) []string {
	out := make([]string, 0, len(environ)+3)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name != "HOME" && name != "USER" && name != "LOGNAME" {
			out = append(out, kv)
		}
	}
	return append(out, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
}

// args returns the supervisor's flags that make it start bash as the user.
func (u *TaskUser) args() []string {
	groups := make([]string, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = strconv.FormatUint(uint64(g), 10)
	}
	return []string{"--uid", strconv.FormatUint(uint64(u.UID), 10), "--gid", strconv.FormatUint(uint64(u.GID), 10),
		"--groups", strings.Join(groups, ",")}
}

// ProtectFromTasks makes this process non-dumpable (prctl PR_SET_DUMPABLE 0): its
// /proc/PID/environ, mem, maps and fd become root's, and only a process with CAP_SYS_PTRACE
// may read them or attach to it. A worker calls it at start, so that a task running as the
// worker's own user cannot read the DSN, the API token or a model key out of the worker's
// environment or memory. It also turns off the worker's core dumps, which would hold them.
// A process started from this one is dumpable again: a task supervisor, whose environment is
// the task's.
func ProtectFromTasks() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
	}
	return nil
}
