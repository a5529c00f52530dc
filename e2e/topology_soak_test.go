package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/soak"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/registry"
)

// Fault kinds of the topology's nemesis.
const (
	hostKill        = "host-kill"       // kill -9 of every process of a host, started again later
	hostCut         = "host-cut"        // a host's link down, then up
	pgPrimaryKill   = "pg-primary-kill" // Patroni and PostgreSQL killed on the primary's host
	pgSwitchover    = "pg-switchover"   // a planned switchover to the synchronous standby
	zkLeaderKill    = "zk-leader-kill"  // the ZooKeeper leader's server killed
	workerKill      = "worker-kill"     // one worker killed with kill -9
	masterKill      = "leader-kill"     // the leading master killed with kill -9
	leaderMidFail   = "leader-change-mid-failover"
	badLinkKind     = "bad-link" // delay and loss on a host's link (badLink)
	hostFaultsEvery = 3 * time.Second
)

// hostFaultWeights are how often the topology's nemesis picks each kind.
var hostFaultWeights = []struct {
	kind   string
	weight int
}{
	{hostKill, 2}, {hostCut, 2}, {pgPrimaryKill, 2}, {pgSwitchover, 2}, {zkLeaderKill, 1},
	{workerKill, 2}, {masterKill, 1}, {leaderMidFail, 2}, {badLinkKind, 1},
}

// registry is a nemesis of the topology with a read-only registry client of its own, which
// reads the leading master and the registered workers.
func (h *hostFaults) registry(t *testing.T) *hostNemesis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := registry.Dial(ctx, registry.Config{Servers: strings.Split(h.envValue("ZKSCHED_REGISTRY_SERVERS"), ","),
		Root: "/zksched", SessionTimeout: 10 * time.Second, ReadOnly: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return &hostNemesis{h: h, t: t, reg: reg}
}

// hostNemesis harms the three simulated hosts one fault at a time: it waits for the cluster to
// be whole again (a ZooKeeper leader and two followers, a PostgreSQL primary with a
// synchronous standby, three masters and three workers registered) before the next, so that
// at most one host is impaired at once — the loss the topology promises to survive.
type hostNemesis struct {
	h   *hostFaults
	t   testing.TB
	reg *registry.Client

	mu       sync.Mutex
	counts   map[string]int
	events   []hostEvent
	lost     []soak.Lost
	failures []string
}

type hostEvent struct {
	at     time.Time
	kind   string
	detail string
}

func (n *hostNemesis) record(kind, detail string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, hostEvent{time.Now(), kind, detail})
	n.t.Logf("nemesis: %s %s", kind, detail)
}

func (n *hostNemesis) fail(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failures = append(n.failures, fmt.Sprintf(format, args...))
	n.t.Logf("nemesis: "+format, args...)
}

// Faults implements soak.Nemesis.
func (n *hostNemesis) Faults() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]int, len(n.counts))
	for k, v := range n.counts {
		out[k] = v
	}
	return out
}

// Lost implements soak.Nemesis.
func (n *hostNemesis) Lost() []soak.Lost {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]soak.Lost(nil), n.lost...)
}

// Failures implements soak.Nemesis.
func (n *hostNemesis) Failures() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.failures...)
}

// Log implements soak.Nemesis.
func (n *hostNemesis) Log(origin time.Time) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b strings.Builder
	for _, e := range n.events {
		fmt.Fprintf(&b, "  %+8.3fs %-27s %s\n", e.at.Sub(origin).Seconds(), e.kind, e.detail)
	}
	return b.String()
}

