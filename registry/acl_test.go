package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zksched/zksched/internal/testenv"
)

var testCreds = &Credentials{User: testenv.ZKUser, Password: testenv.ZKPassword}

// authConfig is the test's client config with the test credentials.
func (b *testBundle) authConfig(servers ...string) Config {
	cfg := b.config(servers...)
	cfg.Auth = testCreds
	return cfg
}

// wantACL checks that every znode under the root carries the registry's ACL. It reads the ACLs
// with the credentials: ZooKeeper shows a digest's hash only to a client with ADMIN rights.
func wantACL(t *testing.T, c *Client) {
	t.Helper()
	zc := testenv.DialZK(t)
	if err := zc.AddAuth("digest", []byte(testCreds.User+":"+testCreds.Password)); err != nil {
		t.Fatal(err)
	}
	nodes, err := c.Tree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := testCreds.ACL()
	for _, z := range nodes {
		acl, _, err := zc.GetACL(z.Path)
		if err != nil {
			t.Fatalf("getAcl %s: %v", z.Path, err)
		}
		if !sameACL(acl, want) {
			t.Errorf("acl of %s = %s, want %s", z.Path, formatACL(acl), formatACL(want))
		}
	}
}

// With credentials, every znode zksched makes is closed to others: a client without them can
// read everything but create, change and delete nothing: under world:anyone's rights every
// create below would succeed.
func TestACLClosesTheTreeToOthers(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.authConfig())
	m := register(t, c, RoleMaster, "1")
	e := elect(t, m)
	waitLeader(t, e, 5*time.Second, true)
	w := register(t, c, RoleWorker, "2")
	l := c.layout
	rec := fenceRecord(RoleWorker, "10.0.0.3:1234_1", m.ID())
	if err := c.Fence(context.Background(), e.ZnodePath(), rec); err != nil {
		t.Fatal(err)
	}

	anyone := testenv.DialZK(t)
	wantACL(t, c)
	data, _ := json.Marshal(fenceRecord(RoleWorker, w.ID(), "attacker"))
	for _, tc := range []struct {
		what string
		do   func() error
	}{
		{"create the marker of a live worker", func() error {
			_, err := anyone.Create(l.markerPath(RoleWorker, w.ID()), data, 0, zk.WorldACL(zk.PermAll))
			return err
		}},
		{"delete a worker's znode", func() error { return anyone.Delete(l.nodePath(RoleWorker, w.ID()), -1) }},
		{"delete a master's znode", func() error { return anyone.Delete(l.nodePath(RoleMaster, m.ID()), -1) }},
		{"delete the leader's candidate", func() error { return anyone.Delete(e.ZnodePath(), -1) }},
		{"create an election candidate", func() error {
			_, err := anyone.Create(l.electionDir()+"/_c_00000000000000000000000000000000-n_", []byte("x"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
			return err
		}},
		{"change a worker's node info", func() error {
			_, err := anyone.Set(l.nodePath(RoleWorker, w.ID()), []byte("{}"), -1)
			return err
		}},
		{"change a marker", func() error {
			_, err := anyone.Set(l.markerPath(RoleWorker, rec.ID), []byte("{}"), -1)
			return err
		}},
		{"delete a marker", func() error { return anyone.Delete(l.markerPath(RoleWorker, rec.ID), -1) }},
		{"create under the root", func() error {
			_, err := anyone.Create(l.root+"/junk", nil, 0, zk.WorldACL(zk.PermAll))
			return err
		}},
		{"open the root's acl", func() error {
			_, err := anyone.SetACL(l.root, zk.WorldACL(zk.PermAll), -1)
			return err
		}},
	} {
		if err := tc.do(); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("without credentials, %s: %v, want %v", tc.what, err, zk.ErrNoAuth)
		}
	}
	// Reading needs no credentials.
	if raw, _, err := anyone.Get(l.nodePath(RoleWorker, w.ID())); err != nil || !strings.Contains(string(raw), w.ID()) {
		t.Errorf("read a worker's node info without credentials: %q, %v", raw, err)
	}
	ro := b.dial(t, Config{Servers: b.zk.Servers, Root: b.zk.Root, SessionTimeout: time.Second, ReadOnly: true})
	cl, err := ro.Cluster(context.Background())
	if err != nil || cl.Leader != m.ID() || len(cl.Workers) != 1 || len(cl.Fenced) != 1 {
		t.Errorf("read-only cluster without credentials: %+v, %v", cl, err)
	}
	if st := w.State(); st.Kind != Registered {
		t.Errorf("worker state %v, want registered", st.Kind)
	}
}

// A tree made by a version without ACLs is closed when a node with credentials starts: the root,
// its folders and the markers get the ACL, and it says so.
func TestACLClosesAnOpenTreeAtStart(t *testing.T) {
	b := setup(t)
	open := b.dial(t, b.config())
	anyone := testenv.DialZK(t)
	createMarker(t, anyone, b.zk.Root, fenceRecord(RoleWorker, "10.0.0.4:1234_1", "10.0.0.9:5680_1"))
	open.Close()

	c := b.dial(t, b.authConfig())
	b.log.waitFor(t, "set the registry acl on znodes made without it", time.Second)
	wantACL(t, c)
	if _, err := anyone.Create(c.layout.markerPath(RoleWorker, "10.0.0.5:1234_1"), nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("create a marker after the tree was closed: %v, want %v", err, zk.ErrNoAuth)
	}
}

