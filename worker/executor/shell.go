package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/zksched/zksched/workflow"
)

// Shell runs `bash -c command` under a supervisor (see SuperviseMain).
type Shell struct {
	// Self is the program to run as the supervisor, with SuperviseArg as its first argument:
	// the zksched binary itself (os.Executable).
	Self string
	// KillGrace is the time between SIGTERM and SIGKILL of the task's processes when the
	// attempt is stopped.
	KillGrace time.Duration
	// BaseEnv is the environment every task starts from, its own ZKSCHED_* variables
	// ([Task.Env]) added: the worker builds it with [TaskEnv]. nil means the variables of
	// the worker's own environment that [DefaultTaskEnv] lets through. The supervisor
	// runs with the same environment, as it is as readable to the task as its own.
	BaseEnv []string
	// User, when set, is the user the task runs as (see [TaskUser]); nil: the worker's.
	User *TaskUser
	// ParentStopLimit is how long the worker may be stopped (SIGSTOP) before the supervisor
	// kills the task itself: the session timeout. Zero disables it.
	ParentStopLimit time.Duration
	// Cgroup is the cgroup v2 directory under which each attempt gets a leaf cgroup of its
	// own ([TaskCgroupParent] finds it). Empty: no cgroups, the supervisor holds the task's
	// processes as a child subreaper.
	Cgroup string
}

// drainLimit bounds how long the worker reads a task's output once its supervisor has
// exited. By then every task process is dead and the pipes are at their end; a process that
// escaped the supervisor (which was itself killed) and holds them must not hang the attempt.
const drainLimit = 2 * time.Second

// Run implements Executor.
func (s Shell) Run(ctx context.Context, t Task, log io.Writer) Result {
	dir, scratch, err := s.workdir(t)
	if err != nil {
		return Result{Err: fmt.Errorf("make the task's scratch directory: %w", err)}
	}
	if scratch {
		defer os.RemoveAll(dir) // the supervisor's job, unless it was killed
	}
	upDir, files, err := upstreamFiles(t, s.User)
	if err != nil {
		return Result{Err: err}
	}
	if upDir != "" {
		defer os.RemoveAll(upDir)
	}
	t.upstreamFiles = files
	cmd, leaf := s.command(t, dir, scratch)
	// The output goes through pipes of our own rather than exec's: exec.Cmd.Wait would wait
	// for every holder of the pipes, and the order must be: the supervisor exits (it has
	// killed every task process, escaped ones included), then the output is read to its end.
	outLog, errLog := io.Writer(log), io.Writer(log)
	if sl, ok := log.(StreamLog); ok {
		o, e := sl.Stream(), sl.Stream()
		defer o.Close() // once the drains have ended: see the end of Run
		defer e.Close()
		outLog, errLog = o, e
	}
	keep := t.OutputLimit
	if keep <= 0 {
		keep = workflow.MaxOutputLimit
	}
	if t.stdoutTap != nil {
		outLog = io.MultiWriter(outLog, t.stdoutTap)
	}
	out := &lastLine{w: outLog, keep: keep}
	stdout, err := newDrain(out)
	if err != nil {
		return Result{Err: fmt.Errorf("start supervisor: %w", err)}
	}
	stderr, err := newDrain(errLog)
	if err != nil {
		stdout.abort()
		return Result{Err: fmt.Errorf("start supervisor: %w", err)}
	}
	cmd.Stdout, cmd.Stderr = stdout.w, stderr.w
	// The supervisor gets ParentDeathSignal when the thread that started it dies with the worker. Its
	// own process group keeps a terminal's Ctrl-C (meant for the worker's graceful shutdown)
	// away from the task.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: ParentDeathSignal}

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
	err = <-started
	if err != nil {
		stdout.abort()
		stderr.abort()
		return Result{Err: fmt.Errorf("start supervisor: %w", err)}
	}
	stdout.started()
	stderr.started()
	stopped, err := s.waitOrStop(ctx, cmd, done)
	if leaf != "" {
		// The supervisor removes its cgroup; one that is left means the supervisor was killed
		// before it could end the task, which the worker does now.
		if killed, cerr := endCgroup(leaf, drainLimit); cerr != nil {
			fmt.Fprintf(log, "zksched: end the task's cgroup: %v\n", cerr)
		} else if killed {
			fmt.Fprintln(log, "zksched: the supervisor left processes in the task's cgroup: killed them")
		}
	}
	deadline := time.Now().Add(drainLimit)
	outEnded, errEnded := stdout.wait(deadline), stderr.wait(deadline)
	if !outEnded || !errEnded {
		fmt.Fprintln(log, "zksched: a process that outlived the task still holds its output: stopped reading it")
	}
	code := exitStatus(err)
	output, size := out.last()
	res := Result{ExitCode: &code, Output: output, OutputSize: size, Stopped: stopped}
	if code != 0 {
		res.Err = fmt.Errorf("exit status %d", code)
	}
	return res
}

