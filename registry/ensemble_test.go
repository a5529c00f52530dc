package registry

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/zksched/zksched/internal/testenv"
)

// ensembleBundle is a test's own 3-server ensemble and a log.
type ensembleBundle struct {
	testBundle
	ens    *testenv.ZKEnsemble
	leader int // the ensemble's leader when the test began
}

func setupEnsemble(t *testing.T) *ensembleBundle {
	t.Helper()
	t.Parallel()
	ens := testenv.NewZKEnsemble(t, 3, testenv.ZKEnsembleOptions{})
	leader, err := ens.WaitLeader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return &ensembleBundle{
		testBundle: testBundle{log: newLogSink(t), zk: testenv.ZK{Servers: ens.Servers(), Root: "/zksched"}},
		ens:        ens, leader: leader,
	}
}

// followers returns the two servers that followed when the test began.
func (b *ensembleBundle) followers() (int, int) {
	return (b.leader + 1) % 3, (b.leader + 2) % 3
}

func (b *ensembleBundle) freeze(t *testing.T, i int) {
	t.Helper()
	if err := b.ens.Freeze(i); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.ens.Thaw(i) })
}

// A frozen server takes TCP connections and answers nothing. A client cut from its server that
// tries frozen ones next must give each no more than its share of the session timeout (the
// timeout divided by the number of servers, as the Java client does), so that it reaches a
// live server before its session expires. With 2/3 of the timeout per try, two frozen servers
// in a row outlast the session.
func TestReconnectPastFrozenServers(t *testing.T) {
	b := setupEnsemble(t)
	frozen, _ := b.followers()
	live := testenv.NewProxy(t, b.ens.Addr(b.leader))
	// The frozen server twice, under two addresses: whatever order the client shuffles its
	// servers into, both come next when it loses the live one.
	alias := testenv.NewProxy(t, b.ens.Addr(frozen))
	b.freeze(t, frozen)

	cfg := b.config(live.Addr(), b.ens.Addr(frozen), alias.Addr())
	cfg.SessionTimeout = 9 * time.Second
	c := b.dial(t, cfg)
	timeout := c.SessionTimeout()
	old := c.Status().SessionID

	live.Reset()
	lost := time.Now()
	waitStatus(t, c, 5*time.Second, "disconnected", func(s Status) bool { return s.State != Connected })
	st := waitStatus(t, c, 3*timeout, "connected again", func(s Status) bool { return s.State == Connected })
	took := time.Since(lost)
	if st.SessionID != old {
		t.Fatalf("session %#x after %v, want the old %#x: it expired while the client waited on the frozen server", st.SessionID, took.Round(time.Millisecond), old)
	}
	t.Logf("reconnected after %v with the same session", took.Round(time.Millisecond))
	// Two tries of timeout/3 each, then go-zookeeper's 1 s pause after a round of servers.
	if want := 2*timeout/3 + time.Second + 1500*time.Millisecond; took > want {
		t.Errorf("reconnected after %v, want within %v", took.Round(time.Millisecond), want)
	}
}

// Quorum lost and regained: the servers renew every session once they serve again, after an
// outage shorter or longer than the session timeout, so no client may give its session up. A
// server without a quorum takes the TCP connection and closes it, as a server that refuses a
// session does (go-zookeeper issue #36): the client must not take one for the other.
func TestSessionsSurviveQuorumLoss(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout time.Duration
		down    time.Duration
		checked bool // restart once the clients check their sessions with a fresh connection
	}{
		{"shorter than the session timeout", 8 * time.Second, 0, false},
		{"longer than the session timeout", 3 * time.Second, 0, true},
		{"much longer than the session timeout", 2 * time.Second, 8 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setupEnsemble(t)
			// Several clients: each one's check races its own reconnect, and a client
			// connected again cannot lose its session to a fresh one any more.
			clients := make([]*Client, 6)
			logs := make([]*logSink, len(clients))
			sids := make([]int64, len(clients))
			for i := range clients {
				logs[i] = newLogSink(t)
				cfg := b.config()
				cfg.SessionTimeout = tt.timeout
				cfg.Logger = zerolog.New(logs[i]).With().Timestamp().Int("client", i).Logger()
				clients[i] = b.dial(t, cfg)
				sids[i] = clients[i].Status().SessionID
			}

			f, _ := b.followers()
			lost := time.Now()
			b.ens.Stop(b.leader)
			b.ens.Stop(f)
			for _, c := range clients {
				waitStatus(t, c, tt.timeout, "disconnected", func(s Status) bool { return s.State != Connected })
			}
			if tt.checked {
				// Bring the quorum back while every client asks a fresh connection whether
				// its session is refused: that connection gets a session at once.
				for _, l := range logs {
					l.waitFor(t, "keep dropping the session handshake", 3*tt.timeout)
				}
			}
			time.Sleep(tt.down) // the outage, not a wait for a condition
			errs := make(chan error, 2)
			go func() { errs <- b.ens.Start(b.leader) }()
			go func() { errs <- b.ens.Start(f) }()
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if _, err := b.ens.WaitLeader(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			t.Logf("quorum back %v after it was lost", time.Since(lost).Round(time.Millisecond))
			for i, c := range clients {
				st := waitStatus(t, c, 30*time.Second, "connected again", func(s Status) bool { return s.State == Connected })
				if st.SessionID != sids[i] {
					t.Errorf("client %d: session %#x after the quorum came back, want the old %#x kept", i, st.SessionID, sids[i])
				}
			}
		})
	}
}

