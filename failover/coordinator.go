package failover

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/faultinject"
	"github.com/zksched/zksched/internal/signal"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/registry"
)

// Registry is what the coordinator does with ZooKeeper (registry.Client).
type Registry interface {
	Members(ctx context.Context, role registry.Role) ([]string, <-chan struct{}, error)
	MemberInfo(ctx context.Context, role registry.Role, id string) (registry.NodeInfo, error)
	Fence(ctx context.Context, electionZnode string, rec registry.FenceRecord) error
	Marker(ctx context.Context, role registry.Role, id string) (registry.FenceRecord, bool, error)
	Markers(ctx context.Context) ([]registry.MarkerEntry, error)
	FinishMarker(ctx context.Context, electionZnode string, rec registry.FenceRecord) error
	DeleteMarker(ctx context.Context, electionZnode string, role registry.Role, id string) error
}

// Leadership is the master's candidacy (registry.Election).
type Leadership interface {
	IsLeader() bool
	Changed() <-chan struct{}
	ZnodePath() string
}

// CoordinatorConfig configures a Coordinator.
type CoordinatorConfig struct {
	// ID is the master's identity, recorded as the leader in fence records.
	ID string
	// Delay is failover.delay: how long after the leader sees a node's znode gone it fails the
	// node over. It covers the node's own stop (watchdog tick and kill grace). A worker that
	// published a longer kill grace in its NodeInfo gets that plus conf.KillGraceMargin instead.
	Delay time.Duration
	// MarkerRetention is how long finished markers are kept.
	MarkerRetention time.Duration
	// SweepInterval is the period of the full resync, which also reads the markers.
	SweepInterval time.Duration
	Log           zerolog.Logger
	// Clock is the time source of the delays, the sweeps and the fence records' times; nil
	// is the real one, which reads the time from registry.Now, as the guard's does (see
	// bootClock).
	Clock clockwork.Clock
}

// Coordinator is the leader side of the protocol (see doc.go).
type Coordinator struct {
	cfg  CoordinatorConfig
	reg  Registry
	lead Leadership
	db   *dao.DB

	// passed is a test signal: the leader's loop signals a copy of the term's state at the
	// end of each pass, before it waits again.
	passed signal.Test[termState]
}

// NewCoordinator returns a coordinator for a master.
func NewCoordinator(cfg CoordinatorConfig, reg Registry, lead Leadership, db *dao.DB) *Coordinator {
	if cfg.Clock == nil {
		cfg.Clock = newBootClock()
	}
	return &Coordinator{cfg: cfg, reg: reg, lead: lead, db: db}
}

// Run fails lost nodes over whenever this master leads, until ctx ends; then it returns nil.
// A failover that fails is retried, never returned.
func (c *Coordinator) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		ch := c.lead.Changed()
		if c.lead.IsLeader() {
			c.runLeader(ctx)
			continue
		}
		select {
		case <-ctx.Done():
		case <-ch:
		}
	}
	return nil
}

// nodeKey names an identity in a role.
type nodeKey struct {
	role registry.Role
	id   string
}

// term is one period of leadership. Its state is rebuilt from ZooKeeper and PostgreSQL when
// it starts: nothing carries over from an earlier term or an earlier leader.
type term struct {
	c *Coordinator
	// members are the registered identities as of the last resync.
	members map[nodeKey]bool
	// absent holds the identities seen lost, with when the leader first saw that. They are
	// failed over Delay after it, unless they come back.
	absent map[nodeKey]time.Time
	// fenced holds the identities with a marker, and whether its failover finished.
	fenced map[nodeKey]bool
	// killGrace holds the kill grace each worker published in its NodeInfo, read while it was
	// registered: once it is lost its znode is gone. A worker lost before this term began was
	// never seen and gets Delay.
	killGrace map[nodeKey]time.Duration
	// notFence holds the identities with a marker while registered, already reported.
	notFence map[nodeKey]bool
}

// termState is a copy of a term's state, for the passed test signal.
type termState struct {
	members   map[nodeKey]bool
	absent    map[nodeKey]time.Time
	fenced    map[nodeKey]bool
	killGrace map[nodeKey]time.Duration
	notFence  map[nodeKey]bool
}

func (t *term) state() termState {
	return termState{members: maps.Clone(t.members), absent: maps.Clone(t.absent), fenced: maps.Clone(t.fenced),
		killGrace: maps.Clone(t.killGrace), notFence: maps.Clone(t.notFence)}
}

var errNotLeader = errors.New("no longer the leader")

