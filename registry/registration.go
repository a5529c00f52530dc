package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/internal/retry"
)

// zkRetry is the backoff of a Registration's registering and an Election's candidacy after
// a failed try: 100 ms doubling up to 2 s, back to 100 ms once one gets through.
var zkRetry = retry.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second}

// RegKind says where a Registration stands.
type RegKind int

// The registration states; see doc.go for the transitions.
const (
	// Registered: the node's znode exists, owned by RegState.SessionID.
	Registered RegKind = iota + 1
	// Lost: the session that owned the znode is gone (or the znode is); the Registration is
	// re-registering the same identity through the fenced multi.
	Lost
	// Fenced: the identity's fence marker exists. Final: the node must stop everything and exit.
	Fenced
	// Deregistered: Close was called (or the Client was closed).
	Deregistered
)

// String returns the state in lowercase, as logs show it.
func (k RegKind) String() string {
	switch k {
	case Registered:
		return "registered"
	case Lost:
		return "lost"
	case Fenced:
		return "fenced"
	case Deregistered:
		return "deregistered"
	}
	return fmt.Sprintf("RegKind(%d)", int(k))
}

// RegState is a snapshot of a Registration.
type RegState struct {
	Kind RegKind
	// SessionID owns the node's znode while Registered.
	SessionID int64
	// Fence is the marker while Fenced.
	Fence *FencedError
}

// Registration is a node's presence in nodes/<role>s. It keeps the znode's data fresh, watches
// the node's own fence marker, and re-registers the same identity after a session expiry. It is
// safe for concurrent use.
type Registration struct {
	c      *Client
	role   Role
	id     string
	node   string
	marker string
	key    string
	log    zerolog.Logger

	mu        sync.Mutex
	info      NodeInfo
	state     RegState
	changed   chan struct{}
	elections map[*Election]struct{}
	closing   bool
	exitErr   error

	dirty    chan struct{} // Update wants a write; buffered 1
	stop     chan struct{}
	stopOnce sync.Once
	first    chan struct{} // closed when the first registration is decided
	done     chan struct{}
}

// Register creates the node's ephemeral znode nodes/<role>s/<id> with info as data, through the
// fenced multi: Create(marker)+Delete(marker)+Create(znode, EPHEMERAL) in one transaction, which
// fails exactly when the marker failover-finish-nodes/<role>/<id> exists. Then it returns a
// *FencedError (errors.Is(err, ErrFenced)). It waits, retrying, while no server answers or while
// the znode is still held by an earlier session of this identity, until ctx is done.
//
// The znode is never created any other way: after an expiry go-zookeeper silently opens a new
// session and still sends the requests queued during the outage, so a plain Create could
// re-register a node that was fenced meanwhile.
func (c *Client) Register(ctx context.Context, info NodeInfo) (*Registration, error) {
	if !info.Role.valid() {
		return nil, fmt.Errorf("register: unknown role %q", info.Role)
	}
	if err := validID(info.ID); err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	key := string(info.Role) + "/" + info.ID
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, fmt.Errorf("register %s %s: client closed", info.Role, info.ID)
	case c.registered[key]:
		c.mu.Unlock()
		return nil, fmt.Errorf("register %s %s: already registered by this client", info.Role, info.ID)
	}
	c.registered[key] = true
	c.mu.Unlock()

	r := &Registration{
		c:         c,
		role:      info.Role,
		id:        info.ID,
		node:      c.layout.nodePath(info.Role, info.ID),
		marker:    c.layout.markerPath(info.Role, info.ID),
		key:       key,
		log:       c.log, // the node's logger already carries its node and role
		info:      info,
		state:     RegState{Kind: Lost},
		changed:   make(chan struct{}),
		elections: make(map[*Election]struct{}),
		dirty:     make(chan struct{}, 1),
		stop:      make(chan struct{}),
		first:     make(chan struct{}),
		done:      make(chan struct{}),
	}
	go r.run()
	select {
	case <-r.first:
		if st := r.State(); st.Kind == Fenced {
			select { // let the loop finish, so the identity can be tried again at once
			case <-r.done:
			case <-ctx.Done():
			}
			return nil, st.Fence
		}
		return r, nil
	case <-r.done:
		if st := r.State(); st.Kind == Fenced {
			return nil, st.Fence
		}
		return nil, fmt.Errorf("register %s %s: client closed", info.Role, info.ID)
	case <-ctx.Done():
		r.stopOnce.Do(func() { close(r.stop) }) // the loop removes whatever it created
		return nil, fmt.Errorf("register %s %s: %w", info.Role, info.ID, ctx.Err())
	}
}

