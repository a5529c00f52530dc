package executor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Shell runs `bash -c command` under a supervisor (see SuperviseMain).
type Shell struct {
	// Self is the program to run as the supervisor, with SuperviseArg as its first argument:
	// the zksched binary itself (os.Executable).
	Self string
	// KillGrace is the time between SIGTERM and SIGKILL of the task's process group when the
	// attempt is stopped.
	KillGrace time.Duration
	// BaseEnv is the environment every task starts from; nil means the worker's own.
	BaseEnv []string
	// ParentStopLimit is how long the worker may be stopped (SIGSTOP) before the supervisor
	// kills the task itself: the session timeout. Zero disables it.
	ParentStopLimit time.Duration
}

// Run implements Executor.
func (s Shell) Run(ctx context.Context, t Task, log io.Writer) Result {
	env := s.BaseEnv
	if env == nil {
		env = os.Environ()
	}
	out := &lastLine{w: log}
	cmd := exec.Command(s.Self, SuperviseArg, "--grace", s.KillGrace.String(),
		"--parent-stop-limit", s.ParentStopLimit.String(), t.Spec.Command)
	cmd.Env = append(append([]string{}, env...), t.Env()...)
	cmd.Dir = t.Spec.Workdir
	cmd.Stdout, cmd.Stderr = out, log
	// The supervisor gets ParentDeathSignal when the thread that started it dies with the worker. Its
	// own process group keeps a terminal's Ctrl-C (meant for the worker's graceful shutdown)
	// away from the task.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: ParentDeathSignal}
	// Grandchildren that escaped the group could hold the pipes open; do not wait for them.
	cmd.WaitDelay = s.KillGrace + 5*time.Second

	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the starting OS thread exits, not the process: keep this
		// goroutine on its thread for the child's whole life, and let the thread end with it.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return Result{Err: fmt.Errorf("start supervisor: %w", err)}
	}
	var err error
	stopped := false
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done: // it ended by itself at the same moment: its result is its own
		default:
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err = <-done:
			case <-time.After(s.KillGrace + 5*time.Second):
				// The supervisor did not end the group in time; end the supervisor.
				_ = cmd.Process.Kill()
				err = <-done
			}
		}
	}
	code := exitStatus(err)
	res := Result{ExitCode: &code, Output: out.last(), Stopped: stopped}
	if code != 0 {
		res.Err = fmt.Errorf("exit status %d", code)
	}
	return res
}

// lastLine passes writes through and remembers the last non-empty line.
type lastLine struct {
	w    io.Writer
	mu   sync.Mutex
	line []byte // the last complete non-empty line
	cur  []byte // the line being written
}

const maxOutput = 64 << 10

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	for _, b := range p {
		if b == '\n' {
			if len(bytes.TrimSpace(l.cur)) > 0 {
				l.line = append(l.line[:0], l.cur...)
			}
			l.cur = l.cur[:0]
			continue
		}
		if len(l.cur) < maxOutput {
			l.cur = append(l.cur, b)
		}
	}
	l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lastLine) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(bytes.TrimSpace(l.cur)) > 0 {
		return string(bytes.TrimSpace(l.cur))
	}
	return string(bytes.TrimSpace(l.line))
}