// A node without credentials refuses to start on a protected tree, with a message that names
// the fix; a read-only client reads it.
func TestACLProtectedTreeWantsCredentials(t *testing.T) {
	b := setup(t)
	b.dial(t, b.authConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, b.config())
	if err == nil {
		c.Close()
		t.Fatal("Dial without credentials on a protected tree succeeded")
	}
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "set registry.auth-file") {
		t.Errorf("Dial without credentials: %v, want a hint at registry.auth-file", err)
	}
	other := b.authConfig()
	other.Auth = &Credentials{User: testenv.ZKUser, Password: "another-password"}
	if c, err := Dial(ctx, other); err == nil {
		c.Close()
		t.Fatal("Dial with other credentials on a protected tree succeeded")
	} else if !errors.Is(err, ErrCredentials) || !errors.Is(err, zk.ErrNoAuth) || !strings.Contains(err.Error(), "other credentials") {
		t.Errorf("Dial with other credentials: %v, want NoAuth naming other credentials", err)
	}
}

// The credentials go with every connection: after a reconnect to the same session and after a
// new session, the node still writes its node info and re-registers (both refused without
// them). Against a client that authenticated only its first connection, the re-registration
// under the new session fails with NoAuth.
func TestACLCredentialsSurviveReconnectAndNewSession(t *testing.T) {
	b := setup(t)
	p := testenv.NewProxy(t, b.zk.Servers[0])
	c := b.dial(t, b.authConfig(p.Addr()))
	w := register(t, c, RoleWorker, "1")
	zc := testenv.DialZK(t)
	node := c.layout.nodePath(RoleWorker, w.ID())
	first := w.State().SessionID

	// Same session: a reset connection, healed at once.
	p.Reset()
	waitStatus(t, c, 10*time.Second, "reconnected", func(s Status) bool { return s.State == Connected })
	if c.Status().SessionID != first {
		t.Fatalf("session changed on a reset (%#x → %#x); the test wants the same session", first, c.Status().SessionID)
	}
	waitInfoWritten(t, zc, node, w, 1)

	// A new session: cut until the server expires the old one.
	expired := deleted(t, zc, node)
	p.Cut()
	select {
	case <-expired:
	case <-time.After(15 * time.Second):
		t.Fatalf("timed out after 15s waiting for the server to expire session %#x; its log then:\n%s", first,
			testenv.SharedZKLog(fmt.Sprintf("%x", first), "fsync", "WARN", "ERROR"))
	}
	p.Heal()
	st := waitReg(t, w, 15*time.Second, "registered under a new session", func(s RegState) bool {
		return s.Kind == Registered && s.SessionID != first
	})
	if err := zc.AddAuth("digest", []byte(testCreds.User+":"+testCreds.Password)); err != nil {
		t.Fatal(err)
	}
	acl, stat, err := zc.GetACL(node)
	if err != nil || stat.EphemeralOwner != st.SessionID || !sameACL(acl, testCreds.ACL()) {
		t.Fatalf("znode after re-registration: owner %#x acl %s (%v), want owner %#x acl %s",
			ownerOf(stat), formatACL(acl), err, st.SessionID, formatACL(testCreds.ACL()))
	}
	waitInfoWritten(t, zc, node, w, 2)
}

// waitInfoWritten has the registration rewrite its node info and waits for the write.
func waitInfoWritten(t *testing.T, zc *zk.Conn, node string, r *Registration, load float64) {
	t.Helper()
	_, _, ev, err := zc.GetW(node)
	if err != nil {
		t.Fatal(err)
	}
	r.Update(func(i *NodeInfo) { i.Load = load })
	select {
	case e := <-ev:
		if e.Type != zk.EventNodeDataChanged {
			t.Fatalf("event %v on %s, want a data change", e.Type, node)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("node info not written within 10s")
	}
}

// A reply above the client's buffer cap fails its request with ErrResponseTooLarge and leaves
// the connection up. Stock go-zookeeper with the cap set drops the connection and fails the
// read with a connection loss (and a caller that retries loops for ever); without the cap, it
// reads the whole reply into memory.
//
// It writes megabytes of znodes, so it does so on a ZooKeeper server of its own: on the one
// the other tests share, the snapshots and the deletion of those znodes would slow every
// session's requests, expiries included, that the other tests time.
func TestOversizedReplyIsAnError(t *testing.T) {
	b := setup(t)
	ens := testenv.NewZKEnsemble(t, 1, testenv.ZKEnsembleOptions{})
	c := b.dial(t, b.config(ens.Servers()...))
	anyone := testenv.DialZKServers(t, ens.Servers())
	// ZooKeeper caps one znode's data at about 1 MiB, so the large reply is a folder's
	// children: names of 1,000 bytes, enough of them to pass maxResponseBytes.
	dir := b.zk.Root + "/wide"
	if _, err := anyone.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("n", 1000)
	const perMulti = 500
	total := maxResponseBytes/1000 + perMulti
	for i := 0; i < total; i += perMulti {
		ops := make([]any, 0, perMulti)
		for j := i; j < i+perMulti; j++ {
			ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("%s/%s%06d", dir, name, j), Acl: zk.WorldACL(zk.PermAll)})
		}
		if _, err := anyone.Multi(ops...); err != nil {
			t.Fatal(err)
		}
	}
	sid := c.Status().SessionID
	_, err := c.children(context.Background(), dir)
	if !errors.Is(err, zk.ErrResponseTooLarge) {
		t.Fatalf("children of a folder larger than the cap: %v, want %v", err, zk.ErrResponseTooLarge)
	}
	if _, err := c.children(context.Background(), b.zk.Root); err != nil {
		t.Fatalf("a small read after the large one: %v", err)
	}
	if st := c.Status(); st.State != Connected || st.SessionID != sid {
		t.Fatalf("status %+v after the large reply, want connected on session %#x", st, sid)
	}
}
