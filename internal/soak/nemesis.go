package soak

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/registry"
)

// Fault kinds, as counted and as Config.Kinds names them.
const (
	KillWorker     = "kill-worker"
	KillMaster     = "kill-master"
	KillLeader     = "kill-leader"
	PauseShort     = "pause-short"
	PauseLong      = "pause-long"
	FreezeMachine  = "freeze-machine"
	ZKCutShort     = "zk-cut-short"
	ZKCutLong      = "zk-cut-long"
	ZKKillServer   = "zk-kill-server"
	ZKQuorumLoss   = "zk-quorum-loss"
	ZKFreezeLeader = "zk-freeze-leader"
	PGRestart      = "pg-restart"
	PGCut          = "pg-cut"
	LogBlocked     = "log-blocked"
	TermDuringCut  = "sigterm-during-cut"
)

// faultWeights are how often each kind is picked, relative to the others.
var faultWeights = map[string]int{
	KillWorker: 3, KillMaster: 1, KillLeader: 1, PauseShort: 2, PauseLong: 2, FreezeMachine: 1,
	ZKCutShort: 2, ZKCutLong: 2, ZKKillServer: 2, ZKQuorumLoss: 1, ZKFreezeLeader: 1, PGRestart: 1, PGCut: 2,
	LogBlocked: 2, TermDuringCut: 1,
}