// Run implements soak.Nemesis: a fault, held for a drawn time, healed, the cluster whole
// again, a drawn pause, the next. The first faults are every kind once, in an order drawn
// from r, so that a long enough chaos has each under the mixed load; then kinds are drawn by
// weight.
func (n *hostNemesis) Run(ctx context.Context, r *rand.Rand) {
	total := 0
	for _, k := range hostFaultWeights {
		total += k.weight
	}
	first := r.Perm(len(hostFaultWeights))
	for tick := 0; ; tick++ {
		// The draws of a tick, whatever happens in it, so that a seed replays the schedule.
		pick, host, hold, extra := r.Intn(total), 1+r.Intn(3), 0.5+r.Float64(), r.Float64()
		pause := time.Duration(float64(hostFaultsEvery) * (0.5 + r.Float64()))
		select {
		case <-ctx.Done():
			n.healAll()
			return
		case <-time.After(pause):
		}
		if ok, why := n.whole(90 * time.Second); !ok {
			n.fail("the cluster was not whole 90 s after the last fault healed: %s", why)
			n.healAll()
			return
		}
		var kind string
		if tick < len(first) {
			kind = hostFaultWeights[first[tick]].kind
		} else {
			for _, k := range hostFaultWeights {
				if pick -= k.weight; pick < 0 {
					kind = k.kind
					break
				}
			}
		}
		n.mu.Lock()
		if n.counts == nil {
			n.counts = map[string]int{}
		}
		n.counts[kind]++
		n.mu.Unlock()
		n.inject(ctx, kind, host, hold, extra)
	}
}

