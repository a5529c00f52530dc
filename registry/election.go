package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"
)

// Election is a master's candidacy in the leader election: an EPHEMERAL_SEQUENTIAL znode under
// election/ whose data is the master's id; the lowest sequence leads. It is safe for concurrent
// use.
type Election struct {
	r   *Registration
	c   *Client
	dir string
	log zerolog.Logger

	mu       sync.Mutex
	znode    string // own candidate znode, "" while not joined
	session  int64  // session that owns znode
	lowest   bool   // znode was the lowest candidate at the last look
	leader   string // leader's id at the last look
	changed  chan struct{}
	shown    leadership // what the last broadcast told
	guids    map[string]bool
	ignored  map[string]bool // children of election/ already reported as not candidates
	exitErr  error
	stop     chan struct{}
	stopOnce sync.Once
	first    chan struct{} // closed at the first join
	done     chan struct{}
}

type leadership struct {
	leader bool
	id     string
}

// candidatePrefix marks the candidate znodes; the GUID in the name (as in go-zookeeper's
// protected create) lets a candidate find its own znode after a connection loss.
const candidatePrefix = "_c_"

// Elect enters the master in the leader election and returns once it has a candidate znode. The
// znode is created through a fenced multi, like the registration: the marker path must not exist
// and the node's znode must, so a fenced master can never become a candidate again, not even
// through a request queued before an expiry.
//
// After a session expiry the Election rejoins, but only once the Registration has re-registered
// under the new session.
func (r *Registration) Elect(ctx context.Context) (*Election, error) {
	if r.role != RoleMaster {
		return nil, fmt.Errorf("elect: %s is a %s; only masters run for leader", r.id, r.role)
	}
	e := &Election{
		r:       r,
		c:       r.c,
		dir:     r.c.layout.electionDir(),
		log:     r.log,
		changed: make(chan struct{}),
		guids:   make(map[string]bool),
		ignored: make(map[string]bool),
		stop:    make(chan struct{}),
		first:   make(chan struct{}),
		done:    make(chan struct{}),
	}
	r.mu.Lock()
	switch {
	case r.state.Kind == Fenced:
		r.mu.Unlock()
		return nil, r.state.Fence
	case r.closing || r.state.Kind == Deregistered:
		r.mu.Unlock()
		return nil, fmt.Errorf("elect %s: registration closed", r.id)
	}
	r.elections[e] = struct{}{}
	r.mu.Unlock()

	go e.run()
	select {
	case <-e.first:
		return e, nil
	case <-e.done:
		if st := r.State(); st.Kind == Fenced {
			return nil, st.Fence
		}
		return nil, fmt.Errorf("elect %s: registration or client closed", r.id)
	case <-ctx.Done():
		e.stopOnce.Do(func() { close(e.stop) }) // the loop removes whatever it created
		return nil, fmt.Errorf("elect %s: %w", r.id, ctx.Err())
	}
}

// IsLeader reports whether this master leads: its znode was the lowest candidate at the last look,
// and the session that owns it is connected now. A disconnected master is not leader (it cannot
// know whether its session still lives); it may lead again if the same session comes back and
// the znode is still there. Leadership is never certain: the leader's writes carry their own
// check of ZnodePath (see Client.Fence).
func (e *Election) IsLeader() bool {
	e.mu.Lock()
	z, sid, lowest := e.znode, e.session, e.lowest
	e.mu.Unlock()
	if z == "" || !lowest {
		return false
	}
	st := e.c.Status()
	rs := e.r.State()
	return st.State == Connected && st.SessionID == sid && rs.Kind == Registered && rs.SessionID == sid
}

// Changed returns a channel closed at the next change of IsLeader or Leader. Get a new one after
// it fires.
func (e *Election) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// ZnodePath returns the own candidate znode ("" while not joined). The leader's fencing multis
// check that it still exists.
func (e *Election) ZnodePath() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.znode
}

// Leader returns the leader's id as last seen, "" if unknown.
func (e *Election) Leader() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader
}

// Close resigns: it deletes the candidate znode and stops watching. The background loop finishes
// the deletion even if ctx ends first.
func (e *Election) Close(ctx context.Context) error {
	e.stopOnce.Do(func() { close(e.stop) })
	select {
	case <-e.done:
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.exitErr
	case <-ctx.Done():
		return fmt.Errorf("resign %s: %w", e.r.id, ctx.Err())
	}
}

