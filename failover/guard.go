package failover

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/registry"
)

// Session is what the guard reads of the node's ZooKeeper client.
type Session interface {
	Status() registry.Status
	Changed() <-chan struct{}
	// SessionTimeout is the negotiated timeout of the current session.
	SessionTimeout() time.Duration
	// LastContact is a time by registry.Now at or before the server's last receipt of a
	// request.
	LastContact() time.Time
}

// Membership is what the guard reads of the node's registration.
type Membership interface {
	State() registry.RegState
	Changed() <-chan struct{}
}

// Clock is the guard's time source, injected so tests control the watchdog. The real one
// reads registry.Now, the clock of LastContact, which counts a suspend of the machine.
type Clock interface {
	Now() time.Time
	// After is time.After.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return registry.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// GuardConfig configures a Guard.
type GuardConfig struct {
	// KeepRunning is registry.on-lost = keep-running: when cut off past the session timeout
	// the node stops taking work but lets running work go on.
	KeepRunning bool
	// OnLost is called once each time the node has been cut off from ZooKeeper for the session
	// timeout since its last contact: the session may have expired and the leader may be
	// about to give the node's work to others. A worker stops its running tasks (they are
	// handed back under its own token); it is not called with KeepRunning.
	OnLost func()
	Log    zerolog.Logger
	// Clock defaults to the real one.
	Clock Clock
	// Tick bounds how late the watchdog notices a deadline; 100 ms if zero. After the
	// process wakes from a freeze (or the machine from a suspend) it fires within a tick, and
	// the clock shows the time that went by.
	Tick time.Duration
}

// Guard is the node side of the protocol. It says when the node may take work (Active: it is
// registered under its current, live session), runs the watchdog that stops the node's work
// once it has been cut off for the session timeout, and ends the node when it is fenced.
//
// Lost is sticky: once the watchdog has found the node cut off past the deadline, Active stays
// false until the watchdog has seen the node live again, and every tick in between stops the
// running work again (OnLost), so work started by a claim that was in flight at the deadline is
// stopped too. The watchdog acts before it logs: a log write may block.
type Guard struct {
	cfg     GuardConfig
	session Session
	member  Membership

	mu      sync.Mutex
	active  bool // the last Active the watchdog published (Changed fires on its changes)
	lost    bool // cut off past the deadline and not seen live since, or fenced: no more work
	changed chan struct{}
}

// NewGuard returns a guard over a node's session and registration.
func NewGuard(s Session, m Membership, cfg GuardConfig) *Guard {
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	return &Guard{cfg: cfg, session: s, member: m, changed: make(chan struct{})}
}

// Active reports whether the node may take and advance work now. It is decided at each call
// from the session and the registration, not read from the watchdog's last tick: a caller that
// asks right after a claim returns (the deadline may have passed while the claim waited) gets
// the answer of that moment.
func (g *Guard) Active() bool {
	g.mu.Lock()
	lost := g.lost
	g.mu.Unlock()
	if lost {
		return false
	}
	live, _ := g.liveNow()
	return live
}

// liveNow says whether the node is registered under its current session, connected, and in
// contact with the server within the session timeout; cutOff is the time since that contact.
func (g *Guard) liveNow() (live bool, cutOff time.Duration) {
	st, rs := g.session.Status(), g.member.State()
	cutOff = g.cfg.Clock.Now().Sub(g.session.LastContact())
	live = st.State == registry.Connected && rs.Kind == registry.Registered &&
		rs.SessionID == st.SessionID && cutOff < g.session.SessionTimeout()
	return live, cutOff
}

// Changed is closed at the next change of Active.
func (g *Guard) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

func (g *Guard) set(active, lost bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lost = lost
	if g.active != active {
		g.active = active
		close(g.changed)
		g.changed = make(chan struct{})
	}
}

// Run watches the node until ctx ends (nil) or the node is fenced: then it returns the
// *registry.FencedError, and the caller stops everything and exits with code 75.
func (g *Guard) Run(ctx context.Context) error {
	lost := false
	for {
		// The change channels are taken before the state is read: a change between the read
		// and the wait then closes a channel this pass waits on, instead of one made after it
		// that this pass never sees (it would be noticed only at the next tick).
		sessionChanged, memberChanged := g.session.Changed(), g.member.Changed()
		if rs := g.member.State(); rs.Kind == registry.Fenced {
			g.set(false, true)
			return rs.Fence
		}
		timeout := g.session.SessionTimeout()
		live, cutOff := g.liveNow()
		switch {
		case cutOff >= timeout:
			first := !lost
			lost = true
			g.set(false, true)
			if !g.cfg.KeepRunning && g.cfg.OnLost != nil {
				g.cfg.OnLost()
			}
			if first {
				ev := g.cfg.Log.Warn().Dur("cut_off", cutOff).Dur("session_timeout", timeout)
				if g.cfg.KeepRunning {
					ev.Msg("cut off from zookeeper past the session timeout; taking no work, running work goes on (on-lost: keep-running)")
				} else {
					ev.Msg("cut off from zookeeper past the session timeout; stopping running work")
				}
			}
		case live && lost:
			lost = false
			g.set(true, false)
			g.cfg.Log.Info().Int64("session", g.session.Status().SessionID).Msg("registered again; taking work")
		default:
			g.set(live && !lost, lost)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-sessionChanged:
		case <-memberChanged:
		case <-g.cfg.Clock.After(g.cfg.Tick):
		}
	}
}
