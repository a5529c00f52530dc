package registry

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"
	"github.com/zksched/zksched/internal/testenv"
)

// logSink collects a test's logs, shows them through t.Log while the test runs, and lets a test
// wait for a line. Lines written after the test ended (by goroutines still stopping) are dropped.
type logSink struct {
	t       testing.TB
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
	ended   bool
}

func newLogSink(t testing.TB) *logSink {
	s := &logSink{t: t, changed: make(chan struct{})}
	t.Cleanup(func() {
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
	})
	return s
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return len(p), nil
	}
	s.t.Log(strings.TrimSuffix(string(p), "\n"))
	s.buf.Write(p)
	close(s.changed)
	s.changed = make(chan struct{})
	return len(p), nil
}

// waitFor waits until a log line contains substr.
func (s *logSink) waitFor(t testing.TB, substr string, timeout time.Duration) {
	t.Helper()
	waitUntil(t, timeout, "log line "+substr, func() <-chan struct{} {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.changed
	}, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		sc := bufio.NewScanner(bytes.NewReader(s.buf.Bytes()))
		for sc.Scan() {
			if strings.Contains(sc.Text(), substr) {
				return true
			}
		}
		return false
	})
}

// testBundle is what most tests need: their own ZooKeeper root and a log.
type testBundle struct {
	zk  testenv.ZK
	log *logSink
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	t.Parallel()
	return &testBundle{log: newLogSink(t), zk: testenv.ZooKeeper(t)}
}

// config returns a client config on the test's root with short timeouts.
func (b *testBundle) config(servers ...string) Config {
	if len(servers) == 0 {
		servers = b.zk.Servers
	}
	return Config{
		Servers:        servers,
		Root:           b.zk.Root,
		SessionTimeout: time.Second,
		InfoInterval:   200 * time.Millisecond,
		Logger:         zerolog.New(b.log).With().Timestamp().Logger(),
	}
}

// dial connects a client that is closed when the test ends.
func (b *testBundle) dial(t *testing.T, cfg Config) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// register registers a node of role on c; the registration is closed when the test ends.
func register(t *testing.T, c *Client, role Role, name string) *Registration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.Register(ctx, nodeInfo(role, name))
	if err != nil {
		t.Fatalf("Register %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Close(ctx)
	})
	return r
}

// elect enters a registered master in the election; it resigns when the test ends.
func elect(t *testing.T, r *Registration) *Election {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, err := r.Elect(ctx)
	if err != nil {
		t.Fatalf("Elect %s: %v", r.ID(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Close(ctx)
	})
	return e
}

var testStart = time.UnixMilli(1763802000123)

// nodeInfo makes the NodeInfo of a test node; name tells nodes apart.
func nodeInfo(role Role, name string) NodeInfo {
	port := 5680
	if role == RoleWorker {
		port = 1234
	}
	host := "10.0.0." + name
	return NodeInfo{
		ID: Identity(host, port, testStart), Role: role, Host: host, Port: port, PID: 4242,
		StartTime: testStart, Version: "v0.0.0-test", Slots: 8, Groups: []string{"default"},
	}
}

// waitUntil waits until cond holds, re-checking whenever changed() fires, for at most timeout.
func waitUntil(t testing.TB, timeout time.Duration, what string, changed func() <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch := changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

func waitReg(t testing.TB, r *Registration, timeout time.Duration, what string, cond func(RegState) bool) RegState {
	t.Helper()
	waitUntil(t, timeout, what, r.Changed, func() bool { return cond(r.State()) })
	return r.State()
}

func waitStatus(t testing.TB, c *Client, timeout time.Duration, what string, cond func(Status) bool) Status {
	t.Helper()
	waitUntil(t, timeout, what, c.Changed, func() bool { return cond(c.Status()) })
	return c.Status()
}

func waitLeader(t testing.TB, e *Election, timeout time.Duration, want bool) {
	t.Helper()
	waitUntil(t, timeout, "IsLeader "+map[bool]string{true: "true", false: "false"}[want], e.Changed,
		func() bool { return e.IsLeader() == want })
}

// deleted returns a channel closed when the znode p (which exists) is deleted.
func deleted(t testing.TB, zc *zk.Conn, p string) <-chan struct{} {
	t.Helper()
	ok, _, ev, err := zc.ExistsW(p)
	if err != nil || !ok {
		t.Fatalf("watch %s: exists %v, %v", p, ok, err)
	}
	gone := make(chan struct{})
	go func() {
		for e := range ev {
			if e.Type == zk.EventNodeDeleted {
				close(gone)
			}
		}
	}()
	return gone
}

func waitClosed(t testing.TB, ch <-chan struct{}, timeout time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// zkConn opens a plain ZooKeeper session to addr for a test's own inspection, closed at the end.
func zkConn(t testing.TB, addr string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(nopZKLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn
			}
		case <-deadline:
			t.Fatalf("no zookeeper session with %s", addr)
		}
	}
}

type nopZKLogger struct{}

func (nopZKLogger) Printf(string, ...any) {}

func ownerOf(st *zk.Stat) int64 {
	if st == nil {
		return 0
	}
	return st.EphemeralOwner
}
