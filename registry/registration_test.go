package registry

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zksched/zksched/internal/testenv"
)

func TestRegisterWritesNodeInfo(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	info := nodeInfo(RoleWorker, "1")
	info.HTTPAddr = "10.0.0.1:8080"
	info.Running, info.Load = 2, 0.5
	ctx := context.Background()
	r, err := c.Register(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)

	st := r.State()
	if st.Kind != Registered || st.SessionID != c.Status().SessionID {
		t.Fatalf("State() = %+v, want registered under session %#x", st, c.Status().SessionID)
	}
	zc := testenv.DialZK(t)
	data, stat, err := zc.Get(b.zk.Root + "/nodes/workers/" + info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stat.EphemeralOwner != st.SessionID {
		t.Errorf("znode owner %#x, want the session %#x", stat.EphemeralOwner, st.SessionID)
	}
	got := jsonKeys(t, data)
	want := []string{"groups", "heartbeatAt", "host", "httpAddr", "id", "load", "pid", "port", "role", "running", "slots", "startTime", "version"}
	if !equalStrings(got, want) {
		t.Errorf("NodeInfo JSON keys = %v, want %v", got, want)
	}
	var back NodeInfo
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != info.ID || back.Role != RoleWorker || back.Port != info.Port || back.HTTPAddr != info.HTTPAddr ||
		back.Running != 2 || back.Load != 0.5 || !back.StartTime.Equal(info.StartTime) || back.HeartbeatAt.IsZero() {
		t.Errorf("znode data = %+v, want %+v with a heartbeat", back, info)
	}
}

func TestRegistrationRefreshesAndUpdates(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	r := register(t, c, RoleWorker, "1")
	zc := testenv.DialZK(t)
	node := c.layout.nodePath(RoleWorker, r.ID())

	read := func() (NodeInfo, <-chan zk.Event) {
		data, _, ev, err := zc.GetW(node)
		if err != nil {
			t.Fatal(err)
		}
		var info NodeInfo
		if err := json.Unmarshal(data, &info); err != nil {
			t.Fatal(err)
		}
		return info, ev
	}
	first, ev := read()
	waitEvent(t, ev, 5*time.Second, "a refresh")
	second, _ := read()
	if !second.HeartbeatAt.After(first.HeartbeatAt) {
		t.Errorf("heartbeat after a refresh %v, want after %v", second.HeartbeatAt, first.HeartbeatAt)
	}

	// Refreshes keep coming, so wait for the data that has the update rather than the next write.
	r.Update(func(i *NodeInfo) { i.Running, i.Load, i.ID = 3, 1.5, "ignored" })
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, ev := read()
		if info.Running == 3 && info.Load == 1.5 {
			if info.ID != r.ID() {
				t.Fatalf("Update changed the id to %q", info.ID)
			}
			break
		}
		waitEvent(t, ev, time.Until(deadline), "the update")
	}
}