// FaultKinds returns every fault kind, sorted.
func FaultKinds() []string {
	out := make([]string, 0, len(faultWeights))
	for k := range faultWeights {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// faultEvent is one fault, for the log printed with a failure.
type faultEvent struct {
	at     time.Time
	kind   string
	target string
	detail string
}

// killEvent is a kill -9 of a worker, for the time its tasks took to run elsewhere.
type killEvent struct {
	worker string
	at     time.Time
}

// nemesis injects the faults. Its schedule (which fault, on which node, for how long) comes
// from its own generator; each fault runs in a goroutine of its own, so that several overlap.
type nemesis struct {
	cl       *cluster
	ens      Ensemble
	pg       *testenv.PGServer
	zkc      *zk.Conn
	root     string
	kinds    []string
	every    time.Duration
	session  time.Duration
	delay    time.Duration
	logf     func(format string, args ...any)
	wg       sync.WaitGroup
	mu       sync.Mutex
	counts   map[string]int
	events   []faultEvent
	kills    []killEvent
	freezes  []history.Freeze
	zkBusy   bool
	pgBusy   bool
	failures []string
}

// run injects faults until ctx ends, then waits for the faults under way to heal.
func (nm *nemesis) run(ctx context.Context, r *rand.Rand) {
	total := 0
	for _, k := range nm.kinds {
		total += faultWeights[k]
	}
	for {
		// Two draws a tick, whatever happens in it: the ticks' times and generators are the
		// same in every replay of a seed even when the cluster's state makes a tick choose
		// differently (a node still restarting cannot be picked).
		wait, tick := jitter(r, nm.every), rand.New(rand.NewSource(r.Int63()))
		select {
		case <-ctx.Done():
			nm.wg.Wait()
			return
		case <-time.After(wait):
		}
		// A kind that cannot act now (its targets busy) gives way to another draw.
		for range 5 {
			n := tick.Intn(total)
			var kind string
			for _, kind = range nm.kinds {
				if n -= faultWeights[kind]; n < 0 {
					break
				}
			}
			if nm.inject(tick, kind) {
				break
			}
		}
	}
}

// record counts a fault that has begun and logs it.
func (nm *nemesis) record(kind, target, detail string) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	nm.counts[kind]++
	nm.events = append(nm.events, faultEvent{at: time.Now(), kind: kind, target: target, detail: detail})
	nm.logf("nemesis: %s %s %s", kind, target, detail)
}

// pick returns a random node of role (any role if empty) that a fault may act on now, claimed
// for kind; nil if none.
func (nm *nemesis) pick(r *rand.Rand, role registry.Role, kind string, skip string) *node {
	var cands []*node
	for _, n := range nm.cl.nodes {
		if role == "" || n.role == role {
			cands = append(cands, n)
		}
	}
	for _, i := range r.Perm(len(cands)) {
		n := cands[i]
		if _, id := n.current(); skip != "" && id == skip {
			continue
		}
		if _, ok := n.claim(kind); ok {
			return n
		}
	}
	return nil
}

// inject starts one fault of kind, with its parameters drawn now; false if it cannot act.
func (nm *nemesis) inject(r *rand.Rand, kind string) bool {
	// Every draw is made before anything is known of the cluster's state, so the sequence of
	// draws, and with it the schedule, is the same in every replay of a seed.
	short := time.Duration(float64(nm.session) * (0.15 + 0.4*r.Float64()))
	long := nm.session + nm.delay + time.Duration(float64(time.Second)*(0.5+2*r.Float64()))
	span := time.Duration(float64(time.Second) * (1 + 5*r.Float64()))
	pickLong, pickLeader := r.Intn(2) == 0, r.Intn(2) == 0
	termAfter := time.Duration(float64(nm.session) * 0.5 * r.Float64())
	second := r.Intn(1 << 20)
	switch kind {
	case KillWorker, KillMaster, KillLeader:
		return nm.kill(r, kind)
	case PauseShort, PauseLong:
		d := short
		if kind == PauseLong {
			d = long
		}
		n := nm.pick(r, "", kind, "")
		if n == nil {
			return false
		}
		p, id := n.current()
		nm.record(kind, n.name, fmt.Sprintf("%s SIGSTOP for %v", id, d.Round(time.Millisecond)))
		nm.async(n, func() {
			_ = p.Signal(syscall.SIGSTOP)
			time.Sleep(d)
			_ = p.Signal(syscall.SIGCONT)
		})
	case FreezeMachine:
		n := nm.pick(r, registry.RoleWorker, kind, "")
		if n == nil {
			return false
		}
		p, id := n.current()
		nm.record(kind, n.name, fmt.Sprintf("%s and its tasks SIGSTOP for %v", id, long.Round(time.Millisecond)))
		nm.async(n, func() {
			groups := testenv.FreezeTree(p.Cmd.Process.Pid)
			from := time.Now()
			time.Sleep(long)
			to := time.Now()
			testenv.ThawTree(groups)
			nm.mu.Lock()
			nm.freezes = append(nm.freezes, history.Freeze{Worker: id, From: from, To: to})
			nm.mu.Unlock()
		})
	case ZKCutShort, ZKCutLong:
		d := short
		if kind == ZKCutLong {
			d = long
		}
		n := nm.pick(r, "", kind, "")
		if n == nil {
			return false
		}
		_, id := n.current()
		nm.record(kind, n.name, fmt.Sprintf("%s ZooKeeper link cut for %v", id, d.Round(time.Millisecond)))
		nm.async(n, func() {
			cut(n.zkLinks)
			time.Sleep(d)
			heal(n.zkLinks)
		})
	case TermDuringCut:
		d := short
		if pickLong {
			d = long
		}
		termAfter = min(termAfter, d)
		n := nm.pick(r, "", kind, "")
		if n == nil {
			return false
		}
		p, id := n.current()
		nm.record(kind, n.name, fmt.Sprintf("%s ZooKeeper link cut for %v, SIGTERM after %v", id, d.Round(time.Millisecond), termAfter.Round(time.Millisecond)))
		nm.async(n, func() {
			cut(n.zkLinks)
			time.Sleep(termAfter)
			n.signal(p, syscall.SIGTERM)
			time.Sleep(d - termAfter)
			heal(n.zkLinks)
		})
	case PGCut:
		n := nm.pick(r, "", kind, "")
		if n == nil {
			return false
		}
		_, id := n.current()
		nm.record(kind, n.name, fmt.Sprintf("%s PostgreSQL link cut for %v", id, span.Round(time.Millisecond)))
		nm.async(n, func() {
			n.pgLink.Cut()
			time.Sleep(span)
			n.pgLink.Heal()
		})
	case LogBlocked:
		n := nm.pick(r, "", kind, "")
		if n == nil {
			return false
		}
		p, id := n.current()
		if !p.BlockOutput() {
			n.release()
			return false
		}
		nm.record(kind, n.name, fmt.Sprintf("%s output unread for %v", id, (2*span).Round(time.Millisecond)))
		nm.async(n, func() {
			time.Sleep(2 * span)
			p.UnblockOutput()
		})
	case ZKKillServer, ZKQuorumLoss:
		return nm.zkFault(kind, pickLeader, second, span)
	case ZKFreezeLeader:
		return nm.zkFreeze(span + span/2)
	case PGRestart:
		nm.mu.Lock()
		if nm.pgBusy {
			nm.mu.Unlock()
			return false
		}
		nm.pgBusy = true
		nm.mu.Unlock()
		d := span / 2
		nm.record(kind, "postgresql", fmt.Sprintf("down for %v", d.Round(time.Millisecond)))
		nm.wg.Add(1)
		go func() {
			defer nm.wg.Done()
			if err := nm.pg.Stop(); err != nil {
				nm.fail("stop postgresql: %v", err)
			}
			time.Sleep(d)
			if err := nm.pg.Start(); err != nil {
				nm.fail("start postgresql: %v", err)
			}
			nm.mu.Lock()
			nm.pgBusy = false
			nm.mu.Unlock()
		}()
	default:
		panic("soak: unknown fault kind " + kind)
	}
	return true
}

// async runs a fault on n in a goroutine and releases n when it is over.
func (nm *nemesis) async(n *node, f func()) {
	nm.wg.Add(1)
	go func() {
		defer nm.wg.Done()
		defer n.release()
		f()
	}()
}

func (nm *nemesis) fail(format string, args ...any) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	nm.failures = append(nm.failures, fmt.Sprintf(format, args...))
}

