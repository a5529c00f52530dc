package registry

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zksched/zksched/internal/testenv"
)

// waitAny waits until cond holds, re-checking whenever any of the Changed channels fires.
func waitAny(t *testing.T, timeout time.Duration, what string, cond func() bool, sources ...func() <-chan struct{}) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)}}
		for _, s := range sources {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s())})
		}
		if cond() {
			return
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

func TestElectionHasExactlyOneLeader(t *testing.T) {
	b := setup(t)
	ca, cb := b.dial(t, b.config()), b.dial(t, b.config())
	ma, mb := register(t, ca, RoleMaster, "1"), register(t, cb, RoleMaster, "2")
	ea := elect(t, ma)
	eb := elect(t, mb)
	oneLeader := func() bool {
		return ea.IsLeader() != eb.IsLeader() && ea.Leader() == ma.ID() && eb.Leader() == ma.ID()
	}
	waitAny(t, 5*time.Second, "one leader", oneLeader, ea.Changed, eb.Changed)
	if !ea.IsLeader() {
		t.Fatalf("the first candidate is not the leader")
	}
	cl, err := ca.Cluster(context.Background())
	if err != nil || cl.Leader != ma.ID() {
		t.Fatalf("Cluster leader = %q, %v; want %s", cl.Leader, err, ma.ID())
	}

	// The leader's session ends: the other master takes over.
	ca.Close()
	waitAny(t, 5*time.Second, "re-election", func() bool { return eb.IsLeader() && eb.Leader() == mb.ID() }, eb.Changed)
	if ea.IsLeader() {
		t.Fatal("the closed master still says it leads")
	}
}

func TestElectionResign(t *testing.T) {
	b := setup(t)
	ca, cb := b.dial(t, b.config()), b.dial(t, b.config())
	ma, mb := register(t, ca, RoleMaster, "1"), register(t, cb, RoleMaster, "2")
	ea := elect(t, ma)
	waitLeader(t, ea, 5*time.Second, true)
	eb := elect(t, mb)
	waitAny(t, 5*time.Second, "the follower to see the leader", func() bool { return eb.Leader() == ma.ID() }, eb.Changed)
	if eb.IsLeader() {
		t.Fatal("two leaders")
	}
	if err := ea.Close(context.Background()); err != nil {
		t.Fatalf("resign: %v", err)
	}
	if ea.IsLeader() || ea.ZnodePath() != "" {
		t.Fatalf("after resigning: IsLeader %v, ZnodePath %q", ea.IsLeader(), ea.ZnodePath())
	}
	waitLeader(t, eb, 5*time.Second, true)
	if got := eb.Leader(); got != mb.ID() {
		t.Fatalf("Leader() = %q, want %q", got, mb.ID())
	}
	// A master that resigned may run again, behind the current leader.
	ea2 := elect(t, ma)
	waitAny(t, 5*time.Second, "the new candidate to see the leader", func() bool { return ea2.Leader() == mb.ID() }, ea2.Changed)
	if ea2.IsLeader() {
		t.Fatal("the returning master leads ahead of the current leader")
	}
}

func TestDisconnectedLeaderIsNotLeader(t *testing.T) {
	b := setup(t)
	p := testenv.NewProxy(t, b.zk.Servers[0])
	cfg := b.config(p.Addr())
	cfg.SessionTimeout = 4 * time.Second // the session outlives the reconnect
	c := b.dial(t, cfg)
	m := register(t, c, RoleMaster, "1")
	e := elect(t, m)
	waitLeader(t, e, 5*time.Second, true)
	znode, sid := e.ZnodePath(), c.Status().SessionID

	other := b.dial(t, b.config())
	eo := elect(t, register(t, other, RoleMaster, "2"))

	// Drop the connection and hold the link down a moment: the client reconnects at once
	// (hostprovider.go), so an open link would make the disconnected spell too short to see.
	p.Cut()
	p.Reset()
	waitLeader(t, e, 5*time.Second, false)
	if st := c.Status(); st.State == Connected {
		t.Errorf("not leader while connected: %+v", st)
	}
	p.Heal()
	waitLeader(t, e, 10*time.Second, true)
	if e.ZnodePath() != znode || c.Status().SessionID != sid {
		t.Fatalf("leader again with znode %q session %#x; want the same %q %#x", e.ZnodePath(), c.Status().SessionID, znode, sid)
	}
	if eo.IsLeader() {
		t.Fatal("the other master leads too")
	}
}

// After an expiry the master rejoins the election under its new session.
func TestElectionRejoinsAfterExpiry(t *testing.T) {
	b := setup(t)
	p := testenv.NewProxy(t, b.zk.Servers[0])
	c := b.dial(t, b.config(p.Addr()))
	m := register(t, c, RoleMaster, "1")
	e := elect(t, m)
	waitLeader(t, e, 5*time.Second, true)
	old := e.ZnodePath()
	expired := deleted(t, testenv.DialZK(t), old)

	p.Cut()
	waitLeader(t, e, 5*time.Second, false)
	waitClosed(t, expired, 15*time.Second, "the server to expire the session")
	p.Heal()
	waitLeader(t, e, 15*time.Second, true)
	if e.ZnodePath() == old {
		t.Fatalf("leading with the expired candidate %s", old)
	}
	if st := m.State(); st.Kind != Registered || st.SessionID != c.Status().SessionID {
		t.Fatalf("registration %+v, want registered under the new session", st)
	}
}

func TestElectOnlyMasters(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	w := register(t, c, RoleWorker, "1")
	if _, err := w.Elect(context.Background()); err == nil {
		t.Fatal("a worker entered the election")
	}
}

// Children of election/ that the election did not make do not count: one whose name is not the
// candidate form, and a persistent one of that form (a candidacy lives with its session).
// Counted, the garbage "x0000000000" (sequence 0) would lead for ever and no master would.
func TestElectionIgnoresForeignZnodes(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	anyone := testenv.DialZK(t)
	dir := c.layout.electionDir()
	for _, name := range []string{"x0000000000", "_c_00000000000000000000000000000000-n_0000000000", "\u202ex-n_0000000000"} {
		if _, err := anyone.Create(dir+"/"+name, []byte("\x1b[31mgarbage\n"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	m := register(t, c, RoleMaster, "1")
	e := elect(t, m)
	waitLeader(t, e, 5*time.Second, true)
	if e.Leader() != m.ID() {
		t.Fatalf("Leader() = %q, want %s", e.Leader(), m.ID())
	}
	b.log.waitFor(t, `"why":"it is not ephemeral"`, time.Second)
	b.log.waitFor(t, `"why":"its name is not of the form the election creates"`, time.Second)
	cl, err := c.Cluster(context.Background())
	if err != nil || cl.Leader != m.ID() {
		t.Fatalf("Cluster leader = %q, %v; want %s", cl.Leader, err, m.ID())
	}
}
