package executor

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ParentDeathSignal is what the supervisor receives when its worker dies (Pdeathsig). It is
// not SIGTERM, which the worker sends to stop a task gracefully.
const ParentDeathSignal = syscall.SIGUSR1

// SuperviseArg is the first argument that makes the zksched binary (or a test binary that
// calls SuperviseMain from TestMain) act as a task supervisor.
const SuperviseArg = "__zksched_supervise"

// endLimit bounds how long the supervisor waits, after SIGKILL, for the task's processes to
// be gone: one in uninterruptible sleep dies only when its I/O ends, and the attempt must not
// hang on it.
const endLimit = 10 * time.Second

// SuperviseMain is the supervisor between a worker and a shell task. The worker starts it
// with a parent-death signal; it runs `bash -c COMMAND` in a process group of its own and
// makes sure nothing the task started outlives the attempt.
//
// A process group does not hold a task: `setsid`, a daemonizer's double fork or a `set -m`
// job leaves it. So with --cgroup DIR the supervisor creates DIR, a cgroup v2 leaf, and
// starts bash inside it (clone3 into the cgroup, so nothing forks before the move); every
// descendant stays in it and one write to cgroup.kill ends them all. Without a cgroup (none
// given, or it cannot be made) it contains the task as a child subreaper: orphans below it
// become its children rather than init's, so every descendant is found by a walk of /proc
// from the supervisor down. It is a subreaper with a cgroup too, to reap the orphans it kills.
//
// "The task" below means all of it, whichever way it is held:
//
//   - SIGTERM from a live worker (a stop: timeout, kill, hand-back): SIGTERM to the task,
//     SIGKILL after the grace;
//   - the worker gone (the parent-death signal SIGUSR1, or its parent pid changing — checked every
//     100 ms in case the signal was missed): SIGKILL to the task at once;
//   - bash exited: SIGKILL to whatever it left running (during a stop, once the grace is
//     over or nothing is left);
//   - the worker stopped (SIGSTOP: state T) for --parent-stop-limit: SIGKILL to the task. A
//     worker frozen that long has stopped talking to ZooKeeper for its session timeout, so
//     the leader may fail its tasks over; its own watchdog cannot stop them while it is
//     frozen, so the supervisor does.
//
// Whatever the reason, the supervisor exits only once bash has been reaped and the task is
// empty (killed again until nothing is left, the orphans reaped, the cgroup removed), so when
// the worker sees it exit no task process holds the output pipes or runs on. It exits with
// bash's status (128+signal when bash was killed), not with how the leftovers ended. Should
// a process outlast SIGKILL (uninterruptible sleep) for endLimit, it says so and exits.
//
// With --uid (worker.task-user, under a root worker) bash runs as that user with --gid and
// --groups, while the supervisor stays root: it must create the cgroup, write cgroup.kill and
// signal whatever the task becomes. The supervisor's environment is the task's (the worker
// gives it nothing else), since a task running as the worker's user can read it.
//
// A parent-death signal on bash itself would not be enough: it reaches bash only, and a
// grandchild such as a Python script it started would go on with its side effects after the
// worker died.
func SuperviseMain(args []string) int {
	opts, err := parseSupervise(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "zksched supervise: %v\n", err)
		return 2
	}
	// The worker names itself: read here, the parent pid would be init's (or a subreaper's) if
	// the worker died in the moments before, and the parent-death signal, sent before this
	// process could catch it, is lost (Go ignores SIGUSR1 until signal.Notify).
	sv := &supervision{superviseOpts: opts, sigs: make(chan os.Signal, 4), death: make(chan os.Signal, 1)}
	if sv.parent <= 0 {
		sv.parent = os.Getppid()
	}
	signal.Notify(sv.sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// The parent-death signal has a signal of its own: it is sent when the worker's thread
	// that started us exits, which can be while the dying worker's other threads still hold
	// its pid, so the parent pid does not tell a death from a stop at that moment.
	signal.Notify(sv.death, ParentDeathSignal)
	// Our stderr is the worker's pipe: once the worker is dead a write to it must fail, not
	// end this process (Go exits on SIGPIPE from fd 1 or 2) before it has killed the task.
	signal.Ignore(syscall.SIGPIPE)
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "zksched: become a child subreaper: %v\n", err)
	}
	if opts.scratch != "" {
		// The task's scratch directory goes with it, also when the worker died and cannot
		// remove it.
		defer os.RemoveAll(opts.scratch)
	}
	if os.Getppid() != sv.parent {
		fmt.Fprintln(os.Stderr, "zksched: the worker is gone; the task is not started")
		return 1
	}
	tree, err := startTask(opts.command, opts.cgroupDir, opts.cred, opts.stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "zksched: start task: %v\n", err)
		return 127
	}
	if os.Getppid() != sv.parent { // the worker died while we started
		tree.signal(syscall.SIGKILL)
	}
	sv.tree = tree
	return sv.watch()
}

