package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/internal/retry"
)

// Config is how a Client reaches ZooKeeper and where it keeps its znodes.
type Config struct {
	// Servers are the ZooKeeper servers as host:port. Required.
	Servers []string
	// Root is the absolute znode path under which everything lives. Defaults to "/zksched". It
	// may be nested ("/a/b"); Dial creates it and its ancestors. "/" is refused, so zksched never
	// mixes its znodes with those of other users of the ensemble.
	Root string
	// SessionTimeout is the session timeout asked of ZooKeeper. Defaults to 20 s. The server
	// clamps it into its minSessionTimeout..maxSessionTimeout; Client.SessionTimeout reports the
	// granted value, which is the one the node's watchdog must use. It should be at least
	// 2 × syncLimit × tickTime of the servers (see doc.go); Dial warns when it is not.
	SessionTimeout time.Duration
	// InfoInterval is how often a Registration rewrites its NodeInfo and re-checks its fence
	// marker, and how often an Election re-reads the candidates without waiting for a watch.
	// Defaults to 5 s. It bounds how long a lost watch can delay those checks, nothing else:
	// liveness is the session.
	InfoInterval time.Duration
	// Auth is the digest credential the cluster's znodes belong to (registry.auth-file). With
	// it the client authenticates every connection before anything else is sent on it, gives
	// every znode it creates the ACL "all rights for this user, read for everyone", and at Dial
	// sets that ACL on the layout's persistent znodes and the fence markers that lack it (made
	// by a version without ACLs), so nobody else can create, change or delete anything under
	// the root. Nil: znodes are open to anyone who reaches ZooKeeper (world:anyone, all
	// rights).
	Auth *Credentials
	// TLS, when set, makes every connection to ZooKeeper TLS (the servers' secureClientPort,
	// ZooKeeper 3.5+ with the Netty connection factory): the servers' certificates are checked
	// against its RootCAs, and its Certificates are the client certificate a server with
	// ssl.clientAuth=need asks for. Nil: plain TCP.
	TLS *tls.Config
	// ReadOnly is for clients that only inspect the tree (zksched zk): Dial creates nothing,
	// changes no ACL, and does not ask whether the tree is writable without Auth.
	ReadOnly bool
	// Logger receives the client's logs. The zero value logs nothing.
	Logger zerolog.Logger
}

// Credentials are a ZooKeeper digest user and password.
type Credentials struct {
	User     string
	Password string
}

// ACL returns the ACL of every znode zksched creates: with credentials, all rights for their
// user and read for everyone; without, all rights for everyone.
func (cr *Credentials) ACL() []zk.ACL {
	if cr == nil {
		return zk.WorldACL(zk.PermAll)
	}
	return append(zk.DigestACL(zk.PermAll, cr.User, cr.Password), zk.WorldACL(zk.PermRead)...)
}

// ErrCredentials: the tree's ACL does not let this client's credentials (or the lack of them)
// write under the root. It is a configuration problem: retrying does not help.
var ErrCredentials = errors.New("zookeeper acl refuses these credentials")

// maxResponseBytes caps one reply from ZooKeeper. Above the servers' default jute.maxbuffer
// (1 MiB, the most a znode's data can hold), room for the children of a large cluster's
// folders, and small enough that a hostile tree cannot balloon a node. A larger reply fails its
// request with zk.ErrResponseTooLarge (patched client, see internal/third_party/zk/PATCHES.md).
const maxResponseBytes = 4 << 20

func (cfg Config) withDefaults() (Config, error) {
	if len(cfg.Servers) == 0 {
		return cfg, errors.New("no zookeeper servers configured")
	}
	if cfg.Root == "" {
		cfg.Root = "/zksched"
	}
	if cfg.Root == "/" || !strings.HasPrefix(cfg.Root, "/") || path.Clean(cfg.Root) != cfg.Root {
		return cfg, fmt.Errorf("zookeeper root %q must be an absolute, clean path other than /", cfg.Root)
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 20 * time.Second
	}
	if cfg.InfoInterval <= 0 {
		cfg.InfoInterval = 5 * time.Second
	}
	return cfg, nil
}