func waitEvent(t *testing.T, ev <-chan zk.Event, timeout time.Duration, what string) {
	t.Helper()
	select {
	case <-ev:
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// createMarker writes a fence marker directly, as an operator or another leader would.
func createMarker(t *testing.T, zc *zk.Conn, root string, rec FenceRecord) {
	t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zc.Create(layout{root}.markerPath(rec.Role, rec.ID), data, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
}

// fenceGone deletes a node's znode and creates its marker in one multi, as a leader's fence of
// a node whose znode is gone leaves them.
func fenceGone(t *testing.T, zc *zk.Conn, root string, rec FenceRecord) {
	t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	l := layout{root}
	if _, err := zc.Multi(&zk.DeleteRequest{Path: l.nodePath(rec.Role, rec.ID), Version: -1},
		&zk.CreateRequest{Path: l.markerPath(rec.Role, rec.ID), Data: data, Acl: zk.WorldACL(zk.PermAll)}); err != nil {
		t.Fatal(err)
	}
}

// A marker made while the node's znode is held by its live session cannot be a leader's (Fence
// needs the znode gone): the node reports it and goes on, where taking it for a fence would
// end a live node (TestMarkerWatchFencesAtOnce makes its marker as a fence does, the znode
// deleted first).
func TestMarkerBesideLiveZnodeIsNoFence(t *testing.T) {
	b := setup(t)
	cfg := b.config()
	cfg.InfoInterval = 100 * time.Millisecond
	c := b.dial(t, cfg)
	w := register(t, c, RoleWorker, "1")
	zc := testenv.DialZK(t)
	createMarker(t, zc, b.zk.Root, fenceRecord(RoleWorker, w.ID(), "10.0.0.9:5680_1"))
	b.log.waitFor(t, "a fence marker exists for this node while its znode is held by its live session", 5*time.Second)
	// Every refresh checks the marker before it writes the node info: wait for two writes.
	node := layout{b.zk.Root}.nodePath(RoleWorker, w.ID())
	for range 2 {
		_, _, ev, err := zc.GetW(node)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-ev:
			if e.Type != zk.EventNodeDataChanged {
				t.Fatalf("node znode event %v, want a data change", e.Type)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no node info refresh within 5s")
		}
	}
	if st := w.State(); st.Kind != Registered {
		t.Fatalf("State() = %+v after a marker beside the live znode, want registered", st)
	}
	// The marker still bars the identity once its session is gone.
	c.Close()
	c2 := b.dial(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c2.Register(ctx, nodeInfo(RoleWorker, "1")); !errors.Is(err, ErrFenced) {
		t.Fatalf("Register after the session: %v, want ErrFenced", err)
	}
}

func fenceRecord(role Role, id, leader string) FenceRecord {
	now := time.Now().Truncate(time.Millisecond)
	return FenceRecord{ID: id, Role: role, LostAt: now.Add(-time.Second), FencedAt: now, Phase: PhaseFenced, Leader: leader}
}

func TestRegisterRefusedWhileFenced(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	zc := testenv.DialZK(t)
	info := nodeInfo(RoleWorker, "1")
	rec := fenceRecord(RoleWorker, info.ID, "10.0.0.9:5680_1")
	createMarker(t, zc, b.zk.Root, rec)
	ctx := context.Background()

	_, err := c.Register(ctx, info)
	var fe *FencedError
	if !errors.Is(err, ErrFenced) || !errors.As(err, &fe) {
		t.Fatalf("Register of a fenced node: %v, want a *FencedError", err)
	}
	if fe.ParseErr != nil || fe.Record.Leader != rec.Leader || !fe.Record.FencedAt.Equal(rec.FencedAt) || fe.Record.Phase != PhaseFenced {
		t.Errorf("FencedError = %+v, want record %+v", fe, rec)
	}
	if ok, _, _ := zc.Exists(c.layout.nodePath(RoleWorker, info.ID)); ok {
		t.Errorf("the fenced node's znode exists")
	}

	// Garbage in the marker: still fenced, with the raw data and the parse error.
	if _, err := zc.Set(c.layout.markerPath(RoleWorker, info.ID), []byte("\x00not json"), -1); err != nil {
		t.Fatal(err)
	}
	_, err = c.Register(ctx, info)
	if !errors.As(err, &fe) || fe.ParseErr == nil || string(fe.Raw) != "\x00not json" {
		t.Fatalf("Register with a garbage marker: %v, want a *FencedError with the raw data and a parse error", err)
	}

	if err := zc.Delete(c.layout.markerPath(RoleWorker, info.ID), -1); err != nil {
		t.Fatal(err)
	}
	r, err := c.Register(ctx, info)
	if err != nil {
		t.Fatalf("Register after the marker was deleted: %v", err)
	}
	defer r.Close(ctx)
	if st := r.State(); st.Kind != Registered {
		t.Fatalf("State() = %+v, want registered", st)
	}
}

func TestRegisterTwiceOnOneClientFails(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	r := register(t, c, RoleWorker, "1")
	if _, err := c.Register(context.Background(), nodeInfo(RoleWorker, "1")); err == nil {
		t.Fatal("second Register of the same identity succeeded")
	}
	ctx := context.Background()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r2, err := c.Register(ctx, nodeInfo(RoleWorker, "1"))
	if err != nil {
		t.Fatalf("Register after Close: %v", err)
	}
	r2.Close(ctx)
}

func TestRegisterRejectsBadInfo(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	for _, info := range []NodeInfo{
		{ID: "a:1_1", Role: "boss"},
		{ID: "", Role: RoleWorker},
		{ID: "a/b:1_1", Role: RoleWorker},
	} {
		if r, err := c.Register(context.Background(), info); err == nil {
			r.Close(context.Background())
			t.Errorf("Register(%+v) succeeded, want an error", info)
		}
	}
}

func TestCloseDeregisters(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	r := register(t, c, RoleWorker, "1")
	zc := testenv.DialZK(t)
	node := c.layout.nodePath(RoleWorker, r.ID())
	if ok, _, _ := zc.Exists(node); !ok {
		t.Fatal("no znode after Register")
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := zc.Exists(node); ok {
		t.Fatal("znode still there after Close")
	}
	if st := r.State(); st.Kind != Deregistered {
		t.Fatalf("State() = %+v, want deregistered", st)
	}
}

func TestMarkerWatchFencesAtOnce(t *testing.T) {
	b := setup(t)
	cfg := b.config()
	cfg.InfoInterval = time.Minute // only the watch can notice in time
	c := b.dial(t, cfg)
	m := register(t, c, RoleMaster, "1")
	e := elect(t, m)
	waitLeader(t, e, 5*time.Second, true)
	w := register(t, c, RoleWorker, "2")

	zc := testenv.DialZK(t)
	for _, r := range []*Registration{w, m} {
		rec := fenceRecord(r.Role(), r.ID(), "10.0.0.9:5680_1")
		// As a fence finds it: the znode gone (here deleted, not expired, so the session
		// lives and only the watch on the marker can tell), the marker made.
		fenceGone(t, zc, b.zk.Root, rec)
		st := waitReg(t, r, 2*time.Second, "fenced", func(s RegState) bool { return s.Kind == Fenced })
		if st.Fence == nil || st.Fence.Record.Leader != rec.Leader {
			t.Fatalf("%s fenced with %+v, want the record %+v", r.ID(), st.Fence, rec)
		}
	}
	// A fenced master leaves the election at once.
	waitLeader(t, e, 2*time.Second, false)
	waitUntil(t, 5*time.Second, "candidate znode removed", e.Changed, func() bool { return e.ZnodePath() == "" })
	names, _, err := zc.Children(c.layout.electionDir())
	if err != nil || len(names) != 0 {
		t.Fatalf("election candidates %v (%v), want none", names, err)
	}
	if _, err := m.Elect(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("Elect of a fenced master: %v, want ErrFenced", err)
	}
}

// An expired session is re-registered under the new one; Lost in between.
func TestRegistrationSurvivesSessionExpiry(t *testing.T) {
	b := setup(t)
	p := testenv.NewProxy(t, b.zk.Servers[0])
	c := b.dial(t, b.config(p.Addr()))
	w := register(t, c, RoleWorker, "1")
	old := w.State().SessionID
	zc := testenv.DialZK(t)
	node := c.layout.nodePath(RoleWorker, w.ID())
	expired := deleted(t, zc, node)

	p.Cut()
	waitClosed(t, expired, 15*time.Second, "the server to expire the session")
	if st := w.State(); st.Kind != Registered {
		t.Errorf("cut off, state %v; want registered still (only the server decides)", st.Kind)
	}
	// Hold the identity's znode from another session: the re-registration has to wait for it, so
	// the test sees the state Lost, and the wait-for-an-older-owner path runs.
	if _, err := zc.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	waitReg(t, w, 15*time.Second, "lost", func(s RegState) bool { return s.Kind == Lost })
	waitStatus(t, c, 15*time.Second, "a new session", func(s Status) bool { return s.State == Connected && s.SessionID != old })
	if err := zc.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	st := waitReg(t, w, 15*time.Second, "registered again", func(s RegState) bool { return s.Kind == Registered })
	if st.SessionID == old || st.SessionID != c.Status().SessionID {
		t.Fatalf("registered under %#x; want the new session %#x (old %#x)", st.SessionID, c.Status().SessionID, old)
	}
	_, stat, err := zc.Exists(node)
	if err != nil || stat.EphemeralOwner != st.SessionID {
		t.Fatalf("znode owner %#x (%v), want %#x", ownerOf(stat), err, st.SessionID)
	}
}

// A node fenced by the leader while it was cut off learns it when it reconnects.
func TestRegistrationFencedWhileCutOff(t *testing.T) {
	b := setup(t)
	leader := b.dial(t, b.config())
	m := register(t, leader, RoleMaster, "1")
	e := elect(t, m)
	waitLeader(t, e, 5*time.Second, true)

	p := testenv.NewProxy(t, b.zk.Servers[0])
	c := b.dial(t, b.config(p.Addr()))
	w := register(t, c, RoleWorker, "2")
	ctx := context.Background()

	p.Cut()
	// The leader's view: wait until ZooKeeper has expired the worker's session.
	for {
		ids, ch, err := leader.Members(ctx, RoleWorker)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			break
		}
		waitClosed(t, ch, 15*time.Second, "the worker's znode to go")
	}
	rec := fenceRecord(RoleWorker, w.ID(), m.ID())
	if err := leader.Fence(ctx, e.ZnodePath(), rec); err != nil {
		t.Fatalf("Fence: %v", err)
	}
	p.Heal()
	st := waitReg(t, w, 15*time.Second, "fenced", func(s RegState) bool { return s.Kind == Fenced })
	if st.Fence.Record.Leader != m.ID() || st.Fence.Record.Phase != PhaseFenced {
		t.Fatalf("fence record %+v, want phase fenced by %s", st.Fence.Record, m.ID())
	}
	if ids, _, _ := leader.Members(ctx, RoleWorker); len(ids) != 0 {
		t.Fatalf("workers %v registered after the fence, want none", ids)
	}
}

// A znode deleted behind the node's back (an operator, say) is re-created through the fenced
// multi under the same session.
func TestRegistrationRecreatesDeletedZnode(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	w := register(t, c, RoleWorker, "1")
	sid := w.State().SessionID
	zc := testenv.DialZK(t)
	node := c.layout.nodePath(RoleWorker, w.ID())
	if err := zc.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	ok, _, ev, err := zc.ExistsW(node)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		waitEvent(t, ev, 5*time.Second, "the znode to come back")
	}
	_, stat, err := zc.Exists(node)
	if err != nil || stat.EphemeralOwner != sid {
		t.Fatalf("re-created znode owner %#x (%v), want the same session %#x", ownerOf(stat), err, sid)
	}
	if st := waitReg(t, w, 5*time.Second, "registered", func(s RegState) bool { return s.Kind == Registered }); st.SessionID != sid {
		t.Fatalf("registered under %#x, want %#x", st.SessionID, sid)
	}
}

func TestRefreshInfoKeepsTheNodeDataCurrent(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	r := register(t, c, RoleWorker, "1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.RefreshInfo(ctx, func() int { return 7 })
	}()
	t.Cleanup(func() { cancel(); <-done })
	// The data reaches ZooKeeper in the background: a watch set before each read fires at
	// the next write, so no write goes unseen.
	zc := testenv.DialZK(t)
	node := c.layout.nodePath(RoleWorker, r.ID())
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, ev, err := zc.GetW(node)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.MemberInfo(context.Background(), RoleWorker, r.ID())
		if err == nil && got.Running == 7 && !got.HeartbeatAt.IsZero() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("member info %+v (err %v), want running 7 and a heartbeat", got, err)
		}
		waitEvent(t, ev, time.Until(deadline), "a write of the node's data")
	}
}
