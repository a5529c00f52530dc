package executor

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// ParentDeathSignal is what the supervisor receives when its worker dies (Pdeathsig). It is
// not SIGTERM, which the worker sends to stop a task gracefully.
const ParentDeathSignal = syscall.SIGUSR1

// SuperviseArg is the first argument that makes the zksched binary (or a test binary that
// calls SuperviseMain from TestMain) act as a task supervisor.
const SuperviseArg = "__zksched_supervise"

// SuperviseMain is the supervisor between a worker and a shell task. The worker starts it
// with a parent-death signal; it runs `bash -c COMMAND` in a process group of its own and
// makes sure that group never outlives the attempt:
//
//   - SIGTERM from a live worker (a stop: timeout, kill, hand-back): SIGTERM to the group,
//     SIGKILL after the grace;
//   - the worker gone (the parent-death signal SIGUSR1, or its parent pid changing — checked every
//     100 ms in case the signal was missed): SIGKILL to the group at once;
//   - bash exited: SIGKILL to whatever it left running in the group;
//   - the worker stopped (SIGSTOP: state T) for --parent-stop-limit: SIGKILL to the group. A
//     worker frozen that long has stopped talking to ZooKeeper for its session timeout, so
//     the leader may fail its tasks over; its own watchdog cannot stop them while it is
//     frozen, so the supervisor does.
//
// A parent-death signal on bash itself would not be enough: it reaches bash only, and a
// grandchild such as a Python script it started would go on with its side effects after the
// worker died. The supervisor exits with bash's status (128+signal when bash was killed).
func SuperviseMain(args []string) int {
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	grace := fs.Duration("grace", 2*time.Second, "time between SIGTERM and SIGKILL of the task's process group")
	stopLimit := fs.Duration("parent-stop-limit", 0, "kill the task once the worker has been stopped (SIGSTOP) this long; 0: never")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "zksched supervise: usage: supervise [--grace D] COMMAND")
		return 2
	}
	parent := os.Getppid()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// The parent-death signal has a signal of its own: it is sent when the worker's thread
	// that started us exits, which can be while the dying worker's other threads still hold
	// its pid, so the parent pid does not tell a death from a stop at that moment.
	death := make(chan os.Signal, 1)
	signal.Notify(death, ParentDeathSignal)
	// Our stderr is the worker's pipe: once the worker is dead a write to it must fail, not
	// end this process (Go exits on SIGPIPE from fd 1 or 2) before it has killed the task.
	signal.Ignore(syscall.SIGPIPE)

	cmd := exec.Command("bash", "-c", fs.Arg(0))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "zksched: start task: %v\n", err)
		return 127
	}
	pgid := cmd.Process.Pid
	killGroup := func(sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }
	if os.Getppid() != parent { // the worker died while we started
		killGroup(syscall.SIGKILL)
	}

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var hardKill <-chan time.Time
	var stoppedSince time.Time
	frozenKill := false
	for {
		select {
		case err := <-done:
			killGroup(syscall.SIGKILL) // whatever bash left behind in the background
			return exitStatus(err)
		case <-death:
			killGroup(syscall.SIGKILL)
		case <-sigs:
			if os.Getppid() != parent {
				killGroup(syscall.SIGKILL)
				continue
			}
			if hardKill == nil {
				killGroup(syscall.SIGTERM) // act first, then tell: the message is best effort
				hardKill = time.After(*grace)
				fmt.Fprintf(os.Stderr, "zksched: stopping the task: SIGTERM to its process group, SIGKILL in %s\n", *grace)
			}
		case <-hardKill:
			killGroup(syscall.SIGKILL)
			fmt.Fprintln(os.Stderr, "zksched: kill grace over: SIGKILL to the task's process group")
		case <-tick.C:
			if os.Getppid() != parent {
				killGroup(syscall.SIGKILL)
				continue
			}
			if *stopLimit > 0 && processStopped(parent) {
				if stoppedSince.IsZero() {
					stoppedSince = time.Now()
				}
				if time.Since(stoppedSince) >= *stopLimit && !frozenKill {
					frozenKill = true
					killGroup(syscall.SIGKILL)
					fmt.Fprintf(os.Stderr, "zksched: the worker has been stopped for %s: SIGKILL to the task's process group\n", *stopLimit)
				}
			} else {
				stoppedSince = time.Time{}
			}
		}
	}
}

// processStopped reports whether pid is stopped by a signal (state T in /proc/pid/stat).
func processStopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may contain spaces.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}

func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 127
}
