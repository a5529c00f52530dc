package executor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// A process group does not hold a shell task: `setsid`, a daemonizer's double fork or a
// `set -m` job leaves it. What does hold every descendant is, where the worker may create one,
// a cgroup v2 leaf per attempt (taskTree with a cgroup), and otherwise the supervisor as a
// child subreaper that walks /proc for what is below it (taskTree without one).

// ErrNoTaskCgroup is wrapped by [TaskCgroupParent] when the worker has no cgroup v2 subtree
// it may create task cgroups in; shell tasks are then contained by their supervisor as a
// child subreaper.
var ErrNoTaskCgroup = errors.New("no cgroup v2 subtree to create task cgroups in")

// Values of the worker.task-cgroup setting besides a path, as [TaskCgroupParent] takes them
// (conf.TaskCgroupAuto and conf.TaskCgroupOff are the same).
const (
	// TaskCgroupAuto gives each shell task attempt a cgroup under the worker's own, where
	// the worker may create one.
	TaskCgroupAuto = "auto"
	// TaskCgroupOff uses no cgroups.
	TaskCgroupOff = "off"
)

// TaskCgroupParent resolves the worker.task-cgroup setting to the cgroup v2 directory under
// which each shell task attempt gets a leaf of its own ([Shell.Cgroup]):
// [TaskCgroupOff] gives "" (no cgroups), [TaskCgroupAuto] the worker's own cgroup
// when it may create leaves there (an error wrapping ErrNoTaskCgroup says why not), and a
// path that directory, which must be usable.
func TaskCgroupParent(setting string) (string, error) {
	switch setting {
	case TaskCgroupOff:
		return "", nil
	case TaskCgroupAuto:
		dir, err := ownCgroup()
		if err == nil {
			err = probeCgroup(dir)
		}
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoTaskCgroup, err)
		}
		return dir, nil
	}
	if err := probeCgroup(setting); err != nil {
		return "", fmt.Errorf("task cgroup %s: %w", setting, err)
	}
	return setting, nil
}

// ownCgroup returns the directory of this process's cgroup v2.
func ownCgroup() (string, error) {
	cgroups, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	return cgroupDir(string(cgroups), string(mounts))
}

// cgroupDir finds the directory of a process's cgroup v2 from its /proc/PID/cgroup and
// /proc/PID/mountinfo: the "0::" line's path under the cgroup2 mount that shows it (at
// /sys/fs/cgroup on a unified host, at /sys/fs/cgroup/unified on a hybrid one; a mount's root
// is not "/" when it was made in another cgroup namespace).
func cgroupDir(cgroups, mountinfo string) (string, error) {
	path, found := "", false
	for line := range strings.Lines(cgroups) {
		if p, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "0::"); ok {
			path, found = p, true
		}
	}
	if !found {
		return "", errors.New("this process is in no cgroup v2 hierarchy")
	}
	for line := range strings.Lines(mountinfo) {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		root, mountpoint := unescapeMountinfo(f[3]), unescapeMountinfo(f[4])
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(root, "/"))
		if ok && (rel == "" || rel[0] == '/') {
			return filepath.Join(mountpoint, rel), nil
		}
	}
	return "", fmt.Errorf("no cgroup2 mount shows this process's cgroup %s", path)
}

// unescapeMountinfo undoes mountinfo's octal escapes of spaces, tabs, newlines and
// backslashes.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupSeq makes the name of each cgroup the worker creates unique within it.
var cgroupSeq atomic.Int64

// cgroup2Magic is CGROUP2_SUPER_MAGIC, the f_type statfs reports for a cgroup2 file system.
const cgroup2Magic = 0x63677270

// probeCgroup checks that dir is a cgroup v2 directory in which this process may create a
// leaf, start a process in it and kill it with cgroup.kill (Linux 5.14): it does all three.
func probeCgroup(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	if st.Type != cgroup2Magic {
		return fmt.Errorf("%s is not on a cgroup2 file system", dir)
	}
	cg, err := newCgroup(filepath.Join(dir, fmt.Sprintf("zksched-probe-%d-%d", os.Getpid(), cgroupSeq.Add(1))))
	if err != nil {
		return err
	}
	defer cg.remove()
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.fd.Fd())}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("start a process in a task cgroup: %w", err)
	}
	return killCgroup(cg.dir)
}

// cgroup is an attempt's own cgroup v2 leaf. A process started in it, and everything that
// process starts, stays in it unless it has the rights to move itself into another cgroup,
// so one write to cgroup.kill ends them all, whatever sessions and groups they made.
type cgroup struct {
	dir string
	fd  *os.File // the directory, for clone3's CLONE_INTO_CGROUP: no fork escapes before the move
}

// newCgroup creates the leaf dir.
func newCgroup(dir string) (*cgroup, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	fd, err := os.Open(dir)
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "cgroup.kill"))
	}
	if err != nil {
		if fd != nil {
			fd.Close()
		}
		_ = os.Remove(dir)
		return nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	return &cgroup{dir: dir, fd: fd}, nil
}

// remove closes the leaf and removes it; it must be empty by then.
func (c *cgroup) remove() error {
	c.fd.Close()
	return os.Remove(c.dir)
}

// killCgroup SIGKILLs every process in the cgroup dir and its descendants at once.
func killCgroup(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
}

