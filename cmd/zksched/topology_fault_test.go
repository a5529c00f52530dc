package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/master"
	"github.com/zksched/zksched/workflow"
)

// hostFaults is a topology whose tasks keep a run log (history.Recorder) on the shared
// PostgreSQL, reached from the hosts through a proxy on the bridge's address, and the test's
// own connection to the topology's database.
type hostFaults struct {
	*topology
	rec *history.Recorder
	db  *dao.DB
}

// startHostFaults brings up a topology named name on the network net whose workers' tasks
// can write the run log.
func startHostFaults(t *testing.T, name, net string) *hostFaults {
	t.Helper()
	tp := newTopology(t, name, net)
	tp.run(t, time.Minute, "net")
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

// load submits a workflow every interval until stop is called, as a client would: a
// submission that fails (the database switching over) is logged and the next one tried.
func (h *hostFaults) load(t *testing.T, every time.Duration) (stop func() int) {
	t.Helper()
	spec := h.loadSpec(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	submitted, failed := 0, 0
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := master.Define(sctx, h.db, master.Definition{Spec: spec, Run: &master.Run{}}, time.Now())
			scancel()
			mu.Lock()
			if err != nil {
				failed++
			} else {
				submitted++
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() int {
		cancel()
		wg.Wait()
		t.Logf("load: %d workflows submitted, %d submissions failed (and not retried)", submitted, failed)
		return submitted
	}
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

// claimsStall is how long after at no attempt started anywhere: the first start in the run
// log after at, less at.
func (h *hostFaults) claimsStall(t *testing.T, at time.Time) time.Duration {
	t.Helper()
	var first time.Time
	waitUntil(t, 2*time.Minute, "an attempt to start after the fault", func() bool {
		evs, err := h.rec.Events(context.Background())
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.Kind == history.EventStart && e.At.After(at) && (first.IsZero() || e.At.Before(first)) {
				first = e.At
			}
		}
		return !first.IsZero()
	})
	return first.Sub(at)
}

// TestTopologyHostLost: under a steady load, every process of the host that runs the
// PostgreSQL primary is killed with kill -9 — its ZooKeeper server, Patroni and PostgreSQL,
// HAProxy, master and worker — and the host comes back 30 s later. Patroni promotes the
// synchronous standby, the other hosts' nodes reconnect through their HAProxy, the lost
// worker's tasks run elsewhere, and the history shows no task lost, no result committed
// twice and no two runs of a task overlapping.
func TestTopologyHostLost(t *testing.T) {
	h := startHostFaults(t, "zkf", "10.81.0")
	stop := h.load(t, 500*time.Millisecond)
	time.Sleep(8 * time.Second) // the load running before the fault, not a wait for a condition
	victim := h.primary(t)
	faultAt := time.Now()
	h.run(t, time.Minute, "kill", strconv.Itoa(victim))
	t.Logf("killed every process of host %d, the PostgreSQL primary's", victim)
	waitUntil(t, time.Minute, "a new primary", func() bool {
		nodes, err := dao.PostgresNodes(context.Background(), nil, strings.Split(h.envValue("ZKSCHED_DB_PATRONI_URLS"), ","))
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if n.Role == dao.RolePrimary && !strings.HasPrefix(n.Address, fmt.Sprintf("%s.%d:", h.net, victim)) {
				return true
			}
		}
		return false
	})
	figure(t, "host of the PostgreSQL primary killed → a new primary", time.Since(faultAt), 0)
	figure(t, "host of the PostgreSQL primary killed → the next attempt starts anywhere", h.claimsStall(t, faultAt), 0)
	time.Sleep(20 * time.Second) // the load running on two hosts
	h.run(t, 5*time.Minute, "start", strconv.Itoa(victim))
	time.Sleep(10 * time.Second) // the load running with the host back
	if stop() == 0 {
		t.Fatal("no workflow was submitted")
	}
	// kill -9 may land between a body's end and the commit of its result: the task runs again.
	rep := history.Check(t, h.db, h.rec, history.Options{FaultAt: faultAt, Deadline: 3 * time.Minute, AtLeastOnce: true})
	figure(t, "host lost → its worker's tasks running elsewhere (slowest)", rep.MaxElsewhere(), 0)
	figure(t, "overlap", rep.MaxOverlap(), 0)
	t.Log(rep.Summary())
}