// ConnState is where the client stands with its ZooKeeper session.
type ConnState int

// The connection states. Only Connected means requests are being answered.
const (
	// Disconnected: no server answers at the moment. The session may still be alive on the
	// ensemble (sessions even survive a whole-ensemble outage); only the server decides.
	Disconnected ConnState = iota
	// Connected: the client has a session and a server answers.
	Connected
	// Expired: the server said the session is gone (or the client gave up on a session no
	// server accepts any more, see doc.go). It stays so until the next session is established.
	Expired
	// Closed: Close was called.
	Closed
)

// String returns the state in lowercase, as logs show it.
func (s ConnState) String() string {
	switch s {
	case Disconnected:
		return "disconnected"
	case Connected:
		return "connected"
	case Expired:
		return "expired"
	case Closed:
		return "closed"
	}
	return fmt.Sprintf("ConnState(%d)", int(s))
}

// Status is a snapshot of the client's session.
type Status struct {
	State ConnState
	// SessionID is the session of a Connected client, and the last one it had otherwise. A
	// SessionID different from the one seen before means that session is gone, whether or not
	// Expired was observed in between: Changed is a broadcast, and states can follow each other
	// faster than a reader looks.
	SessionID int64
	// LastContact is as Client.LastContact.
	LastContact time.Time
}

// Client is one process's link to ZooKeeper: one session at a time, replaced after an expiry.
// All of zksched's ZooKeeper work goes through it. It is safe for concurrent use.
type Client struct {
	cfg    Config
	log    zerolog.Logger
	layout layout
	acl    []zk.ACL // of every znode the client creates: Config.Auth.ACL()

	mu      sync.Mutex
	conn    *zk.Conn
	cur     *connInfo // bookkeeping of conn; events of any other connection are ignored
	status  Status
	changed chan struct{}
	timeout time.Duration // negotiated
	// epoch counts the sessions established by this client, reconnects to the same session
	// included: a watch armed in an earlier epoch may have been lost.
	epoch uint64
	// handshaking, rejects and rejectSince detect a session the servers keep refusing (doc.go).
	handshaking bool
	rejects     int
	rejectSince time.Time
	watches     map[watchKey]*watch
	registered  map[string]bool // role/id of live Registrations
	closed      bool

	kick chan struct{} // wakes the supervisor; buffered 1
	quit chan struct{}
	wg   sync.WaitGroup
}

// dialRetry is the backoff of Dial while no ZooKeeper client can be started, and of its
// warnings while no server answers: 1 s doubling up to 30 s.
var dialRetry = retry.Policy{Initial: time.Second, Max: 30 * time.Second}