// ID returns the node's identity.
func (r *Registration) ID() string { return r.id }

// Role returns the node's role.
func (r *Registration) Role() Role { return r.role }

// Info returns the node's data as last set.
func (r *Registration) Info() NodeInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info
}

// Update changes the node's data with fn (ID and Role stay as they are). The new data is written
// at once, in the background, and again on every refresh.
func (r *Registration) Update(fn func(*NodeInfo)) {
	r.mu.Lock()
	id, role := r.info.ID, r.info.Role
	fn(&r.info)
	r.info.ID, r.info.Role = id, role
	r.mu.Unlock()
	select {
	case r.dirty <- struct{}{}:
	default:
	}
}

// RefreshInfo keeps the node's data current for inspection (never for liveness) until ctx
// ends: every 2 seconds it sets Running to running(), Load to the host's load average and
// HeartbeatAt to now. It returns nil when ctx ends.
func (r *Registration) RefreshInfo(ctx context.Context, running func() int) error {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		r.Update(func(i *NodeInfo) {
			i.Running, i.Load, i.HeartbeatAt = running(), loadAverage(), time.Now()
		})
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// loadAverage is the host's one-minute load average from /proc/loadavg, or 0 where that
// cannot be read: the figure is for inspection only.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// State returns where the registration stands.
func (r *Registration) State() RegState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Changed returns a channel closed at the next change of State. Get a new one after it fires.
func (r *Registration) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// Close resigns the Registration's elections, stops its background work and deletes the node's
// znode. The background loop finishes the deletion even if ctx ends first.
func (r *Registration) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closing = true
	elections := make([]*Election, 0, len(r.elections))
	for e := range r.elections {
		elections = append(elections, e)
	}
	r.mu.Unlock()
	var errs []error
	for _, e := range elections {
		if err := e.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	r.stopOnce.Do(func() { close(r.stop) })
	select {
	case <-r.done:
		r.mu.Lock()
		errs = append(errs, r.exitErr)
		r.mu.Unlock()
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("deregister %s %s: %w", r.role, r.id, ctx.Err()))
	}
	return errors.Join(errs...)
}

func (r *Registration) setState(s RegState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = s
	close(r.changed)
	r.changed = make(chan struct{})
}