// kill sends kill -9 to a worker, a master that does not lead, or the leader.
func (nm *nemesis) kill(r *rand.Rand, kind string) bool {
	var n *node
	switch kind {
	case KillWorker:
		n = nm.pick(r, registry.RoleWorker, kind, "")
	case KillMaster:
		// The leader is skipped when known; when it is not (ZooKeeper down), any master.
		n = nm.pick(r, registry.RoleMaster, kind, nm.leader())
	case KillLeader:
		leader := nm.leader()
		if leader == "" {
			return false
		}
		for _, m := range nm.cl.byRole(registry.RoleMaster) {
			if _, id := m.current(); id == leader {
				if _, ok := m.claim(kind); ok {
					n = m
				}
			}
		}
	}
	if n == nil {
		return false
	}
	p, id := n.current()
	nm.record(kind, n.name, id)
	n.signal(p, syscall.SIGKILL)
	if kind == KillWorker {
		nm.mu.Lock()
		nm.kills = append(nm.kills, killEvent{worker: id, at: time.Now()})
		nm.mu.Unlock()
	}
	n.release()
	return true
}

// leader returns the identity of the master that leads, "" if ZooKeeper cannot tell now.
func (nm *nemesis) leader() string {
	dir := nm.root + "/election"
	names, _, err := nm.zkc.Children(dir)
	if err != nil || len(names) == 0 {
		return ""
	}
	// Sequential znodes end in a 10-digit sequence; the lowest leads.
	sort.Slice(names, func(i, j int) bool { return names[i][len(names[i])-10:] < names[j][len(names[j])-10:] })
	data, _, err := nm.zkc.Get(dir + "/" + names[0])
	if err != nil {
		return ""
	}
	return string(data)
}

// zkFault kills one ZooKeeper server (the leader or a follower), or enough of them that the
// ensemble loses its quorum, and restarts them after span.
func (nm *nemesis) zkFault(kind string, pickLeader bool, second int, span time.Duration) bool {
	nm.mu.Lock()
	if nm.zkBusy {
		nm.mu.Unlock()
		return false
	}
	nm.zkBusy = true
	nm.mu.Unlock()
	addrs := nm.ens.Servers()
	leader := nm.ens.Leader()
	var victims []int
	what := ""
	switch {
	case kind == ZKKillServer && len(addrs) == 1:
		victims, what = []int{0}, "the only server (standalone)"
	case kind == ZKKillServer:
		v := leader
		if !pickLeader || leader < 0 {
			// A follower: any server but the leader.
			v = (max(leader, 0) + 1 + second%(len(addrs)-1)) % len(addrs)
		}
		victims = []int{v}
		what = fmt.Sprintf("server %d (follower)", v)
		if v == leader {
			what = fmt.Sprintf("server %d (leader)", v)
		}
	default:
		// A majority, the leader among them when pickLeader.
		first := max(leader, 0)
		if !pickLeader {
			first = (first + 1) % len(addrs)
		}
		for i := 0; len(victims) < len(addrs)/2+1; i++ {
			victims = append(victims, (first+i)%len(addrs))
		}
		what = fmt.Sprintf("servers %v of %d (leader was %d)", victims, len(addrs), leader)
	}
	nm.record(kind, "zookeeper", fmt.Sprintf("%s down for %v", what, span.Round(time.Millisecond)))
	nm.wg.Add(1)
	go func() {
		defer nm.wg.Done()
		for _, v := range victims {
			nm.ens.Stop(v)
		}
		time.Sleep(span)
		for _, v := range victims {
			if err := nm.ens.Start(v); err != nil {
				nm.fail("start zookeeper server %d: %v", v, err)
			}
		}
		nm.mu.Lock()
		nm.zkBusy = false
		nm.mu.Unlock()
	}()
	return true
}

// zkFreeze freezes the ZooKeeper server that leads (SIGSTOP) for d: it keeps its
// connections and answers nothing, as in a long garbage-collection pause.
func (nm *nemesis) zkFreeze(d time.Duration) bool {
	nm.mu.Lock()
	if nm.zkBusy {
		nm.mu.Unlock()
		return false
	}
	leader := nm.ens.Leader()
	if leader < 0 {
		nm.mu.Unlock()
		return false
	}
	nm.zkBusy = true
	nm.mu.Unlock()
	nm.record(ZKFreezeLeader, "zookeeper", fmt.Sprintf("server %d (leader) frozen for %v", leader, d.Round(time.Millisecond)))
	nm.wg.Add(1)
	go func() {
		defer nm.wg.Done()
		if err := nm.ens.Freeze(leader); err != nil {
			nm.fail("freeze zookeeper server %d: %v", leader, err)
		}
		time.Sleep(d)
		if err := nm.ens.Thaw(leader); err != nil {
			nm.fail("thaw zookeeper server %d: %v", leader, err)
		}
		nm.mu.Lock()
		nm.zkBusy = false
		nm.mu.Unlock()
	}()
	return true
}

func cut(links []*testenv.Proxy) {
	for _, l := range links {
		l.Cut()
	}
}

func heal(links []*testenv.Proxy) {
	for _, l := range links {
		l.Heal()
	}
}
