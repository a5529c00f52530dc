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
	// LastContact is a monotonic time at or before the server's last receipt of a request.
	LastContact() time.Time
}

// Membership is what the guard reads of the node's registration.
type Membership interface {
	State() registry.RegState
	Changed() <-chan struct{}
}

// Clock is the guard's time source, injected so tests control the watchdog.
type Clock interface {
	Now() time.Time
	// After is time.After.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
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
	// process wakes from a freeze it fires at once, since the monotonic clock went on.
	Tick time.Duration
}

// Guard is the node side of the protocol. It says when the node may take work (Active: it is
// registered under its current, live session), runs the watchdog that stops the node's work
// once it has been cut off for the session timeout, and ends the node when it is fenced.
type Guard struct {
	cfg     GuardConfig
	session Session
	member  Membership

	mu      sync.Mutex
	active  bool
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

// Active reports whether the node may take and advance work now.
func (g *Guard) Active() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active
}

// Changed is closed at the next change of Active.
func (g *Guard) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

func (g *Guard) setActive(a bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active != a {
		g.active = a
		close(g.changed)
		g.changed = make(chan struct{})
	}
}

// Run watches the node until ctx ends (nil) or the node is fenced: then it returns the
// *registry.FencedError, and the caller stops everything and exits with code 75.
func (g *Guard) Run(ctx context.Context) error {
	lost := false
	for {
		st, rs := g.session.Status(), g.member.State()
		if rs.Kind == registry.Fenced {
			g.setActive(false)
			g.cfg.Log.Error().Str("fenced_by", rs.Fence.Record.Leader).Time("fenced_at", rs.Fence.Record.FencedAt).
				Msg("this node was fenced: the leader failed it over; stopping everything and exiting")
			return rs.Fence
		}
		timeout := g.session.SessionTimeout()
		cutOff := g.cfg.Clock.Now().Sub(g.session.LastContact())
		live := st.State == registry.Connected && rs.Kind == registry.Registered &&
			rs.SessionID == st.SessionID && cutOff < timeout
		switch {
		case cutOff >= timeout && !lost:
			lost = true
			ev := g.cfg.Log.Warn().Dur("cut_off", cutOff).Dur("session_timeout", timeout)
			if g.cfg.KeepRunning {
				ev.Msg("cut off from zookeeper past the session timeout; taking no work, running work goes on (on-lost: keep-running)")
			} else {
				ev.Msg("cut off from zookeeper past the session timeout; stopping running work")
			}
			g.setActive(false)
			if !g.cfg.KeepRunning && g.cfg.OnLost != nil {
				g.cfg.OnLost()
			}
		case live && lost:
			lost = false
			g.cfg.Log.Info().Int64("session", st.SessionID).Msg("registered again; taking work")
		}
		g.setActive(live)
		select {
		case <-ctx.Done():
			return nil
		case <-g.session.Changed():
		case <-g.member.Changed():
		case <-g.cfg.Clock.After(g.cfg.Tick):
		}
	}
}
