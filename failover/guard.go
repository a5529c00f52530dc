package failover

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
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

// bootClock is the clock of the failover package when none is injected: the real timers
// and tickers, with the time read from registry.Now rather than time.Now. registry.Now is the
// clock of Session.LastContact, CLOCK_BOOTTIME, which goes on while the machine is suspended,
// as the ZooKeeper servers' clocks do; the monotonic clock of time.Now stops. The guard's
// "cut off for the session timeout since the last contact" must count a suspend (a node that
// slept past its deadline may have been failed over), so every reading of the time in this
// package, the guard's and the coordinator's, comes from here: one clock, whose readings can
// be subtracted from one another and from LastContact. As a wall time (a fence record's
// LostAt and FencedAt, a marker's age) it is the wall clock at the process's start plus the
// time CLOCK_BOOTTIME counted since, close enough for a record a person reads.
//
// Timers and tickers run on the monotonic clock, as Go's do: after a suspend a tick due
// fires a tick's length after the wake at the latest, and the guard then reads, by Now,
// all the time that went by.
type bootClock struct{ clockwork.Clock }

func newBootClock() bootClock { return bootClock{clockwork.NewRealClock()} }

// Now is registry.Now.
func (bootClock) Now() time.Time { return registry.Now() }

// Since is the time registry.Now counted since t.
func (bootClock) Since(t time.Time) time.Duration { return registry.Now().Sub(t) }

// Until is the time registry.Now has to count until t.
func (bootClock) Until(t time.Time) time.Duration { return t.Sub(registry.Now()) }

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
	// Clock is the watchdog's time source and its tick; nil is the real one, which reads
	// the time from registry.Now (see bootClock). A clock given here must read the time on
	// the clock of Session.LastContact: the guard subtracts one from the other.
	Clock clockwork.Clock
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
		cfg.Clock = newBootClock()
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
	cutOff = g.cfg.Clock.Since(g.session.LastContact())
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
		// One timer a pass, stopped when the pass ends: while the guard waits, its tick is
		// the only thing it has on the clock, which a test's fake clock can count.
		tick := g.cfg.Clock.NewTimer(g.cfg.Tick)
		select {
		case <-ctx.Done():
			tick.Stop()
			return nil
		case <-sessionChanged:
		case <-memberChanged:
		case <-tick.Chan():
		}
		tick.Stop()
	}
}