// run is the Registration's one goroutine: every ZooKeeper request about the node's znode is
// made here, in order, and none is abandoned half-way (a request go-zookeeper has queued is
// still sent later; waiting for its answer keeps the next request behind it).
func (r *Registration) run() {
	defer r.exit()
	c := r.c
	ctx := context.Background()
	tick := time.NewTicker(c.cfg.InfoInterval)
	defer tick.Stop()
	var (
		markerCh    <-chan struct{}
		markerEpoch uint64
		checkMarker bool
		forgedSeen  bool // a marker beside the live znode was reported
		writeNow    bool
		retry       <-chan time.Time
		backoff     = zkRetry.Backoff()
	)
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		clientCh := c.Changed()
		st := c.Status()
		rs := r.State()
		if st.State == Closed {
			return
		}
		switch {
		case rs.Kind == Registered && (st.SessionID != rs.SessionID || st.State == Expired):
			r.log.Warn().Str("session", sessionHex(rs.SessionID)).Msg("registration lost with its session; re-registering")
			r.setState(RegState{Kind: Lost})
			markerCh = nil
			continue

		case rs.Kind == Lost && st.State == Connected && retry == nil:
			sid, err := r.register(ctx)
			var fe *FencedError
			switch {
			case err == nil:
				r.log.Info().Str("session", sessionHex(sid)).Msg("registered")
				r.setState(RegState{Kind: Registered, SessionID: sid})
				r.firstDecided()
				backoff.Reset()
			case errors.As(err, &fe):
				r.fenced(fe)
				return
			default:
				wait := backoff.Next()
				r.log.Warn().Err(err).Dur("retry_in", wait).Msg("registration not done yet")
				retry = time.After(wait)
			}
			continue

		case rs.Kind == Registered && st.State == Connected:
			if _, epoch := c.current(); markerCh == nil || markerEpoch != epoch || checkMarker {
				exists, ch, err := c.existsW(ctx, r.marker)
				if err == nil {
					markerCh, markerEpoch, checkMarker = ch, epoch, false
					if !exists {
						forgedSeen = false
					} else if fe, ok := r.readMarker(ctx); ok {
						switch live, err := r.stillOwned(ctx, rs.SessionID); {
						case err != nil:
							checkMarker = true // undecided: look again at the next wake-up
						case !live:
							r.fenced(fe)
							return
						case !forgedSeen:
							forgedSeen = true
							r.log.Error().Str("marker", r.marker).Str("marker_data", Printable(string(fe.Raw))).
								Str("session", sessionHex(rs.SessionID)).
								Msg("a fence marker exists for this node while its znode is held by its live session; a leader fences only a node whose znode is gone, so no leader made it: not stopping (it will refuse this identity's re-registration after a session expiry); protect the registry with registry.auth-file")
						}
					}
				}
			}
			if writeNow {
				writeNow = false
				if err := r.write(ctx); errors.Is(err, zk.ErrNoNode) {
					r.log.Warn().Msg("node znode is gone; re-registering")
					r.setState(RegState{Kind: Lost})
					markerCh = nil
					continue
				}
			}
		}
		select {
		case <-r.stop:
			return
		case <-clientCh:
		case <-markerCh:
			checkMarker = true
		case <-retry:
			retry = nil
		case <-tick.C:
			checkMarker, writeNow = true, true
		case <-r.dirty:
			writeNow = true
		}
	}
}

// register runs the fenced multi once and decides its outcome. Undecided outcomes are errRetry.
func (r *Registration) register(ctx context.Context) (int64, error) {
	c := r.c
	data, err := r.data()
	if err != nil {
		return 0, err
	}
	_, op, err := c.multi(ctx,
		&zk.CreateRequest{Path: r.marker, Acl: c.acl},
		&zk.DeleteRequest{Path: r.marker, Version: -1},
		&zk.CreateRequest{Path: r.node, Data: data, Acl: c.acl, Flags: zk.FlagEphemeral},
	)
	switch {
	case err == nil:
		return r.owned(ctx)
	case op == 0 && errors.Is(err, zk.ErrNodeExists):
		return 0, c.fencedError(ctx, r.role, r.id)
	case op == 2 && errors.Is(err, zk.ErrNodeExists):
		// Ours if an earlier attempt committed without an answer; else an earlier session's.
		return r.owned(ctx)
	case errors.Is(err, zk.ErrNoNode):
		// A parent is missing: the tree was removed (or the server lost its data).
		if err := c.ensurePaths(ctx); err != nil {
			return 0, errRetry{err}
		}
		return 0, errRetry{fmt.Errorf("recreated the persistent znodes")}
	case connLoss(err):
		return r.owned(ctx)
	}
	return 0, fmt.Errorf("register %s: %w", r.node, err)
}