// signalCgroup sends sig to every process in the cgroup dir. Processes forked meanwhile are
// missed: it is for the polite SIGTERM of a stop, which the SIGKILL of cgroup.kill follows.
func signalCgroup(dir string, sig syscall.Signal) {
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for f := range strings.FieldsSeq(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// cgroupPopulated reports whether any process is left in the cgroup dir or below it. A
// cgroup that is gone is not populated.
func cgroupPopulated(dir string) (bool, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "populated "); ok {
			return v != "0", nil
		}
	}
	return false, fmt.Errorf("%s/cgroup.events has no populated line", dir)
}

// endCgroup kills whatever is left in the cgroup dir, waits up to limit for it to empty and
// removes it. It is the worker's cleanup after a supervisor that could not do its own (it
// was killed); a cgroup that is already gone is fine.
func endCgroup(dir string, limit time.Duration) (killed bool, err error) {
	deadline := time.Now().Add(limit)
	for {
		populated, err := cgroupPopulated(dir)
		if err != nil {
			return killed, err
		}
		if !populated {
			break
		}
		if err := killCgroup(dir); err != nil {
			return killed, err
		}
		killed = true
		if time.Now().After(deadline) {
			return killed, fmt.Errorf("cgroup %s still has processes %v after cgroup.kill", dir, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return killed, err
	}
	return killed, nil
}

// proc is one process as /proc/PID/stat shows it.
type proc struct {
	pid, ppid int
	state     byte // R, S, D, T (stopped), Z (zombie: ended, not yet reaped), …
}

// descendants returns every process below root, zombies included, read from /proc.
func descendants(root int) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := make(map[int][]proc)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var below []proc
	next := []int{root}
	for len(next) > 0 {
		pid := next[len(next)-1]
		next = next[:len(next)-1]
		for _, c := range children[pid] {
			below = append(below, c)
			next = append(next, c.pid)
		}
	}
	return below
}

// readProc reads pid's parent and state; ok is false when it is gone.
func readProc(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	// The state and the parent follow the command name, which is in parentheses and may
	// contain anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return proc{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, state: f[0][0]}, true
}

// Linux system calls the syscall package does not name; their numbers are the same on
// every architecture.
const (
	sysPidfdSendSignal  = 424
	sysPidfdOpen        = 434
	prSetChildSubreaper = 36
)

// becomeSubreaper makes orphans of this process's descendants its children instead of
// init's, so none can get away from the descendants walk by having its parent exit.
func becomeSubreaper() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return e
	}
	return nil
}

// signalBelow sends sig to pid if it is still below one of the processes in parents: the
// pid was read from /proc a moment ago and may have been reused since, and a pidfd pins the
// process while its parent is checked.
func signalBelow(pid int, sig syscall.Signal, parents map[int]bool) {
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if e == syscall.ENOSYS { // before Linux 5.3
		if p, ok := readProc(pid); ok && parents[p.ppid] {
			_ = syscall.Kill(pid, sig)
		}
		return
	}
	if e != 0 {
		return
	}
	defer syscall.Close(int(fd))
	if p, ok := readProc(pid); ok && parents[p.ppid] {
		_, _, _ = syscall.Syscall6(sysPidfdSendSignal, fd, uintptr(sig), 0, 0, 0, 0)
	}
}

// reapChildren reaps every child that has ended. Only call it once bash itself has been
// reaped (reapUntil), or it could take bash's status.
func reapChildren() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// taskTree is everything one attempt started: bash's process group and, with a cgroup, the
// cgroup's processes, or, without one, every process below the supervisor.
type taskTree struct {
	self int
	pgid int
	cg   *cgroup
}

// signal sends sig to the whole tree. A SIGKILL with a cgroup is one write to cgroup.kill.
func (t *taskTree) signal(sig syscall.Signal) {
	_ = syscall.Kill(-t.pgid, sig)
	if t.cg != nil {
		if sig == syscall.SIGKILL && killCgroup(t.cg.dir) == nil {
			return
		}
		signalCgroup(t.cg.dir, sig)
		return
	}
	below := descendants(t.self)
	parents := map[int]bool{t.self: true}
	for _, p := range below {
		parents[p.pid] = true
	}
	for _, p := range below {
		if p.state != 'Z' {
			signalBelow(p.pid, sig, parents)
		}
	}
}

// empty reports whether nothing of the tree is left: with a cgroup, that it is not
// populated; without one, that no process, not even a zombie, is below the supervisor.
func (t *taskTree) empty() bool {
	if t.cg != nil {
		populated, err := cgroupPopulated(t.cg.dir)
		return err == nil && !populated
	}
	return len(descendants(t.self)) == 0
}

// end kills the tree until it is empty, reaping the orphans that came to the supervisor,
// and removes the cgroup. It is called once bash has been reaped. A process that
// SIGKILL cannot end at once (in uninterruptible sleep) dies when its I/O ends; after limit
// end gives up waiting for it rather than hang the attempt, and says so.
func (t *taskTree) end(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		t.signal(syscall.SIGKILL)
		reapChildren()
		if t.empty() {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of the task still alive %v after SIGKILL", limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	reapChildren()
	if t.cg != nil {
		if err := t.cg.remove(); err != nil {
			return fmt.Errorf("remove the task's cgroup: %w", err)
		}
	}
	return nil
}