// Dial connects to ZooKeeper, waits for a session, and makes sure the persistent znodes of the
// layout exist. While no server answers it keeps trying, with a warning at growing intervals
// (1 s, 2 s, 4 s … 30 s), until ctx is done: a node started before ZooKeeper starts working once
// ZooKeeper appears.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:        cfg,
		log:        cfg.Logger.With().Str("component", "registry").Logger(),
		layout:     layout{root: cfg.Root},
		acl:        cfg.Auth.ACL(),
		changed:    make(chan struct{}),
		timeout:    cfg.SessionTimeout,
		watches:    make(map[watchKey]*watch),
		registered: make(map[string]bool),
		kick:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
	}
	servers := strings.Join(cfg.Servers, ",")
	started := time.Now()

	// zk.Connect itself fails only when a server name does not resolve.
	err = retry.Do(ctx, clockwork.NewRealClock(), dialRetry, func(context.Context) error {
		info := newConnInfo(cfg.SessionTimeout, len(cfg.Servers), cfg.TLS)
		c.mu.Lock()
		c.cur = info
		c.mu.Unlock()
		conn, err := c.open(info)
		if err == nil {
			c.mu.Lock()
			c.conn = conn
			c.mu.Unlock()
		}
		return err
	}, func(err error, _ int, wait time.Duration) {
		c.log.Warn().Err(err).Str("servers", servers).Dur("retry_in", wait).Msg("cannot start a zookeeper client; retrying")
	})
	if err != nil {
		return nil, fmt.Errorf("dial zookeeper %s: %w", servers, err)
	}

	warnAfter := dialRetry.Backoff()
	warn := time.NewTimer(warnAfter.Next())
	defer warn.Stop()
	for {
		ch := c.Changed()
		if c.Status().State == Connected {
			break
		}
		select {
		case <-ch:
		case <-warn.C:
			c.log.Warn().Str("servers", servers).Dur("waited", time.Since(started).Round(time.Second)).
				Msg("no zookeeper server answers yet; still trying")
			warn.Reset(warnAfter.Next())
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("dial zookeeper %s: %w", servers, ctx.Err())
		}
	}

	c.wg.Add(2)
	go c.supervise()
	go c.probe()

	// A connection lost while the layout is made is tried again shortly; another error ends
	// the dial.
	err = retry.Do(ctx, clockwork.NewRealClock(), retry.Policy{Initial: 200 * time.Millisecond}, func(ctx context.Context) error {
		err := c.ensurePaths(ctx)
		if err == nil {
			err = c.secureTree(ctx)
		}
		if err != nil && !connLoss(err) {
			return retry.Permanent(err)
		}
		return err
	}, nil)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("dial zookeeper %s: %w", servers, err)
	}
	st := c.Status()
	c.log.Info().Str("servers", servers).Str("root", cfg.Root).Str("session", sessionHex(st.SessionID)).
		Dur("session_timeout", c.SessionTimeout()).Msg("zookeeper session established")
	c.wg.Add(1)
	go c.checkServers()
	return c, nil
}

// Close ends the session (the server deletes its ephemeral znodes at once) and stops the
// client's goroutines. Registrations and Elections see the state Closed and stop.
func (c *Client) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	conn := c.conn
	c.mu.Unlock()
	close(c.quit)
	if conn != nil {
		conn.Close()
	}
	c.wg.Wait()
	c.mu.Lock()
	c.setStatusLocked(Closed, c.status.SessionID)
	c.mu.Unlock()
}

// Root returns the root znode path.
func (c *Client) Root() string { return c.cfg.Root }

// Status returns the current session status.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Changed returns a channel closed at the next change of Status().State or SessionID (not of
// LastContact). Get a new one after it fires.
func (c *Client) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// SessionTimeout returns the session timeout the server granted for the current session (the
// requested one is clamped by the server's minSessionTimeout..maxSessionTimeout).
//
// go-zookeeper v1.0.4 keeps the negotiated value private, so the client reads it off the wire:
// its dialer wraps each TCP connection and parses the connect response, the first bytes a
// server sends on a connection (see sniff.go).
func (c *Client) SessionTimeout() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timeout
}

// LastContact returns a time at or before which the server last received a request of this
// client, read from Now (CLOCK_BOOTTIME): the start of the last request that the ZooKeeper
// leader answered (a Sync probe runs every SessionTimeout/10, at most 1 s apart, and a session
// handshake, which a follower checks with the leader, counts too). The server expires a session
// no sooner than SessionTimeout after the last request it received, so a node cut off for
// SessionTimeout since LastContact may have been declared dead.
func (c *Client) LastContact() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status.LastContact
}

func (c *Client) noteContact(sentAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sentAt.After(c.status.LastContact) {
		c.status.LastContact = sentAt
	}
}

// setStatusLocked changes the state and broadcasts; c.mu is held.
func (c *Client) setStatusLocked(state ConnState, sid int64) {
	if c.status.State == state && c.status.SessionID == sid {
		return
	}
	c.status.State, c.status.SessionID = state, sid
	close(c.changed)
	c.changed = make(chan struct{})
}