// workdir is the directory t runs in, which it reads in ZKSCHED_WORKDIR: its workdir, or else
// a scratch directory of the attempt's own (scratch true), made here, owned by the task's
// user, and removed once the attempt has ended.
func (s Shell) workdir(t Task) (dir string, scratch bool, err error) {
	if t.Spec.Workdir != "" {
		return t.Spec.Workdir, false, nil
	}
	dir, err = os.MkdirTemp("", fmt.Sprintf("zksched-task-%d-%d-", t.ID, t.Attempt))
	if err != nil {
		return "", false, err
	}
	if s.User != nil {
		if err := os.Chown(dir, int(s.User.UID), int(s.User.GID)); err != nil {
			_ = os.Remove(dir)
			return "", false, err
		}
	}
	return dir, true, nil
}

// command is the supervisor's command for t, run in dir, and the leaf cgroup it runs the task
// in (empty without cgroups). The supervisor removes dir when it is scratch.
func (s Shell) command(t Task, dir string, scratch bool) (cmd *exec.Cmd, leaf string) {
	env := s.BaseEnv
	if env == nil {
		env = defaultTaskEnv()
	}
	args := []string{SuperviseArg, "--grace", s.KillGrace.String(), "--parent-stop-limit", s.ParentStopLimit.String(),
		"--parent-pid", strconv.Itoa(os.Getpid())}
	if scratch {
		args = append(args, "--scratch", dir)
	}
	if t.stdin {
		args = append(args, "--stdin")
	}
	if s.User != nil {
		env = s.User.env(env)
		args = append(args, s.User.args()...)
	}
	if s.Cgroup != "" {
		leaf = filepath.Join(s.Cgroup, fmt.Sprintf("zksched-task-%d-%d-%d-%d", t.ID, t.Attempt, os.Getpid(), cgroupSeq.Add(1)))
		args = append(args, "--cgroup", leaf)
	}
	cmd = exec.Command(s.Self, append(args, t.Spec.Command)...)
	cmd.Env = append(append(append([]string{}, env...), t.Env()...), "ZKSCHED_WORKDIR="+dir)
	cmd.Dir = dir
	return cmd, leaf
}

// waitOrStop waits for the supervisor cmd to end (its Wait's error arrives on done); when ctx
// ends first, it asks the supervisor to stop the task (SIGTERM) and kills the supervisor if
// it has not ended the task within the grace and 5 s more. stopped reports the stop.
func (s Shell) waitOrStop(ctx context.Context, cmd *exec.Cmd, done <-chan error) (stopped bool, err error) {
	select {
	case err = <-done:
		return false, err
	case <-ctx.Done():
	}
	select {
	case err = <-done: // it ended by itself at the same moment: its result is its own
		return false, err
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err = <-done:
	case <-time.After(s.KillGrace + 5*time.Second):
		// The supervisor did not end the task in time; end the supervisor.
		_ = cmd.Process.Kill()
		err = <-done
	}
	return true, err
}

// exitStatus is the supervisor's exit status: bash's, which the supervisor exits with, or
// 128+signal when the supervisor was killed.
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

// drain copies one output pipe of the supervisor to a writer.
type drain struct {
	r, w *os.File
	done chan struct{}
}

func newDrain(dst io.Writer) (*drain, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	d := &drain{r: r, w: w, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		_, _ = io.Copy(dst, r)
	}()
	return d, nil
}

// started closes the worker's copy of the write end, which the supervisor now holds, so the
// read end sees its end once the supervisor and the task are gone.
func (d *drain) started() { d.w.Close() }

// abort stops the copy, for a supervisor that never started.
func (d *drain) abort() {
	d.w.Close()
	d.r.Close()
	<-d.done
}

// wait waits until the pipe has been read to its end or until deadline, when it stops
// reading; it reports whether the end was reached.
func (d *drain) wait(deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-d.done:
		d.r.Close()
		return true
	case <-timer.C:
		d.r.Close()
		<-d.done
		return false
	}
}

// lastLine passes writes through and remembers the last non-empty line, the spaces around
// it left out: its first keep bytes, and its size.
type lastLine struct {
	w         io.Writer
	keep      int
	mu        sync.Mutex
	line, cur outputLine // the last complete non-empty line, the line being written
}

// outputLine is one line of output as lastLine reads it.
type outputLine struct {
	text []byte // from its first byte that is not a space on, its first keep bytes at most
	// size counts its bytes from the first that is not a space on, and trail the spaces at
	// its end, whether text holds them or not.
	size, trail int
}

// isSpace reports the bytes that the output's line leaves out around it.
func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\v' || b == '\f' }

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	for _, b := range p {
		switch {
		case b == '\n':
			if l.cur.size > l.cur.trail {
				l.line = outputLine{text: append(l.line.text[:0], l.cur.text...), size: l.cur.size, trail: l.cur.trail}
			}
			l.cur = outputLine{text: l.cur.text[:0]}
			continue
		case isSpace(b) && l.cur.size == 0:
			continue
		case isSpace(b):
			l.cur.trail++
		default:
			l.cur.trail = 0
		}
		l.cur.size++
		if len(l.cur.text) < l.keep {
			l.cur.text = append(l.cur.text, b)
		}
	}
	l.mu.Unlock()
	return l.w.Write(p)
}

// last returns the last non-empty line, or its first keep bytes and its size when it is
// longer (size is 0 otherwise).
func (l *lastLine) last() (output string, size int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.line
	if l.cur.size > l.cur.trail {
		ln = l.cur
	}
	if n := ln.size - ln.trail; n > len(ln.text) {
		return string(ln.text), n
	}
	return string(ln.text[:ln.size-ln.trail]), 0
}
