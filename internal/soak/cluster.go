package soak

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/registry"
)

// exitFenced is the exit code of a node that found itself fenced (cmd/zksched).
const exitFenced = 75

// cause is what the nemesis did to end a node's process, if anything.
type cause int

const (
	causeNone cause = iota
	causeKill       // kill -9
	causeTerm       // SIGTERM
)

// node is one master or worker slot of the cluster: its links, which outlive its processes,
// and the process running now. A supervisor restarts the process whenever it exits.
type node struct {
	name string
	role registry.Role
	port int
	// zkLinks proxy the node's connections to each ZooKeeper server, pgLink to PostgreSQL.
	zkLinks []*testenv.Proxy
	pgLink  *testenv.Proxy
	// dsn reaches PostgreSQL through pgLink.
	dsn string
	// env is added to the node's environment, after the cluster's.
	env []string

	mu   sync.Mutex
	proc *testcluster.Proc
	// id is the identity of proc, "" until it has logged it.
	id  string
	gen int
	// busy is set while a fault acts on the node: one fault at a time per node.
	busy bool
	// expect is what the nemesis did to end proc.
	expect cause
	// faults are the faults on proc so far: a fenced exit is set against them.
	faults []ownFault
}

// ownFault is a fault on one node process, from its start to its end (zero while it lasts).
type ownFault struct {
	kind     string
	from, to time.Time
}

// exit is how a node's process ended.
type exit struct {
	node, id string
	code     int
	signal   syscall.Signal
	expect   cause
	at       time.Time
	// faults are those on the process before it exited.
	faults []ownFault
}

// after is the kind of the last fault on the process, "" if none.
func (e exit) after() string {
	if len(e.faults) == 0 {
		return ""
	}
	return e.faults[len(e.faults)-1].kind
}

// fencing are the fault kinds that cut a node off for longer than its session timeout.
var fencing = map[string]bool{ZKCutLong: true, PauseLong: true, FreezeMachine: true, TermDuringCut: true}

// cause returns the node's own fault that a fenced exit is set against: of those under way at
// the exit or ended at most window before it, the latest that cuts a node off past its
// session timeout, or else the latest. ok is false when there is none.
func (e exit) cause(window time.Duration) (f ownFault, ok bool) {
	for _, c := range e.faults {
		if !c.to.IsZero() && e.at.Sub(c.to) > window {
			continue
		}
		if !ok || fencing[c.kind] || !fencing[f.kind] {
			f, ok = c, true
		}
	}
	return f, ok
}

// verdict says whether the exit is one the soak allows, and what it was.
func (e exit) verdict() (what string, ok bool) {
	switch {
	case e.signal == syscall.SIGKILL && e.expect == causeKill:
		return "killed (kill -9)", true
	case e.code == exitFenced:
		return "fenced (exit 75)", true
	case e.code == 0 && e.expect == causeTerm:
		return "stopped (SIGTERM, exit 0)", true
	case e.signal != 0:
		return fmt.Sprintf("ended by signal %v", e.signal), false
	}
	return fmt.Sprintf("exit %d", e.code), false
}

// cluster is the soak's nodes and their supervisors.
type cluster struct {
	c     *testcluster.Cluster
	nodes []*node

	mu       sync.Mutex
	stopping bool
	exits    []exit
	// ids maps every identity a node process ever had to its node.
	ids map[string]*node
}

// start starts the node's next process; its identity is learned from its log by learnID.
func (cl *cluster) start(n *node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gen++
	name := n.name
	if n.gen > 1 {
		name = fmt.Sprintf("%s-%d", n.name, n.gen)
	}
	servers := make([]string, len(n.zkLinks))
	for i, l := range n.zkLinks {
		servers[i] = l.Addr()
	}
	env := append([]string{"ZKSCHED_REGISTRY_SERVERS=" + strings.Join(servers, ","),
		"ZKSCHED_DB_DSN=" + n.dsn}, n.env...)
	if n.role == registry.RoleMaster {
		n.proc = cl.c.MasterOnPort(name, n.port, env...)
	} else {
		n.proc = cl.c.WorkerOnPort(name, n.port, env...)
	}
	// The faults of the previous process are not this one's.
	n.id, n.expect, n.faults = "", causeNone, nil
	go cl.learnID(n, n.proc)
}