func (c *Coordinator) runLeader(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // end the term as soon as leadership goes
		for {
			ch := c.lead.Changed()
			if !c.lead.IsLeader() {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-ch:
			}
		}
	}()
	c.cfg.Log.Info().Msg("leading failover")
	t := &term{c: c, absent: map[nodeKey]time.Time{}, fenced: map[nodeKey]bool{}, killGrace: map[nodeKey]time.Duration{},
		notFence: map[nodeKey]bool{}}
	nextSweep := c.cfg.Clock.Now() // a new term starts with a full sweep
	for ctx.Err() == nil {
		now := c.cfg.Clock.Now()
		sweep := !now.Before(nextSweep)
		watches, err := t.resync(ctx, sweep)
		if err == nil {
			if sweep {
				nextSweep = now.Add(c.cfg.SweepInterval)
			}
			err = t.failDue(ctx)
		}
		if errors.Is(err, errNotLeader) {
			c.cfg.Log.Info().Msg("lost the leadership; stopping failover")
			return
		}
		wait := nextSweep.Sub(c.cfg.Clock.Now())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.cfg.Log.Warn().Err(err).Msg("failover resync failed; retrying")
			wait = min(wait, time.Second)
		}
		if next, ok := t.nextDue(); ok {
			wait = min(wait, next)
		}
		c.passed.SignalWith(t.state)
		// One timer a pass, stopped when the pass ends (see Guard.Run).
		timer := c.cfg.Clock.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
		case <-watches[0]:
		case <-watches[1]:
		case <-timer.Chan():
		}
		timer.Stop()
	}
}

// resync compares what ZooKeeper and PostgreSQL say and updates the absent set. On a sweep it
// also reads every marker, learning of fenced identities and removing old markers. It returns
// the membership watches of both roles, closed at the next change.
func (t *term) resync(ctx context.Context, sweep bool) ([2]<-chan struct{}, error) {
	c := t.c
	now := c.cfg.Clock.Now()
	members := map[nodeKey]bool{}
	var watches [2]<-chan struct{}
	for i, role := range registry.Roles {
		ids, ch, err := c.reg.Members(ctx, role)
		if err != nil {
			return watches, fmt.Errorf("list %ss: %w", role, err)
		}
		watches[i] = ch
		for _, id := range ids {
			members[nodeKey{role, id}] = true
		}
	}
	t.readKillGraces(ctx, members)
	if sweep || t.members == nil {
		if err := t.readMarkers(ctx, members); err != nil {
			return watches, err
		}
	}
	// Nodes that were registered at the last look and are gone now: their sessions ended.
	for k := range t.members {
		if !members[k] {
			t.lose(k, now, "znode gone")
		}
	}
	// Identities owning work in PostgreSQL that are neither registered nor known lost: their
	// loss happened before this term, or its event was missed.
	workers, masters, err := c.db.WorkOwners(ctx)
	if err != nil {
		return watches, err
	}
	for _, w := range workers {
		t.ownerSeen(nodeKey{registry.RoleWorker, w}, members, now)
	}
	for _, m := range masters {
		t.ownerSeen(nodeKey{registry.RoleMaster, m}, members, now)
	}
	for k := range t.absent {
		if members[k] {
			c.cfg.Log.Info().Str("lost_node", registry.Printable(k.id)).Str("lost_role", string(k.role)).Msg("lost node is registered again; no failover")
			delete(t.absent, k)
		}
	}
	for k := range t.killGrace {
		if _, lost := t.absent[k]; !lost && !members[k] {
			delete(t.killGrace, k) // failed over, or never lost
		}
	}
	t.members = members
	return watches, nil
}

// readKillGraces reads the NodeInfo of every worker registered since the last look, for the
// kill grace it published. A read that fails for want of an answer is tried again at the next
// resync; a worker whose data does not parse gets Delay.
func (t *term) readKillGraces(ctx context.Context, members map[nodeKey]bool) {
	c := t.c
	for k := range members {
		if _, known := t.killGrace[k]; known || k.role != registry.RoleWorker {
			continue
		}
		info, err := c.reg.MemberInfo(ctx, k.role, k.id)
		var dataErr *registry.DataError
		switch {
		case err == nil:
			t.killGrace[k] = time.Duration(info.KillGraceMs) * time.Millisecond
		case errors.As(err, &dataErr):
			t.killGrace[k] = 0
			c.cfg.Log.Warn().Err(err).Str("node", registry.Printable(k.id)).Msg("worker's node info does not parse; its kill grace is taken to be covered by failover.delay")
		default:
			c.cfg.Log.Debug().Err(err).Str("node", registry.Printable(k.id)).Msg("cannot read a worker's node info yet; trying again at the next resync")
		}
	}
}

// delay is how long after the leader saw k lost it fails k over: failover.delay, or the
// worker's own published kill grace plus conf.KillGraceMargin when that is longer. Config
// validation holds failover.delay above the kill grace of the leader's own config file only,
// and a worker may run with another.
func (t *term) delay(k nodeKey) time.Duration {
	if g := t.killGrace[k]; g > 0 {
		return max(t.c.cfg.Delay, g+conf.KillGraceMargin)
	}
	return t.c.cfg.Delay
}

