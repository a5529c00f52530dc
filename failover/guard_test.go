package failover

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
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
	// gen counts the changes made by set; taken is the gen of the last change channel handed
	// out by Changed, and took is signalled each time Changed hands one out.
	gen, taken int
	took       chan struct{}
}

func newFakeNode(clock clockwork.Clock) *fakeNode {
	return &fakeNode{
		status:   registry.Status{State: registry.Connected, SessionID: 1, LastContact: clock.Now()},
		reg:      registry.RegState{Kind: registry.Registered, SessionID: 1},
		timeout:  10 * time.Second,
		changedC: make(chan struct{}),
		took:     make(chan struct{}, 1),
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
	f.taken = f.gen
	select {
	case f.took <- struct{}{}:
	default:
	}
	return f.changedC
}
func (f *fakeNode) SessionTimeout() time.Duration { return f.timeout }
func (f *fakeNode) LastContact() time.Time        { return f.Status().LastContact }

// set applies fn and announces the change; it returns the change's number.
func (f *fakeNode) set(fn func(*fakeNode)) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
	close(f.changedC)
	f.changedC = make(chan struct{})
	f.gen++
	return f.gen
}

// takenSince says whether a change channel was handed out after change gen.
func (f *fakeNode) takenSince(gen int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.taken >= gen
}

type guardBundle struct {
	clock *clockwork.FakeClock
	node  *fakeNode
	guard *Guard
	lost  atomic.Int32
	// lostC is signalled at each OnLost.
	lostC chan struct{}
	done  chan error
}

func setupGuard(t *testing.T, keepRunning bool) *guardBundle {
	t.Helper()
	return setupGuardWith(t, GuardConfig{KeepRunning: keepRunning, Log: zerolog.Nop()})
}

// setupGuardWith runs a guard with cfg, on the bundle's fake clock and counting OnLost, and
// returns once the guard has made its first pass and waits on its tick.
func setupGuardWith(t *testing.T, cfg GuardConfig) *guardBundle {
	t.Helper()
	b := &guardBundle{clock: clockwork.NewFakeClockAt(time.Unix(1_800_000_000, 0)), lostC: make(chan struct{}, 1),
		done: make(chan error, 1)}
	b.node = newFakeNode(b.clock)
	cfg.Clock = b.clock
	cfg.OnLost = func() {
		b.lost.Add(1)
		select {
		case b.lostC <- struct{}{}:
		default:
		}
	}
	b.guard = NewGuard(b.node, b.node, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { b.done <- b.guard.Run(ctx) }()
	t.Cleanup(cancel)
	b.waiting(t)
	if !b.guard.Active() {
		t.Fatal("guard: not active at start")
	}
	return b
}

// waiting returns once the guard waits on its tick: it has a timer on the fake clock only
// while it waits between two passes (Run), so the next Advance past the tick reaches it.
func (b *guardBundle) waiting(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("guard: never waited on its tick")
	}
}

// advance moves the fake clock on by d, at least the guard's tick, and returns once the guard
// has made the pass that the tick woke and waits again.
func (b *guardBundle) advance(t *testing.T, d time.Duration) {
	t.Helper()
	b.waiting(t)
	b.clock.Advance(d)
	b.waiting(t)
}

// change applies fn to the node and returns once the guard has made a pass that saw the
// change, and waits again.
func (b *guardBundle) change(t *testing.T, fn func(*fakeNode)) {
	t.Helper()
	gen := b.node.set(fn)
	deadline := time.After(10 * time.Second)
	for !b.node.takenSince(gen) {
		select {
		case <-b.node.took:
		case <-deadline:
			t.Fatal("guard: never looked at the node after a change")
		}
	}
	// The pass that took the new change channel has stopped its last tick's timer: the
	// timer it waits on now is the one it starts at its end.
	b.waiting(t)
}

// waitLost returns once OnLost has been called n times in all.
func (b *guardBundle) waitLost(t *testing.T, n int32) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for b.lost.Load() < n {
		select {
		case <-b.lostC:
		case <-deadline:
			t.Fatalf("guard: work stopped %d times, want %d", b.lost.Load(), n)
		}
	}
}