// learnID waits for the process's "starting" line and records its identity.
func (cl *cluster) learnID(n *node, p *testcluster.Proc) {
	for {
		for line := range strings.SplitSeq(p.Log(), "\n") {
			if !strings.Contains(line, `"message":"starting"`) {
				continue
			}
			var entry struct {
				Node string `json:"node"`
			}
			if json.Unmarshal([]byte(line), &entry) != nil || entry.Node == "" {
				continue
			}
			n.mu.Lock()
			if n.proc == p {
				n.id = entry.Node
			}
			n.mu.Unlock()
			cl.mu.Lock()
			cl.ids[entry.Node] = n
			cl.mu.Unlock()
			return
		}
		select {
		case <-p.Exited():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// supervise restarts the node's process whenever it exits, until the soak ends, and records
// each exit.
func (cl *cluster) supervise(n *node, restartDelay time.Duration) {
	for {
		n.mu.Lock()
		p := n.proc
		n.mu.Unlock()
		<-p.Exited()
		cl.recordExit(n, p)
		cl.mu.Lock()
		stopping := cl.stopping
		cl.mu.Unlock()
		if stopping {
			return
		}
		time.Sleep(restartDelay)
		cl.mu.Lock()
		stopping = cl.stopping
		cl.mu.Unlock()
		if stopping {
			return
		}
		cl.start(n)
	}
}

func (cl *cluster) recordExit(n *node, p *testcluster.Proc) {
	n.mu.Lock()
	e := exit{node: n.name, id: n.id, code: p.Cmd.ProcessState.ExitCode(), signal: p.KilledBy(),
		expect: n.expect, at: p.ExitedAt(), faults: append([]ownFault(nil), n.faults...)}
	n.mu.Unlock()
	if e.id == "" {
		e.id = n.name + " (identity not logged)"
	}
	cl.mu.Lock()
	if !cl.stopping {
		cl.exits = append(cl.exits, e)
	}
	cl.mu.Unlock()
}

// current returns the node's process and identity now.
func (n *node) current() (*testcluster.Proc, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc, n.id
}

// claim marks the node busy for a fault if it runs a process whose identity is known and no
// other fault acts on it.
func (n *node) claim(kind string) (*testcluster.Proc, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.proc.Exited():
		return nil, false
	default:
	}
	if n.busy || n.id == "" {
		return nil, false
	}
	n.busy = true
	n.faults = append(n.faults, ownFault{kind: kind, from: time.Now()})
	return n.proc, true
}

// release ends a fault on the node.
func (n *node) release() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.busy = false
	if len(n.faults) > 0 {
		n.faults[len(n.faults)-1].to = time.Now()
	}
}

// signal sends sig to the node's process p, recording that the nemesis ended it.
func (n *node) signal(p *testcluster.Proc, sig syscall.Signal) {
	n.mu.Lock()
	if n.proc == p {
		switch sig {
		case syscall.SIGKILL:
			n.expect = causeKill
		case syscall.SIGTERM:
			n.expect = causeTerm
		}
	}
	n.mu.Unlock()
	_ = p.Signal(sig)
}

// stop ends the supervision: the processes are killed by the cluster's cleanup.
func (cl *cluster) stop() {
	cl.mu.Lock()
	cl.stopping = true
	cl.mu.Unlock()
}

// byRole returns the nodes of role.
func (cl *cluster) byRole(role registry.Role) []*node {
	var out []*node
	for _, n := range cl.nodes {
		if n.role == role {
			out = append(out, n)
		}
	}
	return out
}

// nodeOf returns the node that had identity id, nil if none.
func (cl *cluster) nodeOf(id string) *node {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.ids[id]
}