// current returns the connection in use and its epoch.
func (c *Client) current() (*zk.Conn, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn, c.epoch
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// open starts a go-zookeeper connection whose events and handshakes are recorded in info.
func (c *Client) open(info *connInfo) (*zk.Conn, error) {
	// authOpt is an option whatever happens (go-zookeeper's option type is unexported).
	authOpt := zk.WithMaxBufferSize(maxResponseBytes)
	if a := c.cfg.Auth; a != nil {
		// Sent first on every connection of this go-zookeeper Conn, new sessions included; a
		// replaced connection (freshSession) is a new Conn and gets it the same way.
		authOpt = zk.WithAuth("digest", []byte(a.User+":"+a.Password))
	}
	conn, _, err := zk.Connect(c.cfg.Servers, c.cfg.SessionTimeout,
		// The event channel holds 6 events and drops the rest; the callback sees them all.
		zk.WithEventCallback(func(ev zk.Event) { c.onEvent(info, ev) }),
		zk.WithDialer(info.dial),
		zk.WithLogger(zkLogger{c.log}),
		zk.WithMaxBufferSize(maxResponseBytes),
		authOpt,
	)
	return conn, err
}

// onEvent is go-zookeeper's event callback. It runs on the library's connection goroutine, so it
// only updates state under a short lock and wakes the supervisor; it never blocks or logs.
func (c *Client) onEvent(info *connInfo, ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	select {
	case info.events <- struct{}{}:
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != info || c.closed {
		return
	}
	switch ev.State {
	case zk.StateConnected: // TCP only; the handshake follows
		c.handshaking = true
	case zk.StateHasSession:
		c.handshaking, c.rejects = false, 0
		c.sessionLocked(info)
	case zk.StateExpired:
		c.handshaking, c.rejects = false, 0
		c.setStatusLocked(Expired, c.status.SessionID)
	default:
		if ev.State == zk.StateDisconnected && c.handshaking {
			// A server took the TCP connection and dropped it during the handshake.
			c.handshaking = false
			if c.rejects++; c.rejects == 1 {
				c.rejectSince = time.Now()
			}
		}
		if c.status.State == Connected {
			c.setStatusLocked(Disconnected, c.status.SessionID)
		}
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// sessionLocked records a handshake that gave the client a session; c.mu is held.
func (c *Client) sessionLocked(info *connInfo) {
	h := info.lastHandshake()
	if h.timeout > 0 {
		c.timeout = h.timeout
		info.setSessionTimeout(h.timeout)
	}
	c.epoch++
	if h.sentAt.After(c.status.LastContact) {
		c.status.LastContact = h.sentAt
	}
	c.setStatusLocked(Connected, h.sessionID)
}

// supervise logs session changes and replaces a connection stuck on a session that no server
// accepts any more.
func (c *Client) supervise() {
	defer c.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var seen Status
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
		case <-tick.C:
		}
		st := c.Status()
		c.logChange(seen, st)
		seen = st
		switch {
		case c.sessionRefused():
			c.checkRefusedSession()
		case st.State == Expired:
			// go-zookeeper would open the new session itself, but only after a 1 s pause
			// (its pacing between rounds of servers). A node back from a cut learns whether
			// it was fenced only once it has a session: open one now.
			c.replaceConn("zookeeper session expired; opening a new one at once")
		}
	}
}

func (c *Client) logChange(before, now Status) {
	if before.State == now.State && before.SessionID == now.SessionID {
		return
	}
	switch now.State {
	case Connected:
		switch {
		case before.SessionID != 0 && before.SessionID != now.SessionID:
			c.log.Warn().Str("session", sessionHex(now.SessionID)).Str("previous_session", sessionHex(before.SessionID)).
				Msg("zookeeper session replaced; the previous one is gone")
		case before.State != Connected && before.SessionID != 0:
			c.log.Info().Str("session", sessionHex(now.SessionID)).Msg("zookeeper reconnected")
		}
	case Disconnected:
		c.log.Warn().Str("session", sessionHex(now.SessionID)).Time("last_contact", now.LastContact).
			Msg("zookeeper disconnected")
	case Expired:
		c.log.Warn().Str("session", sessionHex(now.SessionID)).Msg("zookeeper session expired")
	}
}

// sessionRefused reports a session whose handshakes servers keep dropping: at least three in a
// row, for at least a session timeout.
func (c *Client) sessionRefused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && c.status.State != Connected && c.rejects >= 3 && time.Since(c.rejectSince) >= c.timeout
}

// checkRefusedSession replaces a session that the servers refuse, and only such a session. A
// server drops a handshake without an answer in two cases that look the same on the wire: it
// serves, but the client has seen a later zxid than the server has (the server lost its data),
// so it refuses the session, and will refuse it forever (go-zookeeper issue #36); or it does
// not serve at all (no quorum, still starting), and the session may well be alive: the servers
// renew sessions when they serve again. A fresh connection, with no session and no last zxid,
// tells them apart: if it gets a session, its server's last zxid is read, and only a server
// behind the stuck session's last zxid is a refusal.
func (c *Client) checkRefusedSession() {
	c.mu.Lock()
	old, oldInfo, timeout, sid := c.conn, c.cur, c.timeout, c.status.SessionID
	c.mu.Unlock()
	seen := old.LastZxid()
	log := c.log.With().Str("session", sessionHex(sid)).Str("session_zxid", zxidHex(seen)).Logger()
	log.Warn().Msg("zookeeper servers keep dropping the session handshake; asking with a fresh session whether they refuse ours (go-zookeeper issue #36)")

	cand, info := c.freshSession(timeout)
	if cand == nil {
		c.resetRejects()
		log.Warn().Msg("no fresh zookeeper session either; the ensemble is not serving, keeping the session")
		return
	}
	// A reply carries the last zxid its server has applied; the Sync first brings a follower
	// that lags up to its leader, so that a lag is not taken for lost data.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	_, err := call(ctx, func() (bool, error) {
		if _, err := cand.Sync(c.cfg.Root); err != nil {
			return false, err
		}
		ok, _, err := cand.Exists(c.cfg.Root)
		return ok, err
	})
	cancel()
	has := cand.LastZxid()
	if err != nil || has >= seen {
		c.closeConn(cand)
		c.resetRejects()
		if err != nil {
			log.Warn().Err(err).Msg("cannot read what the fresh zookeeper session's server has seen; keeping the session")
		} else {
			log.Info().Str("server_zxid", zxidHex(has)).Msg("zookeeper serves and has seen what the session has; keeping the session")
		}
		return
	}
	if c.adopt(old, oldInfo, cand, info) {
		log.Warn().Str("server_zxid", zxidHex(has)).Str("new_session", sessionHex(c.Status().SessionID)).
			Msg("zookeeper servers are behind what the session has seen and refuse it; replaced it with a fresh one, the old one is treated as expired")
	}
}