// superviseOpts are the supervisor's arguments.
type superviseOpts struct {
	command   string
	grace     time.Duration
	stopLimit time.Duration
	cgroupDir string
	scratch   string
	parent    int
	cred      *syscall.Credential
	// stdin passes the supervisor's standard input on to the task (an MCP server's stdio).
	stdin bool
}

// parseSupervise reads the supervisor's arguments (see SuperviseMain).
func parseSupervise(args []string) (superviseOpts, error) {
	var o superviseOpts
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	fs.DurationVar(&o.grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL of the task")
	fs.DurationVar(&o.stopLimit, "parent-stop-limit", 0, "kill the task once the worker has been stopped (SIGSTOP) this long; 0: never")
	fs.StringVar(&o.cgroupDir, "cgroup", "", "cgroup v2 leaf to create and run the task in; empty: contain it as a subreaper")
	fs.StringVar(&o.scratch, "scratch", "", "the task's scratch directory, removed once the task has ended")
	fs.IntVar(&o.parent, "parent-pid", 0, "the worker's pid; 0: this process's parent at start")
	uid := fs.Int("uid", -1, "run the task as this uid; -1: as the supervisor's")
	gid := fs.Int("gid", -1, "the task's group id, with --uid")
	groups := fs.String("groups", "", "the task's supplementary group ids, comma-separated, with --uid")
	fs.BoolVar(&o.stdin, "stdin", false, "give the task this process's standard input; without it the task's is /dev/null")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return o, errors.New("usage: supervise [--grace D] [--parent-stop-limit D] [--cgroup DIR] [--scratch DIR] [--parent-pid PID] " +
			"[--uid UID --gid GID --groups G,…] [--stdin] COMMAND")
	}
	o.command = fs.Arg(0)
	var err error
	o.cred, err = taskCredential(*uid, *gid, *groups, o.stdin)
	return o, err
}

// supervision is a started task under its supervisor, and what the supervisor listens to.
type supervision struct {
	superviseOpts
	tree  *taskTree
	sigs  chan os.Signal // a stop from the worker
	death chan os.Signal // the worker's death
}

