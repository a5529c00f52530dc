package failover

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/registry"
)

// fakeNode is a session and a registration the test drives by hand.
type fakeNode struct {
	mu       sync.Mutex
	status   registry.Status
	reg      registry.RegState
	timeout  time.Duration
	changedC chan struct{}
}

func newFakeNode(clock *fakeClock) *fakeNode {
	return &fakeNode{
		status:   registry.Status{State: registry.Connected, SessionID: 1, LastContact: clock.Now()},
		reg:      registry.RegState{Kind: registry.Registered, SessionID: 1},
		timeout:  10 * time.Second,
		changedC: make(chan struct{}),
	}
}

func (f *fakeNode) Status() registry.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}
func (f *fakeNode) State() registry.RegState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reg
}
func (f *fakeNode) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changedC
}
func (f *fakeNode) SessionTimeout() time.Duration { return f.timeout }
func (f *fakeNode) LastContact() time.Time        { return f.Status().LastContact }
func (f *fakeNode) set(fn func(*fakeNode)) {
	f.mu.Lock()
	fn(f)
	close(f.changedC)
	f.changedC = make(chan struct{})
	f.mu.Unlock()
}

type guardBundle struct {
	clock *fakeClock
	node  *fakeNode
	guard *Guard
	lost  atomic.Int32
	done  chan error
}

func setupGuard(t *testing.T, keepRunning bool) *guardBundle {
	t.Helper()
	return setupGuardWith(t, GuardConfig{KeepRunning: keepRunning, Log: zerolog.Nop()})
}