// replaceConn opens a fresh connection beside an expired one, so that the node learns at once
// whether it was fenced. If no server gives it a session, nothing changes: go-zookeeper's own
// connection opens the new session when it can.
func (c *Client) replaceConn(why string) {
	c.mu.Lock()
	old, oldInfo, timeout := c.conn, c.cur, c.timeout
	c.mu.Unlock()
	c.log.Warn().Str("session", sessionHex(c.Status().SessionID)).Msg(why)
	cand, info := c.freshSession(timeout)
	if cand == nil {
		c.log.Warn().Msg("no fresh zookeeper session; the ensemble is not serving")
		return
	}
	if c.adopt(old, oldInfo, cand, info) {
		c.log.Warn().Str("session", sessionHex(c.Status().SessionID)).Msg("replaced the expired zookeeper session with a fresh one")
	}
}

// freshSession opens a connection with no session id and no last zxid beside the current one
// and waits until a server gives it a session, for at most twice the session timeout (5 s at
// least). It returns nil if none did.
func (c *Client) freshSession(timeout time.Duration) (*zk.Conn, *connInfo) {
	info := newConnInfo(timeout, len(c.cfg.Servers), c.cfg.TLS)
	cand, err := c.open(info)
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot open a fresh zookeeper connection")
		return nil, nil
	}
	deadline := time.NewTimer(max(2*timeout, 5*time.Second))
	defer deadline.Stop()
	for cand.State() != zk.StateHasSession {
		select {
		case <-info.events:
		case <-deadline.C:
			c.closeConn(cand)
			return nil, nil
		case <-c.quit:
			c.closeConn(cand)
			return nil, nil
		}
	}
	return cand, info
}