// A follower whose leader is frozen keeps answering reads until it gives the leader up
// (syncLimit × tickTime later), while the leader, which expires sessions, hears nothing. So
// LastContact must stop at the freeze: only a round trip through the leader advances it.
func TestLastContactStopsWhenTheLeaderFreezes(t *testing.T) {
	t.Parallel()
	// A follower gives its leader up after 10 ticks, 5 s: the window in which it answers alone.
	ens := testenv.NewZKEnsemble(t, 3, testenv.ZKEnsembleOptions{SyncLimit: 10})
	leader, err := ens.WaitLeader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b := &testBundle{log: newLogSink(t), zk: testenv.ZK{Servers: []string{ens.Addr((leader + 1) % 3)}, Root: "/zksched"}}
	cfg := b.config()
	cfg.SessionTimeout = 4 * time.Second
	c := b.dial(t, cfg)
	first := c.LastContact()
	eventually(t, 5*time.Second, "LastContact to advance", func() bool { return c.LastContact().After(first) })

	frozenAt := time.Now()
	if err := ens.Freeze(leader); err != nil {
		t.Fatal(err)
	}
	// Ten probe intervals, well inside the follower's 5 s of answering alone. (The client may
	// drop the follower meanwhile: the follower answers its pings only after the pending Sync.)
	<-time.After(10 * probeInterval(c.SessionTimeout()))
	if last := c.LastContact(); last.After(frozenAt) {
		t.Fatalf("LastContact %v after the leader froze, want at most the freeze; the follower answered alone",
			last.Sub(frozenAt).Round(time.Millisecond))
	}

	if err := ens.Thaw(leader); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "LastContact to advance once the leader is back", func() bool {
		return c.LastContact().After(frozenAt)
	})
}

// Ensemble reports each configured server's mode: one leader and two followers in a whole
// ensemble; a stopped server is unreachable, with the reason; the others keep their modes.
func TestEnsembleModes(t *testing.T) {
	b := setupEnsemble(t)
	if err := b.ens.WaitServing(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	c := b.dial(t, b.config())
	modes := func() map[string]int {
		out := map[string]int{}
		for i, m := range c.Ensemble(t.Context()) {
			if m.Address != b.ens.Servers()[i] {
				t.Fatalf("member %d is %s, want the configured %s", i, m.Address, b.ens.Servers()[i])
			}
			out[m.Mode]++
			if (m.Mode == ModeUnreachable) != (m.Error != "") {
				t.Errorf("member %+v: an error with unreachable and only then", m)
			}
		}
		return out
	}
	if got := modes(); got[ModeLeader] != 1 || got[ModeFollower] != 2 {
		t.Fatalf("modes = %v, want one leader and two followers", got)
	}
	f, _ := b.followers()
	b.ens.Stop(f)
	if got := modes(); got[ModeLeader] != 1 || got[ModeFollower] != 1 || got[ModeUnreachable] != 1 {
		t.Fatalf("modes with a follower stopped = %v, want a leader, a follower and one unreachable", got)
	}
	cl, err := c.Cluster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.ZooKeeper) != 3 {
		t.Fatalf("Cluster's ZooKeeper = %+v, want the three servers", cl.ZooKeeper)
	}
}

// A server without quorum answers srvr with a line saying it is not serving: that is no
// mode, and says why.
func TestServerModeNotServing(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4)
			_, _ = io.ReadFull(conn, buf)
			_, _ = conn.Write([]byte("This ZooKeeper instance is not currently serving requests\n"))
			conn.Close()
		}
	}()
	// A port just freed: nothing listens there.
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := gone.Addr().String()
	gone.Close()
	got := serverModes(t.Context(), nil, []string{ln.Addr().String(), closed})
	if got[0].Mode != ModeUnreachable || !strings.Contains(got[0].Error, "not serving") {
		t.Errorf("a server without quorum = %+v, want unreachable, not serving", got[0])
	}
	if got[1].Mode != ModeUnreachable || !strings.Contains(got[1].Error, "refused") {
		t.Errorf("a closed port = %+v, want unreachable, connection refused", got[1])
	}
}