// run is the Election's one goroutine; like Registration.run it makes every request itself, in
// order, and abandons none.
func (e *Election) run() {
	defer e.exit()
	c, r := e.c, e.r
	ctx := context.Background()
	tick := time.NewTicker(c.cfg.InfoInterval)
	defer tick.Stop()
	var (
		watchCh <-chan struct{}
		retry   <-chan time.Time
		backoff = zkRetry.Backoff()
	)
	for {
		select {
		case <-e.stop:
			return
		default:
		}
		clientCh, regCh := c.Changed(), r.Changed()
		st, rs := c.Status(), r.State()
		if st.State == Closed || rs.Kind == Fenced || rs.Kind == Deregistered {
			return
		}
		e.mu.Lock()
		if e.znode != "" && st.SessionID != e.session {
			// The candidate znode is ephemeral: it went with its session.
			e.znode, e.session, e.lowest = "", 0, false
		}
		joined := e.znode != ""
		e.mu.Unlock()

		switch {
		case !joined && retry == nil && st.State == Connected && rs.Kind == Registered && rs.SessionID == st.SessionID:
			err := e.join(ctx)
			if errors.Is(err, ErrFenced) {
				return
			}
			if err != nil {
				wait := backoff.Next()
				e.log.Warn().Err(err).Dur("retry_in", wait).Msg("election candidacy not created yet")
				retry = time.After(wait)
			} else {
				backoff.Reset()
				select {
				case <-e.first:
				default:
					close(e.first)
				}
			}
			continue
		case joined && st.State == Connected:
			ch, err := e.look(ctx)
			if err != nil {
				e.log.Debug().Err(err).Msg("election look failed")
				// Joined means the last join succeeded and reset the backoff: a failed look
				// is tried again after the first wait.
				retry = time.After(zkRetry.Initial)
			} else {
				watchCh = ch
			}
		}
		e.broadcast(false)
		select {
		case <-e.stop:
			return
		case <-clientCh:
		case <-regCh:
		case <-watchCh:
			watchCh = nil
		case <-retry:
			retry = nil
		case <-tick.C:
		}
	}
}

// join creates the candidate znode in a fenced multi.
func (e *Election) join(ctx context.Context) error {
	c, r := e.c, e.r
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	guid := hex.EncodeToString(b[:])
	e.guids[guid] = true
	res, op, err := c.multi(ctx,
		&zk.CreateRequest{Path: r.marker, Acl: c.acl},
		&zk.DeleteRequest{Path: r.marker, Version: -1},
		&zk.CheckVersionRequest{Path: r.node, Version: -1},
		&zk.CreateRequest{Path: e.dir + "/" + candidatePrefix + guid + "-n_", Data: []byte(r.id),
			Acl: c.acl, Flags: zk.FlagEphemeral | zk.FlagSequence},
	)
	switch {
	case err == nil:
		return e.adopt(ctx, res[3].String)
	case op == 0 && errors.Is(err, zk.ErrNodeExists):
		return c.fencedError(ctx, r.role, r.id)
	case op == 2 && errors.Is(err, zk.ErrNoNode):
		return errRetry{fmt.Errorf("%s is not registered", r.node)}
	case connLoss(err):
		conn, _ := c.current()
		names, _, cerr := conn.Children(e.dir)
		if cerr != nil {
			return errRetry{cerr}
		}
		for _, n := range names {
			if strings.HasPrefix(n, candidatePrefix+guid) {
				return e.adopt(ctx, e.dir+"/"+n)
			}
		}
		return errRetry{err}
	}
	return fmt.Errorf("join election: %w", err)
}

// adopt takes p as the candidate znode if the current session owns it.
func (e *Election) adopt(ctx context.Context, p string) error {
	conn, _ := e.c.current()
	ok, stat, err := conn.Exists(p)
	switch {
	case err != nil:
		return errRetry{err}
	case !ok:
		return errRetry{fmt.Errorf("%s is gone", p)}
	case stat.EphemeralOwner == 0 || stat.EphemeralOwner != conn.SessionID():
		// Created under a session that has ended since; look() deletes it if it is still there.
		return errRetry{fmt.Errorf("%s belongs to session %s", p, sessionHex(stat.EphemeralOwner))}
	}
	e.mu.Lock()
	e.znode, e.session, e.lowest = p, stat.EphemeralOwner, false
	e.mu.Unlock()
	e.log.Info().Str("znode", p).Msg("joined the leader election")
	return nil
}