// adopt makes cand, which has a session, the client's connection in place of old, reported as
// an expiry of the old session and a new session. It does not if old has meanwhile got its
// session back (or was replaced, or the client closed): then cand is closed and adopt returns
// false.
func (c *Client) adopt(old *zk.Conn, oldInfo *connInfo, cand *zk.Conn, info *connInfo) bool {
	c.mu.Lock()
	if c.closed || c.cur != oldInfo || c.status.State == Connected {
		c.mu.Unlock()
		c.closeConn(cand)
		return false
	}
	c.conn, c.cur = cand, info
	c.handshaking, c.rejects = false, 0
	c.setStatusLocked(Expired, c.status.SessionID)
	c.sessionLocked(info)
	c.mu.Unlock()
	c.closeConn(old)
	return true
}

func (c *Client) resetRejects() {
	c.mu.Lock()
	c.rejects = 0
	c.mu.Unlock()
}

// closeConn closes a connection that is no longer current without waiting: go-zookeeper's Close
// can take seconds on a dead connection.
func (c *Client) closeConn(conn *zk.Conn) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		conn.Close()
	}()
}

// probe records LastContact: every SessionTimeout/10 (at most 1 s apart) it sends a Sync and,
// if it is answered, records when it was sent. A request answered must have been received after
// it was sent, so that time is never later than the server's. It is a Sync, not a read, because
// the leader answers it: a follower cut off from its leader still answers reads (until it gives
// the leader up, syncLimit × tickTime later) while the leader, which expires sessions, hears
// nothing of this client; LastContact must not run ahead of what the leader has seen.
func (c *Client) probe() {
	defer c.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-timer.C:
		}
		conn, _ := c.current()
		start := Now()
		if _, err := conn.Sync(c.cfg.Root); err == nil {
			c.noteContact(start)
		}
		timer.Reset(probeInterval(c.SessionTimeout()) - Now().Sub(start))
	}
}

func probeInterval(timeout time.Duration) time.Duration {
	return max(min(timeout/10, time.Second), 10*time.Millisecond)
}

