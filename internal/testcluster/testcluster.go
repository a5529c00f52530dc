// Package testcluster runs real zksched processes for end-to-end and fault tests: the binary
// is built once per test binary, each node is a child process with its own log file, and the
// cluster shares the test's own ZooKeeper root and PostgreSQL schema.
package testcluster

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/zksched once for the whole test binary and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "zksched-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "zksched")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-race", "-o", binPath, "./cmd/zksched")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("testcluster: %v", buildErr)
	}
	return binPath
}

// Cluster is a set of zksched processes sharing one registry root and one schema.
type Cluster struct {
	t   testing.TB
	Bin string
	// Env holds the ZKSCHED_* variables every process gets.
	Env []string
	Dir string

	mu    sync.Mutex
	procs []*Proc
}

// New returns a cluster whose processes reach ZooKeeper at zkServers under root and
// PostgreSQL at dsn. extraEnv (ZKSCHED_* settings) is added to every process.
func New(t testing.TB, zkServers []string, root, dsn string, extraEnv ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Bin: Binary(t), Dir: t.TempDir()}
	c.Env = append([]string{
		"ZKSCHED_REGISTRY_SERVERS=" + strings.Join(zkServers, ","),
		"ZKSCHED_REGISTRY_ROOT=" + root,
		"ZKSCHED_DB_DSN=" + dsn,
		"ZKSCHED_NODE_HOST=127.0.0.1",
		"ZKSCHED_LOG_LEVEL=debug",
	}, extraEnv...)
	t.Cleanup(c.stopAll)
	return c
}

// Proc is one running zksched process.
type Proc struct {
	Name    string
	Cmd     *exec.Cmd
	LogPath string
	done    chan struct{}
	err     error
}

// Start runs `zksched args…` with the cluster's environment plus env; its output goes to a
// log file named after name, printed if the test fails.
func (c *Cluster) Start(name string, env []string, args ...string) *Proc {
	c.t.Helper()
	logPath := filepath.Join(c.Dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.Bin, args...)
	cmd.Env = append(append(append([]string{}, os.Environ()...), c.Env...), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, LogPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

// Master starts a master on a free port.
func (c *Cluster) Master(name string, env ...string) *Proc {
	return c.Start(name, append([]string{fmt.Sprintf("ZKSCHED_MASTER_PORT=%d", FreePort(c.t))}, env...), "master")
}

// Worker starts a worker on a free port.
func (c *Cluster) Worker(name string, env ...string) *Proc {
	return c.Start(name, append([]string{fmt.Sprintf("ZKSCHED_WORKER_PORT=%d", FreePort(c.t))}, env...), "worker")
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

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

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

// Log returns what the process has written so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

func (c *Cluster) stopAll() {
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for _, p := range procs {
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

// FreePort returns a TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