func (b *guardBundle) wantLost(t *testing.T, n int32, when string) {
	t.Helper()
	if got := b.lost.Load(); got != n {
		t.Fatalf("work stopped %d times %s, want %d", got, when, n)
	}
}

func TestGuardStopsClaimingAtOnceAndWorkAtTheDeadline(t *testing.T) {
	t.Parallel()
	b := setupGuard(t, false)
	b.change(t, func(f *fakeNode) { f.status.State = registry.Disconnected })
	if b.guard.Active() {
		t.Fatal("active once disconnected")
	}
	b.advance(t, 9*time.Second)
	b.wantLost(t, 0, "9s after the last contact")
	b.advance(t, time.Second-time.Millisecond)
	b.wantLost(t, 0, "just before the session timeout since the last contact")
	b.advance(t, 100*time.Millisecond) // the next tick, past the deadline
	b.wantLost(t, 1, "at the first tick past the deadline")
	// Back with a new session, registered again: active again; no more stops.
	b.change(t, func(f *fakeNode) {
		f.status = registry.Status{State: registry.Connected, SessionID: 2, LastContact: b.clock.Now()}
		f.reg = registry.RegState{Kind: registry.Registered, SessionID: 2}
	})
	if !b.guard.Active() {
		t.Fatal("not active after re-registering")
	}
	b.advance(t, 100*time.Millisecond)
	b.wantLost(t, 1, "after the node was live again")
}

// TestGuardStopsWorkAtEveryTickWhileLost: work started after the first stop (a claim that was in
// flight at the deadline) is stopped at the next tick, not left running.
func TestGuardStopsWorkAtEveryTickWhileLost(t *testing.T) {
	t.Parallel()
	b := setupGuard(t, false)
	b.change(t, func(f *fakeNode) { f.status.State = registry.Disconnected })
	b.advance(t, 10*time.Second)
	b.wantLost(t, 1, "at the deadline")
	for want := int32(2); want <= 4; want++ {
		b.advance(t, 100*time.Millisecond)
		b.wantLost(t, want, "at the next tick")
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
	// Contact again, same session (the server never expired it): active again once the
	// watchdog has looked.
	b.change(t, func(f *fakeNode) { f.status.LastContact = b.clock.Now() })
	if !b.guard.Active() {
		t.Fatal("not active once the watchdog saw the node live")
	}
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
	b.change(t, func(f *fakeNode) { f.status.State = registry.Disconnected })
	b.clock.Advance(10 * time.Second) // the guard then blocks in its log write: no waiting
	b.waitLost(t, 1)
	if b.guard.Active() {
		t.Fatal("active after the deadline")
	}

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
	b.advance(t, 30*time.Second)
	b.wantLost(t, 1, "at the first tick after the freeze")
	if b.guard.Active() {
		t.Fatal("active after the freeze")
	}
}

func TestGuardKeepRunningDoesNotStopWork(t *testing.T) {
	t.Parallel()
	b := setupGuard(t, true)
	b.change(t, func(f *fakeNode) { f.status.State = registry.Disconnected })
	b.advance(t, time.Minute)
	if b.guard.Active() {
		t.Fatal("active past the deadline")
	}
	b.advance(t, 100*time.Millisecond)
	b.wantLost(t, 0, "with keep-running")
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

// TestGuardAndCoordinatorReadTheBootClock: without an injected clock both read the time from
// registry.Now, the clock of LastContact, which counts a suspend of the machine; time.Now's
// monotonic clock does not.
func TestGuardAndCoordinatorReadTheBootClock(t *testing.T) {
	t.Parallel()
	node := newFakeNode(clockwork.NewRealClock())
	for name, c := range map[string]clockwork.Clock{
		"guard":       NewGuard(node, node, GuardConfig{}).cfg.Clock,
		"coordinator": NewCoordinator(CoordinatorConfig{}, nil, nil, nil).cfg.Clock,
	} {
		if _, ok := c.(bootClock); !ok {
			t.Errorf("the %s's default clock is %T, want bootClock", name, c)
		}
		before := registry.Now()
		now := c.Now()
		if now != now.Round(0) || now.Before(before) || now.Sub(before) > time.Second {
			t.Errorf("the %s's clock read %v right after registry.Now read %v; want a reading of registry.Now", name, now, before)
		}
	}
}
