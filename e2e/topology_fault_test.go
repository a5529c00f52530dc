package e2e

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// hostFaults is a topology whose tasks keep a run log (history.Recorder) on the shared
// PostgreSQL, reached from the hosts through a proxy on the bridge's address, and the test's
// own connection to the topology's database.
type hostFaults struct {
	*topology
	rec *history.Recorder
	db  *dao.DB
	// loadStopped is when the last load stopped submitting.
	loadStopped time.Time
}

// startHostFaults brings up a topology named name on the network net whose workers' tasks
// can write the run log. prepare, if not nil, runs once the network is up and before the
// hosts start: it may add to the hosts' environment (tp.env) and listen on the bridge.
func startHostFaults(t *testing.T, name, net string, prepare func(tp *topology)) *hostFaults {
	t.Helper()
	tp := newTopology(t, name, net)
	tp.run(t, time.Minute, "net")
	if prepare != nil {
		prepare(tp)
	}
	rec := history.New(t)
	for _, kv := range rec.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if k == "RUNLOG_DSN" {
			u, err := url.Parse(v)
			if err != nil {
				t.Fatal(err)
			}
			proxy := testenv.NewProxyOn(t, net+".254:0", u.Host)
			u.Host = proxy.Addr()
			v = u.String()
		}
		tp.env = append(tp.env, k+"="+v)
	}
	tp.up(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := dao.Open(ctx, tp.envValue("ZKSCHED_DB_DSN"), 8, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &hostFaults{topology: tp, rec: rec, db: db}
}

// loadSpec is the steady load's workflow: two recorded tasks side by side, then a third.
func (h *hostFaults) loadSpec(t *testing.T) *workflow.Spec {
	t.Helper()
	raw := fmt.Sprintf(`name: steady
tasks:
  - {name: a, type: shell, command: %q}
  - {name: b, type: shell, command: %q}
  - {name: c, type: shell, command: %q, depends-on: [a, b]}
`, h.rec.Command("sleep 1"), h.rec.Command("sleep 2"), h.rec.Command("sleep 0.5"))
	spec, err := workflow.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// load submits a workflow every interval until stop is called, as a client on host via's
// HAProxy would: a submission that fails (the database switching over) is counted and the
// next one tried. The client is not on the host the scenario harms, whose link may be cut:
// its load is the cluster's work, not a measure of one client's connection. stop returns the
// instances submitted.
func (h *hostFaults) load(t *testing.T, every time.Duration, via int) (stop func() []int64) {
	t.Helper()
	spec := h.loadSpec(t)
	dsn := h.envValue("ZKSCHED_DB_DSN")
	hosts := regexp.MustCompile(`host=\S+`)
	dsn = hosts.ReplaceAllString(dsn, fmt.Sprintf("host=%s.%d", h.net, via))
	octx, ocancel := context.WithTimeout(context.Background(), time.Minute)
	db, err := dao.Open(octx, dsn, 4, zerolog.Nop())
	ocancel()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ids []int64
	failed := 0
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := lifecycle.Define(sctx, db, lifecycle.Definition{Spec: spec, Run: &lifecycle.Run{}}, time.Now())
			scancel()
			if err != nil {
				failed++
			} else {
				ids = append(ids, st.Instance)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() []int64 {
		cancel()
		wg.Wait()
		db.Close()
		h.loadStopped = time.Now()
		t.Logf("load: %d workflows submitted, %d submissions failed (and not retried)", len(ids), failed)
		if len(ids) == 0 {
			t.Fatal("no workflow was submitted")
		}
		return ids
	}
}

// badLink makes host's link bad: 100 ms ± 20 ms of delay and 5 % loss with netem where the
// kernel has it; else (a VM kernel without sch_netem) a slow link from tbf, which delays
// packets in its queue and drops what overflows it, with 5 % of the packets to and from the
// host dropped at random by nftables. It returns what it did and the cluster.sh commands that
// undo it.
func (h *hostFaults) badLink(host int) (what string, undo [][]string, err error) {
	hs := strconv.Itoa(host)
	out, err := h.runErr(time.Minute, "netem", hs, "delay", "100ms", "20ms", "loss", "5%")
	if err == nil {
		return "100 ms ± 20 ms of delay and 5 % loss (netem)", [][]string{{"netem", hs, "off"}}, nil
	}
	if !strings.Contains(out, "sch_netem") {
		return "", nil, fmt.Errorf("cluster.sh netem: %v\n%s", err, out)
	}
	undo = [][]string{{"shape", hs, "off"}, {"loss", hs, "off"}}
	for _, args := range [][]string{{"shape", hs, "512kbit", "200ms"}, {"loss", hs, "5%"}} {
		if out, err := h.runErr(time.Minute, args...); err != nil {
			return "", undo, fmt.Errorf("cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return "no netem in this kernel: 512 kbit/s queued up to 200 ms (tbf), 5 % of the packets dropped at random (nftables)", undo, nil
}

// primary is the host number of the PostgreSQL primary, by Patroni.
func (h *hostFaults) primary(t *testing.T) int {
	t.Helper()
	nodes, err := dao.PostgresNodes(context.Background(), nil, strings.Split(h.envValue("ZKSCHED_DB_PATRONI_URLS"), ","))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Role == dao.RolePrimary {
			host, _, _ := strings.Cut(n.Address, ":")
			i, err := strconv.Atoi(host[strings.LastIndexByte(host, '.')+1:])
			if err != nil {
				t.Fatal(err)
			}
			return i
		}
	}
	t.Fatalf("no primary among %+v", nodes)
	return 0
}

// claimsStall is the longest time in the window after at during which no attempt started
// anywhere (counting from at itself): while the steady load runs attempts start several times
// a second, so this is how long the fault stopped the claims.
func (h *hostFaults) claimsStall(t *testing.T, at time.Time, window time.Duration) time.Duration {
	t.Helper()
	evs, err := h.rec.Events(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	for _, e := range evs {
		if e.Kind == history.EventStart && e.At.After(at) && e.At.Before(at.Add(window)) {
			starts = append(starts, e.At)
		}
	}
	slices.SortFunc(starts, time.Time.Compare)
	longest, last := time.Duration(0), at
	for _, s := range append(starts, at.Add(window)) {
		longest = max(longest, s.Sub(last))
		last = s
	}
	return longest
}

// judge checks the history of the scenario's workflows: none lost, no result committed twice,
// no two runs of a task overlapping. kill -9 and a cut link may land between a body's end
// and the commit of its result: the task then runs again (AtLeastOnce).
func (h *hostFaults) judge(t *testing.T, ids []int64, faultAt time.Time) *history.Report {
	t.Helper()
	return h.judgeWith(t, ids, faultAt, true)
}

// judgeWith is judge; atLeastOnce false also requires that no task's body ran twice.
func (h *hostFaults) judgeWith(t *testing.T, ids []int64, faultAt time.Time, atLeastOnce bool) *history.Report {
	t.Helper()
	figure(t, "the longest time without an attempt starting, from the fault to the load's end",
		h.claimsStall(t, faultAt, h.loadStopped.Sub(faultAt)), 0)
	rep := history.Check(t, h.db, h.rec, history.Options{Workflows: ids, FaultAt: faultAt, Deadline: 3 * time.Minute, AtLeastOnce: atLeastOnce})
	figure(t, "fault → the lost tasks running elsewhere (slowest)", rep.MaxElsewhere(), 0)
	figure(t, "overlap", rep.MaxOverlap(), 0)
	t.Log(rep.Summary())
	return rep
}

// waitPrimaryNotOn waits until a PostgreSQL primary other than host's answers, and returns
// how long after since that was.
func (h *hostFaults) waitPrimaryNotOn(t *testing.T, host int, since time.Time) time.Duration {
	t.Helper()
	waitUntil(t, 2*time.Minute, "a new primary", func() bool {
		nodes, err := dao.PostgresNodes(context.Background(), nil, strings.Split(h.envValue("ZKSCHED_DB_PATRONI_URLS"), ","))
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if n.Role == dao.RolePrimary && !strings.HasPrefix(n.Address, fmt.Sprintf("%s.%d:", h.net, host)) {
				return true
			}
		}
		return false
	})
	return time.Since(since)
}

// zkLeader is the host number of the ZooKeeper ensemble's leader.
func (h *hostFaults) zkLeader(t *testing.T) int {
	t.Helper()
	for i := 1; i <= 3; i++ {
		out, err := testenv.FourLetterWord(fmt.Sprintf("%s.%d:2181", h.net, i), "srvr", time.Second)
		if err == nil && strings.Contains(out, "Mode: leader") {
			return i
		}
	}
	t.Fatal("no zookeeper server leads")
	return 0
}

// other is the host after host, of the three.
func other(host int) int { return 1 + host%3 }

// TestTopologyFaults runs the faults a host can suffer, one after another on one topology,
// each under a steady load of workflows (two recorded tasks side by side, then a third, two a
// second) and judged by the history of its own workflows:
//
//   - host lost: every process of the PostgreSQL primary's host killed with kill -9 (its
//     ZooKeeper server, Patroni and PostgreSQL, HAProxy, master and worker), back 30 s later;
//   - host cut off: the primary's host's link down for 25 s, then up;
//   - PostgreSQL primary lost: Patroni and PostgreSQL killed on the primary's host, back later;
//   - PostgreSQL switched over: a planned switchover (patronictl) to the synchronous standby,
//     judged exactly once: no task's body runs twice;
//   - the leading master lost in the middle of a worker's failover: a worker killed, and once
//     ZooKeeper has expired its session (the leader waiting out the failover delay) the leader
//     killed too; the next leader fails the worker over;
//   - ZooKeeper leader lost: the leader's server killed, back later;
//   - a bad link: 100 ms ± 20 ms of delay and 5 % loss on one host's link for 20 s (where the
//     kernel has no netem: a 512 kbit/s queue of up to 200 ms and 5 % random loss; badLink).
//
// Patroni promotes the synchronous standby when the primary goes; the other hosts' nodes
// reconnect through their HAProxy; a lost or cut worker's tasks run elsewhere.
func TestTopologyFaults(t *testing.T) {
	h := startHostFaults(t, "zkf", "10.81.0", nil)
	pause := func(d time.Duration) { time.Sleep(d) } // the load running, not a wait for a condition

	t.Run("host lost", func(t *testing.T) {
		victim := h.primary(t)
		stop := h.load(t, 500*time.Millisecond, other(victim))
		pause(8 * time.Second)
		faultAt := time.Now()
		h.run(t, time.Minute, "kill", strconv.Itoa(victim))
		t.Logf("killed every process of host %d, the PostgreSQL primary's", victim)
		figure(t, "host of the PostgreSQL primary killed → a new primary", h.waitPrimaryNotOn(t, victim, faultAt), 0)
		pause(20 * time.Second)
		h.run(t, 5*time.Minute, "start", strconv.Itoa(victim))
		pause(10 * time.Second)
		h.judge(t, stop(), faultAt)
	})

	t.Run("host cut off", func(t *testing.T) {
		victim := h.primary(t)
		stop := h.load(t, 500*time.Millisecond, other(victim))
		pause(8 * time.Second)
		faultAt := time.Now()
		h.run(t, time.Minute, "cut", strconv.Itoa(victim))
		t.Logf("cut host %d, the PostgreSQL primary's, off the others", victim)
		figure(t, "primary's host cut off → a new primary", h.waitPrimaryNotOn(t, victim, faultAt), 0)
		pause(15 * time.Second)
		h.run(t, time.Minute, "heal", strconv.Itoa(victim))
		// The cut host's master and worker learn on reconnecting that they were fenced and
		// exit 75; their supervisor starts them again as new identities, as systemd would.
		// start brings back anything else the host lacks.
		h.run(t, 5*time.Minute, "start", strconv.Itoa(victim))
		pause(10 * time.Second)
		h.judge(t, stop(), faultAt)
	})

	t.Run("postgresql primary lost", func(t *testing.T) {
		victim := h.primary(t)
		stop := h.load(t, 500*time.Millisecond, other(victim))
		pause(8 * time.Second)
		faultAt := time.Now()
		h.run(t, time.Minute, "stop-node", strconv.Itoa(victim), "patroni")
		t.Logf("killed Patroni and PostgreSQL on host %d, the primary", victim)
		figure(t, "PostgreSQL primary killed → a new primary", h.waitPrimaryNotOn(t, victim, faultAt), 0)
		pause(10 * time.Second)
		h.run(t, 5*time.Minute, "start", strconv.Itoa(victim))
		pause(10 * time.Second)
		h.judge(t, stop(), faultAt)
	})

	t.Run("postgresql switchover", func(t *testing.T) {
		from := h.primary(t)
		stop := h.load(t, 500*time.Millisecond, other(from))
		pause(8 * time.Second)
		faultAt := time.Now()
		h.run(t, 2*time.Minute, "switchover")
		figure(t, "switchover asked → the new primary promoted (patronictl returned)", time.Since(faultAt), 0)
		t.Logf("switched PostgreSQL over from host %d to host %d", from, h.primary(t))
		pause(15 * time.Second)
		// Nothing was killed and no session lost: each task's body runs once.
		h.judgeWith(t, stop(), faultAt, false)
	})

	t.Run("leader lost mid-failover", func(t *testing.T) {
		reg := h.registry(t)
		leader := reg.leaderHost()
		victim := other(leader)
		stop := h.load(t, 500*time.Millisecond, other(victim))
		pause(8 * time.Second)
		faultAt := time.Now()
		lost := reg.noteLost(victim)
		h.run(t, time.Minute, "stop-node", strconv.Itoa(victim), "worker")
		gone := reg.waitGone(lost, 30*time.Second)
		figure(t, "worker killed → its session expired (znode gone)", gone.Sub(faultAt), 0)
		// Inside the failover delay: the leader has seen the loss and not yet fenced.
		time.Sleep(time.Second)
		cl, err := reg.registry()
		if err != nil {
			t.Fatal(err)
		}
		h.run(t, time.Minute, "stop-node", strconv.Itoa(leader), "master")
		t.Logf("killed the worker of host %d (%s), then the leading master of host %d (%s) %v after the worker's session expired",
			victim, lost, leader, cl.Leader, time.Since(gone).Round(time.Millisecond))
		var by string
		waitUntil(t, time.Minute, "the lost worker's failover", func() bool {
			return h.db.SQL().QueryRowContext(context.Background(),
				`SELECT leader FROM failover_event WHERE node_id = $1 AND finished_at IS NOT NULL`, lost).Scan(&by) == nil
		})
		if by == cl.Leader {
			t.Errorf("the killed leader %s is recorded as failing the worker over; want the next leader", by)
		}
		figure(t, "worker killed → failed over by the next leader", time.Since(faultAt), 0)
		pause(10 * time.Second)
		h.run(t, 5*time.Minute, "start", strconv.Itoa(victim))
		h.run(t, 5*time.Minute, "start", strconv.Itoa(leader))
		pause(5 * time.Second)
		h.judge(t, stop(), faultAt)
	})

	t.Run("zookeeper leader lost", func(t *testing.T) {
		victim := h.zkLeader(t)
		stop := h.load(t, 500*time.Millisecond, other(victim))
		pause(8 * time.Second)
		faultAt := time.Now()
		h.run(t, time.Minute, "stop-node", strconv.Itoa(victim), "zookeeper")
		t.Logf("killed the ZooKeeper leader, on host %d", victim)
		pause(15 * time.Second)
		h.run(t, 5*time.Minute, "start", strconv.Itoa(victim))
		pause(10 * time.Second)
		h.judge(t, stop(), faultAt)
	})

	t.Run("bad link", func(t *testing.T) {
		victim := other(h.primary(t)) // a standby's host, whose node talks to the primary across the link
		stop := h.load(t, 500*time.Millisecond, other(victim))
		pause(8 * time.Second)
		faultAt := time.Now()
		what, undo, err := h.badLink(victim)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("host %d's link: %s", victim, what)
		pause(20 * time.Second)
		for _, args := range undo {
			h.run(t, time.Minute, args...)
		}
		// A worker or master that lost its session to the loss was fenced, exited and was
		// started again by its supervisor; start brings back anything else the host lacks.
		h.run(t, 5*time.Minute, "start", strconv.Itoa(victim))
		pause(5 * time.Second)
		h.judge(t, stop(), faultAt)
	})
}