// ensurePaths creates the persistent znodes of the layout that are missing, with the client's
// ACL. It asks before it creates, so a client without the credentials of a protected tree is
// not refused for znodes that already exist. A ReadOnly client creates nothing.
func (c *Client) ensurePaths(ctx context.Context) error {
	if c.cfg.ReadOnly {
		return nil
	}
	for _, p := range c.layout.persistent() {
		ok, _, err := c.exists(ctx, p)
		if err != nil {
			return fmt.Errorf("look up %s: %w", p, err)
		}
		if ok {
			continue
		}
		conn, _ := c.current()
		_, err = call(ctx, func() (string, error) { return conn.Create(p, nil, 0, c.acl) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// secureTree makes the tree match the client's credentials, once at Dial. With credentials, the
// root, its fixed folders and the fence markers get the client's ACL where they lack it (a
// version without ACLs made them world-writable): CREATE and DELETE on a folder decide who may
// add or remove its children, WRITE on a marker who may change it. Ephemeral znodes of nodes
// still running an older version keep their open ACL until those nodes restart; the folders
// above them are closed at once. Without credentials, a tree that is protected already is a
// clear error: this node could register nothing in it.
func (c *Client) secureTree(ctx context.Context) error {
	if c.cfg.ReadOnly {
		return nil
	}
	conn, _ := c.current()
	if c.cfg.Auth == nil {
		acl, err := call(ctx, func() ([]zk.ACL, error) {
			acl, _, err := conn.GetACL(c.cfg.Root)
			return acl, err
		})
		if err != nil {
			return fmt.Errorf("read the acl of %s: %w", c.cfg.Root, err)
		}
		if !worldCan(acl, zk.PermCreate) {
			return fmt.Errorf("%w: the registry root %s is protected by a zookeeper acl (%s) and this node has no credentials: set registry.auth-file", ErrCredentials, c.cfg.Root, formatACL(acl))
		}
		return nil
	}
	paths := c.layout.fixed()
	for _, role := range Roles {
		dir := c.layout.markersDir(role)
		ids, err := c.children(ctx, dir)
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		for _, id := range ids {
			paths = append(paths, dir+"/"+id)
		}
	}
	var changed []string
	for _, p := range paths {
		acl, err := call(ctx, func() ([]zk.ACL, error) {
			acl, _, err := conn.GetACL(p)
			return acl, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // a marker removed since the listing
		}
		if err != nil {
			return fmt.Errorf("read the acl of %s: %w", p, err)
		}
		if sameACL(acl, c.acl) {
			continue
		}
		_, err = call(ctx, func() (*zk.Stat, error) { return conn.SetACL(p, c.acl, -1) })
		if errors.Is(err, zk.ErrNoAuth) {
			return fmt.Errorf("set the acl of %s: %w (%w): its acl (%s) does not let user %q change it; the tree was protected with other credentials", p, ErrCredentials, err, formatACL(acl), c.cfg.Auth.User)
		}
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("set the acl of %s: %w", p, err)
		}
		changed = append(changed, p)
	}
	if len(changed) > 0 {
		c.log.Warn().Strs("znodes", changed).Str("acl", formatACL(c.acl)).
			Msg("set the registry acl on znodes made without it (by a version without acls, or another user of the ensemble)")
	}
	return nil
}

// worldCan reports whether acl gives everyone the permission perm.
func worldCan(acl []zk.ACL, perm int32) bool {
	for _, a := range acl {
		if a.Scheme == "world" && a.ID == "anyone" && a.Perms&perm != 0 {
			return true
		}
	}
	return false
}

func sameACL(a, b []zk.ACL) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// formatACL shows an ACL as zkCli.sh's getAcl does, one "scheme:id:perms" per entry, except
// that a digest's hash is left out: it is a plain SHA-1 of user:password, which ZooKeeper
// shows only to clients with ADMIN rights, and logs are read by more people.
func formatACL(acl []zk.ACL) string {
	parts := make([]string, len(acl))
	for i, a := range acl {
		id := a.ID
		if a.Scheme == "digest" {
			user, _, _ := strings.Cut(id, ":")
			id = user + ":…"
		}
		perms := ""
		for _, p := range []struct {
			bit  int32
			name string
		}{{zk.PermCreate, "c"}, {zk.PermDelete, "d"}, {zk.PermRead, "r"}, {zk.PermWrite, "w"}, {zk.PermAdmin, "a"}} {
			if a.Perms&p.bit != 0 {
				perms += p.name
			}
		}
		parts[i] = a.Scheme + ":" + Printable(id) + ":" + perms
	}
	return strings.Join(parts, ",")
}

// call runs a ZooKeeper request and stops waiting for it when ctx is done. go-zookeeper's calls
// take no context; an abandoned request still runs to its end, so only requests that are safe to
// complete later (reads, and writes that carry their own checks) go through call.
func call[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return fn()
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// connLoss reports an error that is no answer from the server: the request may or may not have
// been applied (read back), and it may work once a connection is back.
func connLoss(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.Is(err, zk.ErrClosing)
}

func sessionHex(sid int64) string { return fmt.Sprintf("%#x", sid) }

func zxidHex(zxid int64) string { return fmt.Sprintf("%#x", zxid) }

// zkLogger sends go-zookeeper's own messages (reconnect attempts, mostly) to the debug level.
type zkLogger struct{ log zerolog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug().Str("library", "go-zookeeper").Msgf(format, args...)
}
