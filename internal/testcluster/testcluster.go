// Package testcluster runs real zksched processes for end-to-end and fault tests: the binary
// is built once per test binary, each node is a child process with its own log file, and the
// cluster shares the test's own ZooKeeper root and PostgreSQL schema.
//
// The binary is built with -race and the faultinject build tag, so a test can make a master
// crash at a chosen step of a failover (ZKSCHED_TEST_FAULT); without that variable the hook
// does nothing. Its workers run a normal build of the binary as their tasks' supervisor
// (ZKSCHED_TEST_SUPERVISOR, see package faultinject): a race-built one costs several times
// as much to start, once per task.
package testcluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testenv"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
	// given says UseBinary chose the binary: nothing is built, the supervisor included.
	given      bool
	bench      besideBinary
	supervisor besideBinary
)

// besideBinary is a binary built once, beside Binary's zksched.
type besideBinary struct {
	once sync.Once
	path string
	err  error
}

// get builds the binary named name into Binary's folder with build, once, and returns its path.
func (b *besideBinary) get(t testing.TB, name string, build func(dst string) error) string {
	t.Helper()
	zksched := Binary(t)
	b.once.Do(func() {
		b.path = filepath.Join(filepath.Dir(zksched), name)
		b.err = build(b.path)
	})
	if b.err != nil {
		t.Fatalf("testcluster: %v", b.err)
	}
	return b.path
}

// Binary builds cmd/zksched once for the whole test binary and returns its path. The binary
// lives in a directory of its own until Cleanup.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "zksched-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "zksched")
		buildErr = build(binPath, "./cmd/zksched")
	})
	if buildErr != nil {
		t.Fatalf("testcluster: %v", buildErr)
	}
	return binPath
}

// BenchBinary builds cmd/zksched-bench once for the whole test binary, beside Binary's
// zksched, which it therefore runs as its nodes unless told otherwise, and returns its path.
func BenchBinary(t testing.TB) string {
	t.Helper()
	return bench.get(t, "zksched-bench", func(dst string) error { return build(dst, "./cmd/zksched-bench") })
}

// SupervisorBinary builds cmd/zksched once as a deployment does (neither -race nor the
// faultinject tag), beside Binary's zksched, and returns its path: the program the test
// clusters' workers run as their tasks' supervisor (ZKSCHED_TEST_SUPERVISOR). It returns ""
// after UseBinary: that binary supervises its own tasks.
func SupervisorBinary(t testing.TB) string {
	t.Helper()
	if given {
		return ""
	}
	return supervisor.get(t, "zksched-supervisor", func(dst string) error { return goBuild(dst, "./cmd/zksched") })
}

// SupervisorEnv is the variable that makes a test cluster's workers run SupervisorBinary as
// their tasks' supervisor, or nothing after UseBinary.
func SupervisorEnv(t testing.TB) []string {
	t.Helper()
	if p := SupervisorBinary(t); p != "" {
		return []string{"ZKSCHED_TEST_SUPERVISOR=" + p}
	}
	return nil
}

// build builds the command pkg of the repository to dst, with -race and the faultinject tag.
func build(dst, pkg string) error {
	return goBuild(dst, pkg, "-race", "-tags", "faultinject")
}

// goBuild runs go build of the command pkg of the repository to dst, with flags.
func goBuild(dst, pkg string, flags ...string) error {
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", dst, pkg)...)
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return nil
}

// UseBinary makes Binary return path instead of building the binary, for a harness that runs
// outside a test (zksched-bench soak runs a zksched binary as the nodes). It must be called
// before the first Binary.
func UseBinary(path string) {
	buildOnce.Do(func() { binPath, given = path, true })
}

// Cleanup removes the binaries Binary and BenchBinary built, if they built them. A test package that uses Binary
// calls it from its TestMain once m.Run has returned: no test may use the binary after it.
func Cleanup() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// Cluster is a set of zksched processes sharing one registry root and one schema.
type Cluster struct {
	t   testing.TB
	Bin string
	// Env holds the ZKSCHED_* variables every process gets.
	Env []string
	Dir string
	// PipeOutput makes the processes started after it is set write their output into a pipe
	// that the cluster copies to the log file, instead of into the file itself, so that a test
	// can stop reading it (Proc.BlockOutput) as a stalled journald or a full pipe would.
	PipeOutput bool

	mu    sync.Mutex
	procs []*Proc
}

