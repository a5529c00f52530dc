package testenv

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// An ensemble forms, a client reaches each server, and when the leader is killed another server
// takes over and the data written before is still there.
func TestZKEnsembleElectsAnotherLeader(t *testing.T) {
	t.Parallel()
	e := NewZKEnsemble(t, 3, ZKEnsembleOptions{})
	leader, err := e.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, addr := range e.Servers() {
		c := dialZKAt(t, []string{addr})
		path := "/ensemble-" + string(rune('a'+i))
		if _, err := c.Create(path, []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s through server %d: %v", path, i, err)
		}
		c.Close()
	}

	e.Stop(leader)
	if e.Running(leader) {
		t.Fatalf("server %d still runs after Stop", leader)
	}
	next, err := e.WaitLeader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("leader %d again after it was killed", next)
	}
	c := dialZKAt(t, e.Servers())
	defer c.Close()
	for _, p := range []string{"/ensemble-a", "/ensemble-b", "/ensemble-c"} {
		if ok, _, err := c.Exists(p); err != nil || !ok {
			t.Fatalf("%s exists = %v, %v after the leader changed; want true", p, ok, err)
		}
	}

	// The killed server comes back with its data and follows.
	if err := e.Start(leader); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitServing(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if mode := e.Mode(leader); mode != "follower" {
		t.Fatalf("restarted server %d is %q, want follower", leader, mode)
	}
}

// A frozen server answers nothing; thawed, it serves again.
func TestZKEnsembleFreezeThaw(t *testing.T) {
	t.Parallel()
	e := NewZKEnsemble(t, 3, ZKEnsembleOptions{})
	leader, err := e.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % 3
	if err := e.Freeze(follower); err != nil {
		t.Fatal(err)
	}
	if _, err := FourLetterWord(e.Addr(follower), "ruok", 500*time.Millisecond); err == nil {
		t.Fatalf("frozen server %d answered ruok", follower)
	}
	if err := e.Thaw(follower); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitServing(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// dialZKAt opens a session with the given servers, failing the test if there is none within 10 s.
func dialZKAt(t *testing.T, servers []string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(servers, 5*time.Second, zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn
			}
		case <-deadline:
			conn.Close()
			t.Fatalf("no session with %v within 10s", servers)
		}
	}
}