func (t *term) ownerSeen(k nodeKey, members map[nodeKey]bool, now time.Time) {
	if members[k] || k.id == t.c.cfg.ID {
		return
	}
	if _, isFenced := t.fenced[k]; isFenced {
		// Fenced already, yet it owns work: work it took just before it was cut off, or a
		// failover that did not finish. The node can never come back, so give the work back
		// at once; the step is idempotent.
		t.fenced[k] = false
		return
	}
	t.lose(k, now, "owns work but is not registered")
}

func (t *term) lose(k nodeKey, now time.Time, why string) {
	if _, known := t.absent[k]; known {
		return
	}
	if _, isFenced := t.fenced[k]; isFenced {
		return
	}
	t.absent[k] = now
	t.c.cfg.Log.Info().Str("lost_node", registry.Printable(k.id)).Str("lost_role", string(k.role)).Str("why", why).
		Dur("failover_in", t.delay(k)).Msg("node lost; failing it over after the delay unless it comes back")
}

// readMarkers learns every fenced identity, and removes finished markers past retention.
//
// A marker is a fence only if a leader could have made it, and Fence succeeds only while the
// node's znode is gone. So a marker of an identity registered now (members, read just before)
// is no fence: someone who reached ZooKeeper made it (possible only without registry.auth-file),
// and the node's work stays where it is; it is reported once a term. The node itself goes on
// too (Registration: its znode outlives the marker). A marker of an identity this term saw lost
// and is still waiting for is left to the delay: fence meets it as ErrAlreadyFenced when the
// identity is due, so the work goes back no sooner than for any lost node.
func (t *term) readMarkers(ctx context.Context, members map[nodeKey]bool) error {
	c := t.c
	entries, err := c.reg.Markers(ctx)
	if err != nil {
		return fmt.Errorf("read fence markers: %w", err)
	}
	for _, e := range entries {
		k := nodeKey{e.Role, e.ID}
		if members[k] {
			if !t.notFence[k] {
				t.notFence[k] = true
				c.cfg.Log.Error().Str("marker", registry.Printable(e.Path)).Str("marker_data", registry.Printable(string(e.Raw))).
					Msg("fence marker of a node that is registered: no leader made it (a leader fences only nodes whose znode is gone); its work is left where it is; protect the registry with registry.auth-file")
			}
			continue
		}
		delete(t.notFence, k)
		if _, waiting := t.absent[k]; waiting {
			continue
		}
		if e.Err != nil {
			c.cfg.Log.Warn().Err(e.Err).Str("marker", registry.Printable(e.Path)).Msg("fence marker with unreadable data; the node stays fenced and its work is given back")
			t.fenced[k] = false
			continue
		}
		done := e.Record.Phase == registry.PhaseFinished
		if prev, ok := t.fenced[k]; !ok || prev {
			t.fenced[k] = done
		}
		delete(t.absent, k)
		if done && e.Record.FinishedAt != nil && c.cfg.MarkerRetention > 0 &&
			c.cfg.Clock.Since(*e.Record.FinishedAt) > c.cfg.MarkerRetention {
			if err := c.reg.DeleteMarker(ctx, c.lead.ZnodePath(), e.Role, e.ID); err != nil {
				if errors.Is(err, registry.ErrNotLeader) {
					return errNotLeader
				}
				c.cfg.Log.Warn().Err(err).Str("marker", e.Path).Msg("could not remove an old fence marker")
				continue
			}
			delete(t.fenced, k)
			c.cfg.Log.Info().Str("marker", e.Path).Msg("removed a fence marker past retention")
		}
	}
	return nil
}