// New returns a cluster whose processes reach ZooKeeper at zkServers under root and
// PostgreSQL at dsn. extraEnv (ZKSCHED_* settings) is added to every process.
//
// The cluster has a state folder of its own (node.state-dir, see StateDir): its masters
// without a token generate theirs there, as on a machine, and its CLI runs (Run) find it
// there; Token reads it for a test's own requests. Its workers may run tasks as root, as
// the tests do (worker.allow-root-tasks): a test about the task user sets one.
func New(t testing.TB, zkServers []string, root, dsn string, extraEnv ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Bin: Binary(t), Dir: t.TempDir()}
	c.Env = append([]string{
		"ZKSCHED_NODE_STATE_DIR=" + c.StateDir(),
		"ZKSCHED_WORKER_ALLOW_ROOT_TASKS=true",
		"ZKSCHED_REGISTRY_SERVERS=" + strings.Join(zkServers, ","),
		"ZKSCHED_REGISTRY_ROOT=" + root,
		"ZKSCHED_DB_DSN=" + dsn,
		"ZKSCHED_NODE_HOST=127.0.0.1",
		"ZKSCHED_LOG_LEVEL=debug",
		// The binary is built with -race, whose runtime sleeps 1 s at every exit by default:
		// every task supervisor would end 1 s after its task, and every result come 1 s late.
		"GORACE=atexit_sleep_ms=0 halt_on_error=1",
		// A task supervisor gets only the task's environment (worker.task-env): GORACE too.
		"ZKSCHED_WORKER_TASK_ENV=GORACE",
	}, append(SupervisorEnv(t), extraEnv...)...)
	t.Cleanup(c.stopAll)
	return c
}

// StateDir is the cluster's node.state-dir: where its masters without a token keep the one
// they generate (api-token).
func (c *Cluster) StateDir() string { return filepath.Join(c.Dir, "state") }

