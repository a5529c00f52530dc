package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/registry"
)

// Losing one server of a three-server ensemble, whichever it is and however it goes (killed,
// frozen past the session timeout), costs no failover and no fenced node: the clients move to
// the other servers and their sessions live on. The nodes' sessions are 8 s, above
// 2 × syncLimit × tickTime (2 × 5 × 500 ms) as registry/doc.go asks: a frozen leader is given up
// by its followers after 2.5 s, and a new one is elected well before any session could expire.
//
// It does not run in parallel, like TestSoak: what it counts on is ZooKeeper's own election
// finishing within the session's margin, and three JVMs starved of the two cores by the
// parallel suite (browsers, TLS ensembles, floods of hostile files) can take longer than that
// to elect, whatever zksched's clients do.
func TestFaultOneZooKeeperServerLost(t *testing.T) {
	ens := testenv.NewZKEnsemble(t, 3, testenv.ZKEnsembleOptions{})
	root := "/" + testenv.Name("zksched-test-")
	db, dsn := daotest.New(t)
	rec := history.New(t)
	c := testcluster.New(t, ens.Servers(), root, dsn, append(rec.Env(),
		"ZKSCHED_REGISTRY_SESSION_TIMEOUT=8s", "ZKSCHED_FAILOVER_DELAY=2s", "ZKSCHED_WORKER_KILL_GRACE=500ms",
		"ZKSCHED_WORKER_POLL_INTERVAL=200ms", "ZKSCHED_MASTER_POLL_INTERVAL=200ms")...)
	f := &fault{Cluster: c, db: db, rec: rec, root: root}
	nodes := []*proc{f.startMaster(t, "master-1"), f.startMaster(t, "master-2"),
		f.startWorker(t, "worker-1", 2), f.startWorker(t, "worker-2", 2)}
	wf := f.submit(t, "one-server-lost", parallel(4, "sleep 45")...)
	f.waitRuns(t, 30*time.Second, "4 tasks running", func(rs []history.Run) bool { return aliveCount(rs) == 4 })
	faultAt := time.Now()

	leader := func() int {
		t.Helper()
		i, err := ens.WaitLeader(20 * time.Second)
		if err != nil {
			t.Fatalf("no zookeeper leader: %v\n%s", err, ens.Logs())
		}
		return i
	}
	// Each fault, then the server back and the ensemble whole again: a server just restarted
	// is no member yet until it has caught up with the leader (until then it would notice a
	// frozen leader only after initLimit, not syncLimit), and a fault then would be a second
	// one on an ensemble that has lost one already.
	whole := func() {
		t.Helper()
		if err := ens.WaitServing(30 * time.Second); err != nil {
			t.Fatalf("the ensemble is not whole again: %v\n%s", err, ens.Logs())
		}
	}
	follower := (leader() + 1) % 3
	t.Logf("fault: kill -9 of follower %d", follower)
	ens.Stop(follower)
	time.Sleep(5 * time.Second) // the outage itself: its clients must do without it a while
	if err := ens.Start(follower); err != nil {
		t.Fatal(err)
	}
	whole()

	l := leader()
	t.Logf("fault: kill -9 of leader %d", l)
	ens.Stop(l)
	time.Sleep(5 * time.Second) // the outage itself: the other two must elect and serve without it
	if err := ens.Start(l); err != nil {
		t.Fatal(err)
	}
	whole()

	l = leader()
	t.Logf("fault: leader %d frozen for 10 s, past the session timeout", l)
	if err := ens.Freeze(l); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second) // the freeze itself, past the nodes' session timeout
	if err := ens.Thaw(l); err != nil {
		t.Fatal(err)
	}
	leader()

	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt, Deadline: 90 * time.Second})
	f.expectUndisturbed(t, rep, wf)
	zc := testenv.DialZKServers(t, ens.Servers())
	for _, n := range nodes {
		stillRunning(t, n)
		role := registry.RoleWorker
		if strings.HasPrefix(n.Name, "master") {
			role = registry.RoleMaster
		}
		if rec, fenced := f.marker(t, zc, role, n.id); fenced {
			t.Errorf("%s was fenced (%+v)", n.Name, rec)
		}
		if strings.Contains(n.Log(), "past the session timeout") {
			t.Errorf("%s's watchdog fired:\n%s", n.Name, grepLines(n.Log(), "past the session timeout"))
		}
	}
	t.Logf("figure: %s", rep.Summary())
	t.Logf("figure: the ensemble's elections:\n%s", strings.Join(ens.Elections(), "\n"))
}

// grepLines returns the lines of s that contain substr.
func grepLines(s, substr string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