// setupGuardWith runs a guard with cfg, on the bundle's fake clock and counting OnLost.
func setupGuardWith(t *testing.T, cfg GuardConfig) *guardBundle {
	t.Helper()
	b := &guardBundle{clock: newFakeClock(), done: make(chan error, 1)}
	b.node = newFakeNode(b.clock)
	cfg.OnLost, cfg.Clock = func() { b.lost.Add(1) }, b.clock
	b.guard = NewGuard(b.node, b.node, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { b.done <- b.guard.Run(ctx) }()
	t.Cleanup(cancel)
	b.wait(t, "active at start", func() bool { return b.guard.Active() })
	return b
}

// wait polls cond: the guard re-evaluates on every change of the fake node and whenever the
// fake clock passes its tick, and the test observes the result from outside.
func (b *guardBundle) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("guard: not %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGuardStopsClaimingAtOnceAndWorkAtTheDeadline(t *testing.T) {
	t.Parallel()
	b := setupGuard(t, false)
	b.node.set(func(f *fakeNode) { f.status.State = registry.Disconnected })
	b.wait(t, "inactive once disconnected", func() bool { return !b.guard.Active() })
	b.clock.Advance(9 * time.Second)
	time.Sleep(50 * time.Millisecond)
	b.clock.Advance(time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if n := b.lost.Load(); n != 0 {
		t.Fatalf("work stopped %d times before the session timeout since last contact", n)
	}
	b.clock.Advance(time.Second)
	b.wait(t, "stopping work at the deadline", func() bool { return b.lost.Load() == 1 })
	// Back with a new session, registered again: active again; no more stops.
	b.node.set(func(f *fakeNode) {
		f.status = registry.Status{State: registry.Connected, SessionID: 2, LastContact: b.clock.Now()}
		f.reg = registry.RegState{Kind: registry.Registered, SessionID: 2}
	})
	b.wait(t, "active after re-registering", func() bool { return b.guard.Active() })
	n := b.lost.Load()
	b.clock.Advance(100 * time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if got := b.lost.Load(); got != n {
		t.Fatalf("work stopped %d more times after the node was live again", got-n)
	}
}

// TestGuardStopsWorkAtEveryTickWhileLost: work started after the first stop (a claim that was in
// flight at the deadline) is stopped at the next tick, not left running.
func TestGuardStopsWorkAtEveryTickWhileLost(t *testing.T) {
	t.Parallel()
	b := setupGuard(t, false)
	b.node.set(func(f *fakeNode) { f.status.State = registry.Disconnected })
	b.clock.Advance(10 * time.Second)
	b.wait(t, "stopping work at the deadline", func() bool { return b.lost.Load() == 1 })
	for want := int32(2); want <= 4; want++ {
		b.clock.waitForWaiter(t)
		b.clock.Advance(100 * time.Millisecond)
		b.wait(t, "stopping work again at the next tick", func() bool { return b.lost.Load() >= want })
	}
}

// TestGuardActiveIsDecidedAtTheCall: between two watchdog ticks the deadline passes; a claim that
// returns then must hear that the node is not live, not the last tick's answer.
func TestGuardActiveIsDecidedAtTheCall(t *testing.T) {
	t.Parallel()
	b := setupGuardWith(t, GuardConfig{Tick: time.Hour, Log: zerolog.Nop()})
	b.clock.Advance(10 * time.Second)
	if b.guard.Active() {
		t.Fatal("Active says yes past the session timeout since the last contact")
	}
	// Contact again, same session (the server never expired it): Active stays no until the
	// watchdog has seen the node live again, since the deadline was passed.
	b.node.set(func(f *fakeNode) { f.status.LastContact = b.clock.Now() })
	b.wait(t, "active once the watchdog saw the node live", func() bool { return b.guard.Active() })
}

// blockingWriter blocks every write until its test ends: a log pipe nobody reads.
type blockingWriter struct{ done chan struct{} }

func (w blockingWriter) Write(p []byte) (int, error) { <-w.done; return len(p), nil }

// TestGuardActsBeforeItLogs: with a log writer that blocks (a stalled pipe), the watchdog still
// stops the work at the deadline and the fence still ends Run.
func TestGuardActsBeforeItLogs(t *testing.T) {
	t.Parallel()
	w := blockingWriter{done: make(chan struct{})}
	t.Cleanup(func() { close(w.done) })
	b := setupGuardWith(t, GuardConfig{Log: zerolog.New(w)})
	b.node.set(func(f *fakeNode) { f.status.State = registry.Disconnected })
	b.clock.Advance(10 * time.Second)
	b.wait(t, "stopping work at the deadline", func() bool { return b.lost.Load() >= 1 && !b.guard.Active() })

	b2 := setupGuardWith(t, GuardConfig{Log: zerolog.New(w)})
	fe := &registry.FencedError{Role: registry.RoleWorker, ID: "w", Record: registry.FenceRecord{Leader: "m"}}
	b2.node.set(func(f *fakeNode) { f.reg = registry.RegState{Kind: registry.Fenced, Fence: fe} })
	select {
	case <-b2.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the guard did not end when fenced: it is stuck in a log write")
	}
}

// TestGuardFiresOnWakeFromFreeze: the client still says connected (it has not noticed yet),
// but the monotonic clock shows the node has not been in contact for the session timeout.
func TestGuardFiresOnWakeFromFreeze(t *testing.T) {
	t.Parallel()
	b := setupGuard(t, false)
	b.clock.Advance(30 * time.Second)
	b.wait(t, "stopping work after the freeze", func() bool { return b.lost.Load() == 1 && !b.guard.Active() })
}

func TestGuardKeepRunningDoesNotStopWork(t *testing.T) {
	t.Parallel()
	b := setupGuard(t, true)
	b.node.set(func(f *fakeNode) { f.status.State = registry.Disconnected })
	b.clock.Advance(time.Minute)
	b.wait(t, "inactive", func() bool { return !b.guard.Active() })
	time.Sleep(50 * time.Millisecond)
	if n := b.lost.Load(); n != 0 {
		t.Fatalf("keep-running stopped work %d times", n)
	}
}

func TestGuardEndsWhenFenced(t *testing.T) {
	t.Parallel()
	b := setupGuard(t, false)
	fe := &registry.FencedError{Role: registry.RoleWorker, ID: "w", Record: registry.FenceRecord{Leader: "m"}}
	b.node.set(func(f *fakeNode) { f.reg = registry.RegState{Kind: registry.Fenced, Fence: fe} })
	select {
	case err := <-b.done:
		if !errors.Is(err, registry.ErrFenced) {
			t.Fatalf("Run returned %v, want the fence", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the guard did not end when fenced")
	}
	if b.guard.Active() {
		t.Fatal("a fenced node is still active")
	}
}