// Token waits up to 30 s for the admin token a master of the cluster without one generated
// (in StateDir) and returns it: what a test sends as Authorization: Bearer. The file appears
// whole (a master links it into place), so a file that exists holds the token.
func (c *Cluster) Token() string {
	c.t.Helper()
	path := filepath.Join(c.StateDir(), "api-token")
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return strings.TrimSpace(string(b))
		}
		if !os.IsNotExist(err) || time.Now().After(deadline) {
			c.t.Fatalf("testcluster: the generated api token: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Proc is one running zksched process.
type Proc struct {
	Name    string
	Cmd     *exec.Cmd
	LogPath string
	// Port is a node's HTTP port, part of its identity; 0 for other commands.
	Port int

	done     chan struct{}
	err      error
	exitedAt time.Time

	// gate is non-nil for a process whose output is piped: the copier holds while it is
	// closed (blocked) and reads while it is open.
	gateMu sync.Mutex
	gate   chan struct{}
}

// Start runs `zksched args…` with the cluster's environment plus env; its output goes to a
// log file named after name, printed if the test fails. Where env repeats a variable of the
// cluster's, env wins (exec.Cmd keeps the last value), so one node can be pointed at a proxy
// of its own.
func (c *Cluster) Start(name string, env []string, args ...string) *Proc {
	c.t.Helper()
	logPath := filepath.Join(c.Dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	p := c.StartOutput(name, f, env, args...)
	p.LogPath = logPath
	return p
}

// StartOutput is Start with the process's output going to out, which it closes when the
// process has exited; Log then has nothing. A test gives it the write end of a pipe it never
// reads to try a node whose log output blocks.
func (c *Cluster) StartOutput(name string, out *os.File, env []string, args ...string) *Proc {
	c.t.Helper()
	cmd := exec.Command(c.Bin, args...)
	cmd.Env = append(append(append([]string{}, os.Environ()...), c.Env...), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Proc{Name: name, Cmd: cmd, done: make(chan struct{})}
	var pw *os.File
	if c.PipeOutput {
		pr, w, err := os.Pipe()
		if err != nil {
			c.t.Fatal(err)
		}
		pw = w
		p.gate = make(chan struct{})
		close(p.gate)
		// The copier ends at the pipe's end, which may come after the process's: a task
		// supervisor it started may hold the pipe's write end for a moment longer.
		go func() {
			defer out.Close()
			defer pr.Close()
			p.copyOutput(pr, out)
		}()
		cmd.Stdout, cmd.Stderr = pw, pw
	} else {
		cmd.Stdout, cmd.Stderr = out, out
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	if pw != nil {
		pw.Close() // the child has its copy
	}
	go func() {
		p.err = cmd.Wait()
		p.exitedAt = time.Now()
		if pw == nil {
			out.Close()
		}
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

// Master starts a master on a free port.
func (c *Cluster) Master(name string, env ...string) *Proc {
	return c.MasterOnPort(name, FreePort(c.t), env...)
}

// MasterOnPort starts a master on port.
func (c *Cluster) MasterOnPort(name string, port int, env ...string) *Proc {
	p := c.Start(name, append([]string{fmt.Sprintf("ZKSCHED_MASTER_PORT=%d", port)}, env...), "master")
	p.Port = port
	return p
}

// Worker starts a worker on a free port.
func (c *Cluster) Worker(name string, env ...string) *Proc {
	return c.WorkerOnPort(name, FreePort(c.t), env...)
}

// WorkerOnPort starts a worker on port, for instance the port of a worker that died, so that
// the new process has the same host:port and a new identity.
func (c *Cluster) WorkerOnPort(name string, port int, env ...string) *Proc {
	p := c.Start(name, append([]string{fmt.Sprintf("ZKSCHED_WORKER_PORT=%d", port)}, env...), "worker")
	p.Port = port
	return p
}

// WorkerOutput starts a worker on a free port with its output going to out (see StartOutput).
func (c *Cluster) WorkerOutput(name string, out *os.File, env ...string) *Proc {
	port := FreePort(c.t)
	p := c.StartOutput(name, out, append([]string{fmt.Sprintf("ZKSCHED_WORKER_PORT=%d", port)}, env...), "worker")
	p.Port = port
	return p
}

// Run runs `zksched args…` to completion and returns its combined output and exit code.
func (c *Cluster) Run(args ...string) (string, int) {
	c.t.Helper()
	cmd := exec.Command(c.Bin, args...)
	cmd.Env = append(append([]string{}, os.Environ()...), c.Env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("run zksched %v: %v", args, err)
	}
	return out.String(), code
}

// copyOutput copies the process's piped output to its log file, holding while the output is
// blocked.
func (p *Proc) copyOutput(src, dst *os.File) {
	buf := make([]byte, 32<<10)
	for {
		p.gateMu.Lock()
		gate := p.gate
		p.gateMu.Unlock()
		<-gate
		n, err := src.Read(buf)
		if n > 0 {
			_, _ = dst.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// BlockOutput stops reading the process's output, so that once the pipe's buffer (64 KiB on
// Linux) is full its writes block. It reports false when the output is not piped (see
// Cluster.PipeOutput) or already blocked.
func (p *Proc) BlockOutput() bool {
	p.gateMu.Lock()
	defer p.gateMu.Unlock()
	if p.gate == nil {
		return false
	}
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
		return true
	default:
		return false
	}
}

// UnblockOutput reads the process's output again.
func (p *Proc) UnblockOutput() {
	p.gateMu.Lock()
	defer p.gateMu.Unlock()
	if p.gate == nil {
		return
	}
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// ExitedAt returns when the test saw the process exit; zero while it runs.
func (p *Proc) ExitedAt() time.Time {
	select {
	case <-p.done:
		return p.exitedAt
	default:
		return time.Time{}
	}
}

// Wait waits up to d for the process to exit and returns its exit code (-1 if killed by a
// signal); it fails the test on timeout.
func (p *Proc) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %v", p.Name, d)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// KilledBy returns the signal that ended the process, or 0 if it exited by itself or still
// runs.
func (p *Proc) KilledBy() syscall.Signal {
	select {
	case <-p.done:
	default:
		return 0
	}
	if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// Log returns what the process has written so far.
func (p *Proc) Log() string {
	if p.LogPath == "" {
		return ""
	}
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// WaitLog waits up to d for a line of the process's log that contains substr and returns it;
// it fails the test on timeout. The process writes to a file and gives no other signal, so
// this polls the file.
func (p *Proc) WaitLog(t testing.TB, d time.Duration, substr string) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for line := range strings.SplitSeq(p.Log(), "\n") {
			if strings.Contains(line, substr) {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within %v", p.Name, substr, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ID waits up to d for the node to log its identity (host:port_startMillis, in its
// "starting" line) and returns it.
func (p *Proc) ID(t testing.TB, d time.Duration) string {
	t.Helper()
	line := p.WaitLog(t, d, `"message":"starting"`)
	var entry struct {
		Node string `json:"node"`
	}
	if err := json.Unmarshal([]byte(line), &entry); err != nil || entry.Node == "" {
		t.Fatalf("%s: no node identity in its starting line %q (%v)", p.Name, line, err)
	}
	return entry.Node
}

func (c *Cluster) stopAll() {
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for _, p := range procs {
		p.UnblockOutput()
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.Cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	if c.t.Failed() {
		for _, p := range procs {
			c.t.Logf("==== log of %s ====\n%s", p.Name, tail(p.Log(), 200))
		}
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// FreePort returns a TCP port that was free a moment ago (testenv.FreePorts).
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}