// hold waits d, or less when the chaos ends first.
func hold(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// inject runs one fault of kind to its heal. host is the drawn host where the kind takes
// one, scale (0.5–1.5) stretches its length, extra places a second fault inside it.
func (n *hostNemesis) inject(ctx context.Context, kind string, host int, scale, extra float64) {
	h := n.h
	span := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	cluster := func(args ...string) {
		if out, err := h.runErr(5*time.Minute, args...); err != nil {
			n.fail("bin/cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// down kills one process of a host with stop-node and starts what the host lacks once
	// d (stretched) has passed, or the chaos has ended.
	down := func(host int, what string, d time.Duration) {
		cluster("stop-node", strconv.Itoa(host), what)
		n.record(kind, fmt.Sprintf("%s of host %d", what, host))
		hold(ctx, span(d))
		cluster("start", strconv.Itoa(host))
	}
	switch kind {
	case hostKill:
		n.noteLost(host)
		p := n.primary()
		cluster("kill", strconv.Itoa(host))
		n.record(kind, fmt.Sprintf("host %d (the PostgreSQL primary was on host %d)", host, p))
		hold(ctx, span(20*time.Second))
		cluster("start", strconv.Itoa(host))
	case hostCut:
		cluster("cut", strconv.Itoa(host))
		n.record(kind, fmt.Sprintf("host %d", host))
		hold(ctx, span(15*time.Second))
		cluster("heal", strconv.Itoa(host))
		// Its nodes were fenced if their sessions expired: a host's supervisor restarts them.
		cluster("start", strconv.Itoa(host))
	case pgPrimaryKill:
		p := n.primary()
		if p == 0 {
			n.fail("%s: no PostgreSQL primary", kind)
			return
		}
		down(p, "patroni", 15*time.Second)
	case pgSwitchover:
		p := n.primary()
		n.record(kind, fmt.Sprintf("from host %d", p))
		cluster("switchover")
		n.record(kind, fmt.Sprintf("done: primary on host %d", n.primary()))
	case zkLeaderKill:
		l := n.zkLeader()
		if l == 0 {
			n.fail("no zookeeper server leads")
			return
		}
		down(l, "zookeeper", 10*time.Second)
	case workerKill:
		n.noteLost(host)
		down(host, "worker", 6*time.Second)
	case masterKill:
		down(n.leaderHost(), "master", 4*time.Second)
	case leaderMidFail:
		// The leader is killed while the lost worker's failover is due: after its session
		// has expired (its znode gone), within the failover delay, or just after it.
		id := n.noteLost(host)
		cluster("stop-node", strconv.Itoa(host), "worker")
		n.record(kind, fmt.Sprintf("worker of host %d killed", host))
		gone := n.waitGone(id, 30*time.Second)
		time.Sleep(time.Duration(extra * float64(6*time.Second)))
		l := n.leaderHost()
		cluster("stop-node", strconv.Itoa(l), "master")
		n.record(kind, fmt.Sprintf("leading master of host %d killed, %v after the worker's session expired",
			l, time.Since(gone).Round(time.Millisecond)))
		hold(ctx, span(5*time.Second))
		cluster("start", strconv.Itoa(host))
		cluster("start", strconv.Itoa(l))
	case badLinkKind:
		what, undo, err := h.badLink(host)
		if err != nil {
			n.fail("%s: %v", kind, err)
		} else {
			n.record(kind, fmt.Sprintf("host %d: %s", host, what))
			hold(ctx, span(15*time.Second))
		}
		for _, args := range undo {
			cluster(args...)
		}
		cluster("start", strconv.Itoa(host))
	}
}

// healAll brings every link up and every process back.
func (n *hostNemesis) healAll() {
	for i := 1; i <= 3; i++ {
		for _, args := range [][]string{{"heal", strconv.Itoa(i)}, {"shape", strconv.Itoa(i), "off"}, {"loss", strconv.Itoa(i), "off"}, {"start", strconv.Itoa(i)}} {
			if out, err := n.h.runErr(5*time.Minute, args...); err != nil {
				n.fail("heal: bin/cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
	if ok, why := n.whole(2 * time.Minute); !ok {
		n.fail("the cluster was not whole 2 min after the chaos ended: %s", why)
	}
}

// primary is the PostgreSQL primary's host, 0 if there is none now.
func (n *hostNemesis) primary() int {
	nodes, err := dao.PostgresNodes(context.Background(), nil, strings.Split(n.h.envValue("ZKSCHED_DB_PATRONI_URLS"), ","))
	if err != nil {
		return 0
	}
	for _, m := range nodes {
		if m.Role == dao.RolePrimary {
			return n.hostOf(m.Address)
		}
	}
	return 0
}

// hostOf is the host number of an address or node identity on the topology's network.
func (n *hostNemesis) hostOf(addr string) int {
	host, _, _ := strings.Cut(strings.TrimPrefix(addr, n.h.net+"."), ":")
	i, _ := strconv.Atoi(host)
	return i
}

// registry reads the registry, retried while ZooKeeper is between leaders.
func (n *hostNemesis) registry() (registry.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.reg.Cluster(ctx)
}

// zkLeader is the host of the ZooKeeper ensemble's leader, 0 if none answers so.
func (n *hostNemesis) zkLeader() int {
	for i := 1; i <= 3; i++ {
		out, err := testenv.FourLetterWord(fmt.Sprintf("%s.%d:2181", n.h.net, i), "srvr", time.Second)
		if err == nil && strings.Contains(out, "Mode: leader") {
			return i
		}
	}
	return 0
}

// leaderHost is the host of the leading master (host 1 if the registry cannot say).
func (n *hostNemesis) leaderHost() int {
	cl, err := n.registry()
	if err != nil || cl.Leader == "" {
		return 1
	}
	return n.hostOf(cl.Leader)
}

// noteLost records host's registered worker as lost now and returns its identity.
func (n *hostNemesis) noteLost(host int) string {
	cl, err := n.registry()
	if err != nil {
		return ""
	}
	for _, w := range cl.Workers {
		if n.hostOf(w.ID) == host {
			n.mu.Lock()
			n.lost = append(n.lost, soak.Lost{Worker: w.ID, At: time.Now()})
			n.mu.Unlock()
			return w.ID
		}
	}
	return ""
}

// waitGone waits until the node id is no longer registered and returns when it saw that.
func (n *hostNemesis) waitGone(id string, d time.Duration) time.Time {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		cl, err := n.registry()
		if err != nil {
			continue
		}
		there := false
		for _, w := range cl.Workers {
			there = there || w.ID == id
		}
		if !there {
			return time.Now()
		}
	}
	return time.Now()
}

// whole waits up to d for the cluster to be whole: a ZooKeeper leader and two followers, a
// PostgreSQL primary with a synchronous standby and the third node streaming, three masters
// and three workers registered. When it is not, why says what was missing last.
func (n *hostNemesis) whole(d time.Duration) (ok bool, why string) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		modes := map[string]int{}
		for i := 1; i <= 3; i++ {
			out, err := testenv.FourLetterWord(fmt.Sprintf("%s.%d:2181", n.h.net, i), "srvr", time.Second)
			if err == nil {
				for _, m := range []string{"leader", "follower"} {
					if strings.Contains(out, "Mode: "+m) {
						modes[m]++
					}
				}
			}
		}
		if modes["leader"] != 1 || modes["follower"] != 2 {
			why = fmt.Sprintf("zookeeper servers' modes %v", modes)
			continue
		}
		nodes, err := dao.PostgresNodes(context.Background(), nil, strings.Split(n.h.envValue("ZKSCHED_DB_PATRONI_URLS"), ","))
		if err != nil || len(nodes) != 3 {
			why = fmt.Sprintf("postgresql nodes %+v (%v)", nodes, err)
			continue
		}
		roles := map[string]int{}
		for _, m := range nodes {
			roles[m.Role+" "+m.Note]++
		}
		if roles["primary "] != 1 || roles["standby synchronous"] != 1 || roles["standby "] != 1 {
			why = fmt.Sprintf("postgresql nodes %+v", nodes)
			continue
		}
		cl, err := n.registry()
		if err != nil || len(cl.Masters) != 3 || len(cl.Workers) != 3 {
			why = fmt.Sprintf("registry: %d masters, %d workers (%v)", len(cl.Masters), len(cl.Workers), err)
			continue
		}
		return true, ""
	}
	return false, why
}

// TestTopologySoak is the randomized soak on the three simulated hosts: the soak's mixed
// workload (DAGs, retry storms with no interval, pools, agent tasks on a test model server,
// timeouts, kills and reruns, stops, wait tasks and signals, for-each, child workflows,
// concurrency keys) on workers of two slots each, under a seeded nemesis of host faults
// (a host killed or cut off, the PostgreSQL primary killed or switched over, the ZooKeeper
// leader killed, a worker or the leading master killed, the leader killed in the middle of a
// worker's failover, a bad link: delay and loss), one host at a time: every kind once in a drawn order, then
// kinds drawn by weight. The verdict is the soak's: the history
// of every workflow, its pools, signals and flows. The seed is logged first:
// ZKSCHED_TOPOLOGY_SEED replays the schedule, ZKSCHED_TOPOLOGY_DURATION lengthens it.
func TestTopologySoak(t *testing.T) {
	cfg := soak.Config{Duration: 4 * time.Minute, Seed: time.Now().UnixNano() % 1e9, Drain: 3 * time.Minute,
		SubmitEvery: 1500 * time.Millisecond, Servers: 3, Logf: t.Logf, Detail: testing.Verbose()}
	if v := os.Getenv("ZKSCHED_TOPOLOGY_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("ZKSCHED_TOPOLOGY_SEED=%q: %v", v, err)
		}
		cfg.Seed = s
	}
	if v := os.Getenv("ZKSCHED_TOPOLOGY_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ZKSCHED_TOPOLOGY_DURATION=%q: %v", v, err)
		}
		cfg.Duration = d
	}
	t.Logf("topology soak: seed %d (replay with ZKSCHED_TOPOLOGY_SEED=%d)", cfg.Seed, cfg.Seed)

	h := startHostFaults(t, "zkq", "10.82.0", func(tp *topology) {
		model := soak.NewModel(t)
		proxy := testenv.NewProxyOn(t, tp.net+".254:0", strings.TrimPrefix(model.URL, "http://"))
		tp.env = append(tp.env, soak.NodeEnv(model, "http://"+proxy.Addr()+"/v1")...)
		tp.env = append(tp.env, "ZKSCHED_WORKER_SLOTS=2")
	})
	var masters []string
	for i := 1; i <= 3; i++ {
		masters = append(masters, fmt.Sprintf("http://%s.%d:5678", h.net, i))
	}
	nm := h.registry(t)
	res := soak.RunOn(t, cfg, soak.Outside{Masters: masters, Token: h.envValue("ZKSCHED_TOKEN"), DB: h.db, Rec: h.rec, Nemesis: nm})
	t.Logf("%s", res)
	if res.Detail != "" {
		t.Logf("%s", res.Detail)
	}
	if len(res.Faults) == 0 {
		t.Errorf("the nemesis injected no fault")
	}
	for _, k := range hostFaultWeights {
		if res.Faults[k.kind] == 0 {
			t.Logf("the chaos ended before a fault of kind %s (a longer ZKSCHED_TOPOLOGY_DURATION reaches every kind)", k.kind)
		}
	}
	if len(res.Anomalies) > 0 {
		t.Errorf("topology soak: seed %d: %d anomal(ies); replay with ZKSCHED_TOPOLOGY_SEED=%d:\n%s", res.Seed, len(res.Anomalies), res.Seed,
			strings.Join(res.Anomalies, "\n"))
	}
}