// watch holds the task until it has ended and is empty, acting on the worker's stop, its
// death and its being frozen (see SuperviseMain), and returns bash's exit status.
func (sv *supervision) watch() int {
	tree := sv.tree
	done := make(chan int, 1)
	go func() { done <- reapUntil(tree.pgid) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	status := -1 // bash's exit status, once it has ended
	finish := func() int {
		if err := tree.end(endLimit); err != nil {
			fmt.Fprintf(os.Stderr, "zksched: %v\n", err)
		}
		return status
	}
	var hardKill <-chan time.Time
	var stoppedSince time.Time
	frozenKill := false
	for {
		select {
		case status = <-done:
			// During a stop the task's other processes have the rest of the grace to end on
			// their SIGTERM; otherwise whatever bash left behind is killed now. With bash
			// reaped, the orphans' zombies are reaped here, or they would count as left.
			reapChildren()
			if hardKill == nil || tree.empty() {
				return finish()
			}
			done = nil
		case <-sv.death:
			tree.signal(syscall.SIGKILL)
			if status >= 0 {
				return finish()
			}
		case <-sv.sigs:
			if os.Getppid() != sv.parent {
				tree.signal(syscall.SIGKILL)
				continue
			}
			if hardKill == nil {
				tree.signal(syscall.SIGTERM) // act first, then tell: the message is best effort
				hardKill = time.After(sv.grace)
				fmt.Fprintf(os.Stderr, "zksched: stopping the task: SIGTERM to its processes, SIGKILL in %s\n", sv.grace)
			}
		case <-hardKill:
			tree.signal(syscall.SIGKILL)
			fmt.Fprintln(os.Stderr, "zksched: kill grace over: SIGKILL to the task's processes")
			if status >= 0 {
				return finish()
			}
		case <-tick.C:
			if status >= 0 {
				if reapChildren(); tree.empty() {
					return finish()
				}
			}
			if os.Getppid() != sv.parent {
				tree.signal(syscall.SIGKILL)
				continue
			}
			if sv.stopLimit > 0 && processStopped(sv.parent) {
				if stoppedSince.IsZero() {
					stoppedSince = time.Now()
				}
				if time.Since(stoppedSince) >= sv.stopLimit && !frozenKill {
					frozenKill = true
					tree.signal(syscall.SIGKILL)
					fmt.Fprintf(os.Stderr, "zksched: the worker has been stopped for %s: SIGKILL to the task's processes\n", sv.stopLimit)
				}
			} else {
				stoppedSince = time.Time{}
			}
		}
	}
}

// reapUntil reaps the supervisor's children as they end, the orphans that came to it as well
// as bash, until bash has ended, and returns bash's exit status (128+signal when a signal
// ended it). The supervisor reaps with wait4(-1) rather than exec.Cmd.Wait so that orphans
// do not pile up as zombies while a long task runs.
func reapUntil(bash int) int {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil: // cannot be while bash is a child
			fmt.Fprintf(os.Stderr, "zksched: wait for the task: %v\n", err)
			return 127
		case pid == bash && ws.Signaled():
			return 128 + int(ws.Signal())
		case pid == bash:
			return ws.ExitStatus()
		}
	}
}

// taskCredential returns the credential bash runs with: nil (the supervisor's own) for uid
// -1. For another user it also hands the output pipes (and with stdin the input pipe) to that user: a pipe belongs to the
// user who made it, with mode 0600, and a task that reopens its output (`echo x >
// /dev/stderr` opens /proc/self/fd/2) would otherwise be refused.
func taskCredential(uid, gid int, groups string, stdin bool) (*syscall.Credential, error) {
	if uid < 0 {
		return nil, nil
	}
	if gid < 0 {
		return nil, fmt.Errorf("--uid %d without --gid", uid)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	for g := range strings.SplitSeq(groups, ",") {
		if g == "" {
			continue
		}
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--groups %q: %w", groups, err)
		}
		cred.Groups = append(cred.Groups, uint32(n))
	}
	fds := []int{1, 2}
	if stdin {
		fds = append(fds, 0)
	}
	for _, fd := range fds {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO {
			if err := syscall.Fchown(fd, uid, gid); err != nil {
				return nil, fmt.Errorf("hand the task's output pipe to uid %d: %w", uid, err)
			}
		}
	}
	return cred, nil
}

// startTask starts `bash -c command` in a process group of its own, in a new cgroup at
// cgroupDir when one is given and can be made, as cred's user when cred is set, and returns
// what holds it; bash's pid is the tree's pgid. Bash is reaped by reapUntil, never by
// exec.Cmd.Wait.
func startTask(command, cgroupDir string, cred *syscall.Credential, stdin bool) (*taskTree, error) {
	bash := func() *exec.Cmd {
		cmd := exec.Command("bash", "-c", command)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
		if stdin {
			cmd.Stdin = os.Stdin
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
		return cmd
	}
	if cgroupDir != "" {
		cg, err := newCgroup(cgroupDir)
		if err == nil {
			cmd := bash()
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.fd.Fd())
			if err = cmd.Start(); err == nil {
				return &taskTree{self: os.Getpid(), pgid: cmd.Process.Pid, cg: cg}, nil
			}
			_ = cg.remove()
		}
		fmt.Fprintf(os.Stderr, "zksched: no cgroup for the task (%v): containing it as a subreaper\n", err)
	}
	cmd := bash()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &taskTree{self: os.Getpid(), pgid: cmd.Process.Pid}, nil
}

// processStopped reports whether pid is stopped by a signal (state T).
func processStopped(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.state == 'T'
}