// owned reads the node's znode back: it is registered when the znode's ephemeral owner is the
// current session.
func (r *Registration) owned(ctx context.Context) (int64, error) {
	conn, _ := r.c.current()
	ok, stat, err := conn.Exists(r.node)
	switch {
	case err != nil:
		return 0, errRetry{fmt.Errorf("read back %s: %w", r.node, err)}
	case !ok:
		return 0, errRetry{fmt.Errorf("%s not created", r.node)}
	case stat.EphemeralOwner != 0 && stat.EphemeralOwner == conn.SessionID():
		return stat.EphemeralOwner, nil
	}
	return 0, errRetry{fmt.Errorf("%s is held by session %s, waiting for it to go", r.node, sessionHex(stat.EphemeralOwner))}
}

// stillOwned reports whether the node's znode exists now and belongs to session sid, read on a
// connection of that session after the marker was read. Then no leader made the marker: Fence
// succeeds only while the znode is absent, and the znode of sid was made by the fenced multi,
// which fails while the marker exists, so the znode has existed since before the marker came.
// An error means undecided (the connection went, or now has another session).
func (r *Registration) stillOwned(ctx context.Context, sid int64) (bool, error) {
	conn, _ := r.c.current()
	if conn.SessionID() != sid {
		return false, fmt.Errorf("session changed from %s", sessionHex(sid))
	}
	ok, stat, err := r.c.exists(ctx, r.node)
	if err != nil {
		return false, err
	}
	if cur, _ := r.c.current(); cur != conn || conn.SessionID() != sid {
		return false, fmt.Errorf("session changed from %s", sessionHex(sid))
	}
	return ok && stat.EphemeralOwner == sid, nil
}

// readMarker reads the node's marker; ok is false if it is gone again. The registration multi
// itself creates and deletes the marker path, which fires the watch: existence is decided by
// reading, never by the event.
func (r *Registration) readMarker(ctx context.Context) (*FencedError, bool) {
	err := r.c.fencedError(ctx, r.role, r.id)
	var fe *FencedError
	if errors.As(err, &fe) {
		return fe, true
	}
	return nil, false
}

func (r *Registration) fenced(fe *FencedError) {
	ev := r.log.Error().Str("leader", fe.Record.Leader).Time("fenced_at", fe.Record.FencedAt)
	if fe.ParseErr != nil {
		ev = ev.AnErr("marker_error", fe.ParseErr)
	}
	ev.Msg("node is fenced: a leader failed it over; it must stop and never register again")
	r.setState(RegState{Kind: Fenced, Fence: fe})
	r.firstDecided()
}

func (r *Registration) firstDecided() {
	select {
	case <-r.first:
	default:
		close(r.first)
	}
}

// data is the znode data with a fresh HeartbeatAt.
func (r *Registration) data() ([]byte, error) {
	r.mu.Lock()
	r.info.HeartbeatAt = time.Now()
	info := r.info
	r.mu.Unlock()
	data, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("encode node info: %w", err)
	}
	return data, nil
}

func (r *Registration) write(ctx context.Context) error {
	data, err := r.data()
	if err != nil {
		return err
	}
	conn, _ := r.c.current()
	_, err = call(ctx, func() (*zk.Stat, error) { return conn.Set(r.node, data, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		r.log.Debug().Err(err).Msg("node info not written")
	}
	return err
}

// exit deletes the node's znode (whatever the loop may have created) and marks the end.
func (r *Registration) exit() {
	var err error
	if !r.c.isClosed() {
		conn, _ := r.c.current()
		if err = conn.Delete(r.node, -1); errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("deregister %s: %w", r.node, err)
		}
	}
	r.mu.Lock()
	r.exitErr = err
	r.mu.Unlock()
	if r.State().Kind != Fenced {
		r.setState(RegState{Kind: Deregistered})
		r.log.Info().Msg("deregistered")
	}
	r.c.mu.Lock()
	delete(r.c.registered, r.key)
	r.c.mu.Unlock()
	close(r.done)
}