// look reads the candidates with a watch, removes stale candidates of its own, and decides who
// leads.
func (e *Election) look(ctx context.Context) (<-chan struct{}, error) {
	names, ch, err := e.c.childrenW(ctx, e.dir)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	own := strings.TrimPrefix(e.znode, e.dir+"/")
	e.mu.Unlock()
	conn, _ := e.c.current()
	var cands []string
	found := false
	for _, n := range names {
		if n == own {
			found = true
		} else if g, ok := candidateGUID(n); ok && e.guids[g] {
			// An earlier candidacy of this Election (a create answered too late): resign it.
			if err := conn.Delete(e.dir+"/"+n, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return nil, err
			}
			continue
		}
		if isCandidateName(n) {
			cands = append(cands, n)
		} else {
			e.ignore(n, "its name is not of the form the election creates")
		}
	}
	if !found {
		e.mu.Lock()
		e.znode, e.session, e.lowest = "", 0, false
		e.mu.Unlock()
		e.log.Warn().Str("znode", own).Msg("election candidacy vanished; rejoining")
		return nil, errRetry{fmt.Errorf("candidate %s vanished", own)}
	}
	sortCandidates(cands)
	var lowest, id string
	for _, n := range cands {
		if n == own {
			lowest, id = n, e.r.id
			break
		}
		data, ephemeral, err := e.c.getOwned(ctx, e.dir+"/"+n)
		if err != nil {
			return nil, err // gone since the listing: the watch fires, look again
		}
		if !ephemeral {
			// A candidacy lives as long as its master's session; a persistent znode of the
			// right name would lead for ever and stop every failover.
			e.ignore(n, "it is not ephemeral")
			continue
		}
		lowest, id = n, string(data)
		break
	}
	e.mu.Lock()
	wasLowest := e.lowest
	e.lowest, e.leader = lowest == own, id
	isLowest := e.lowest
	e.mu.Unlock()
	if isLowest && !wasLowest {
		e.log.Info().Str("znode", e.ZnodePath()).Msg("elected leader")
	}
	return ch, nil
}

// broadcast closes Changed when what IsLeader and Leader say has changed, or always if force.
func (e *Election) broadcast(force bool) {
	now := leadership{leader: e.IsLeader(), id: e.Leader()}
	e.mu.Lock()
	defer e.mu.Unlock()
	if now == e.shown && !force {
		return
	}
	e.shown = now
	close(e.changed)
	e.changed = make(chan struct{})
}

// exit resigns: it stops leading at once, then deletes the candidate znode and any stale one of
// this Election, and marks the end.
func (e *Election) exit() {
	e.mu.Lock()
	z := e.znode
	e.lowest = false
	e.mu.Unlock()
	e.broadcast(false)
	var errs []error
	if !e.c.isClosed() {
		conn, _ := e.c.current()
		if z != "" {
			if err := conn.Delete(z, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				errs = append(errs, fmt.Errorf("resign %s: %w", z, err))
			}
		}
		if len(e.guids) > 0 {
			names, _, err := conn.Children(e.dir)
			if err != nil {
				errs = append(errs, fmt.Errorf("resign: list %s: %w", e.dir, err))
			}
			for _, n := range names {
				if g, ok := candidateGUID(n); ok && e.guids[g] {
					if err := conn.Delete(e.dir+"/"+n, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
						errs = append(errs, fmt.Errorf("resign %s: %w", n, err))
					}
				}
			}
		}
	}
	if z != "" {
		e.log.Info().Str("znode", z).Msg("left the leader election")
	}
	e.mu.Lock()
	e.znode, e.session, e.leader = "", 0, ""
	e.exitErr = errors.Join(errs...)
	e.mu.Unlock()
	e.broadcast(true)
	e.r.mu.Lock()
	delete(e.r.elections, e)
	e.r.mu.Unlock()
	close(e.done)
}

// ignore logs, once per name, a child of election/ that does not count as a candidate.
func (e *Election) ignore(name, why string) {
	e.mu.Lock()
	seen := e.ignored[name]
	e.ignored[name] = true
	e.mu.Unlock()
	if !seen {
		e.log.Warn().Str("znode", Printable(e.dir+"/"+name)).Str("why", why).
			Msg("ignoring a znode under the election folder; it does not count for leadership")
	}
}

// candidateName is the form of a candidate's name: the prefix, the 32 hex digits of its GUID,
// "-n_", and the ten digits ZooKeeper's sequential create appends.
var candidateName = regexp.MustCompile(`^_c_[0-9a-f]{32}-n_[0-9]{10}$`)

// isCandidateName reports whether name is a candidate the election made. Any other child of
// election/ (made by hand, by another program, or by someone who reaches an unprotected
// ZooKeeper) is ignored for leadership.
func isCandidateName(name string) bool { return candidateName.MatchString(name) }

// sortCandidates orders candidate names by sequence, lowest (the leader) first.
func sortCandidates(names []string) {
	sort.Slice(names, func(i, j int) bool {
		a, _ := sequence(names[i])
		b, _ := sequence(names[j])
		return a < b
	})
}

// sequence returns the sequence number ZooKeeper appended to a candidate's name (ten digits).
func sequence(name string) (int64, bool) {
	if len(name) < 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[len(name)-10:], 10, 64)
	return n, err == nil && n >= 0
}

// candidateGUID returns the GUID of a candidate name "_c_<guid>-n_<seq>".
func candidateGUID(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, candidatePrefix)
	if !ok {
		return "", false
	}
	guid, _, ok := strings.Cut(rest, "-")
	return guid, ok && len(guid) == 32
}