// failDue fails over every absent identity whose delay has passed, and finishes every fenced
// one whose failover is not finished.
func (t *term) failDue(ctx context.Context) error {
	now := t.c.cfg.Clock.Now()
	for k, since := range t.absent {
		if now.Sub(since) < t.delay(k) {
			continue
		}
		if err := t.fence(ctx, k, since); err != nil {
			return err
		}
	}
	for k, finished := range t.fenced {
		if finished {
			continue
		}
		if err := t.finish(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// nextDue is the wait until the next absent identity is due.
func (t *term) nextDue() (time.Duration, bool) {
	now := t.c.cfg.Clock.Now()
	var next time.Duration
	found := false
	for k, since := range t.absent {
		d := max(t.delay(k)-now.Sub(since), 0)
		if !found || d < next {
			next, found = d, true
		}
	}
	return next, found
}

// fence is step 3: the multi that proves this master still leads and the node is absent, and
// creates its marker. From then on the node can never register again.
func (t *term) fence(ctx context.Context, k nodeKey, lostAt time.Time) error {
	c := t.c
	rec := registry.FenceRecord{ID: k.id, Role: k.role, LostAt: wall(lostAt), FencedAt: wall(c.cfg.Clock.Now()),
		Phase: registry.PhaseFenced, Leader: c.cfg.ID}
	err := c.reg.Fence(ctx, c.lead.ZnodePath(), rec)
	switch {
	case errors.Is(err, registry.ErrNodeRegistered):
		c.cfg.Log.Info().Str("lost_node", registry.Printable(k.id)).Msg("lost node registered again just before fencing; no failover")
		delete(t.absent, k)
		return nil
	case errors.Is(err, registry.ErrNotLeader):
		return errNotLeader
	case errors.Is(err, registry.ErrAlreadyFenced):
		c.cfg.Log.Info().Str("lost_node", registry.Printable(k.id)).Msg("already fenced by an earlier leader; finishing its failover")
	case err != nil:
		return fmt.Errorf("fence %s %s: %w", k.role, k.id, err)
	default:
		c.cfg.Log.Info().Str("lost_node", registry.Printable(k.id)).Str("lost_role", string(k.role)).Msg("fenced")
	}
	delete(t.absent, k)
	t.fenced[k] = false
	faultinject.Point("after-fence")
	return t.finish(ctx, k)
}

// finish is steps 4 and 5: in one PostgreSQL transaction give the fenced node's work back and
// record the event, then mark the marker finished. Both are idempotent, so a leader that
// crashes anywhere in between leaves a marker in phase fenced that the next one finishes.
func (t *term) finish(ctx context.Context, k nodeKey) error {
	c := t.c
	rec, found, err := c.reg.Marker(ctx, k.role, k.id)
	if err != nil && !found {
		return fmt.Errorf("read marker of %s %s: %w", k.role, k.id, err)
	}
	// Unreadable data: the marker's existence is what fences, so the failover goes on, but the
	// marker is left as it is for an operator to see (zk tree reports it).
	garbage := err != nil || rec.ID == ""
	if garbage {
		rec = registry.FenceRecord{ID: k.id, Role: k.role, FencedAt: wall(c.cfg.Clock.Now()), Leader: c.cfg.ID}
	}
	var ev *dao.FailoverEvent
	var n int
	err = c.db.Tx(ctx, func(q *dao.Queries) error {
		var err error
		if k.role == registry.RoleWorker {
			n, err = lifecycle.RequeueLostWorker(ctx, q, k.id)
		} else {
			n, err = lifecycle.ReleaseLostMaster(ctx, q, k.id)
		}
		if err != nil {
			return err
		}
		e := dao.FailoverEvent{NodeID: k.id, Role: string(k.role), LostAt: rec.LostAt, FencedAt: rec.FencedAt, Leader: rec.Leader}
		if e.LostAt.IsZero() {
			e.LostAt = rec.FencedAt
		}
		if k.role == registry.RoleWorker {
			e.TasksRequeued = n
		} else {
			e.WorkflowsReleased = n
		}
		ev, err = q.FailoverEventRecord(ctx, e)
		return err
	})
	if err != nil {
		return fmt.Errorf("fail over %s %s: %w", k.role, k.id, err)
	}
	faultinject.Point("after-requeue")
	if garbage {
		t.fenced[k] = true
		c.cfg.Log.Warn().Str("lost_node", registry.Printable(k.id)).Str("lost_role", string(k.role)).Int("tasks_requeued", ev.TasksRequeued).
			Int("workflows_released", ev.WorkflowsReleased).Msg("failover finished for a node whose fence marker has unreadable data; the marker is left as it is")
		return nil
	}
	rec.Phase, rec.TasksRequeued, rec.WorkflowsReleased = registry.PhaseFinished, ev.TasksRequeued, ev.WorkflowsReleased
	if err := c.reg.FinishMarker(ctx, c.lead.ZnodePath(), rec); err != nil {
		if errors.Is(err, registry.ErrNotLeader) {
			return errNotLeader
		}
		return fmt.Errorf("finish marker of %s %s: %w", k.role, k.id, err)
	}
	t.fenced[k] = true
	log := c.cfg.Log.Info()
	if n > 0 {
		log = c.cfg.Log.Warn()
	}
	what := "tasks_requeued"
	if k.role == registry.RoleMaster {
		what = "workflows_released"
	}
	log.Str("lost_node", registry.Printable(k.id)).Str("lost_role", string(k.role)).Int(what, n).
		Msg("failover finished")
	return nil
}

// wall strips the monotonic reading, for records other processes read.
func wall(t time.Time) time.Time { return t.Round(0) }
