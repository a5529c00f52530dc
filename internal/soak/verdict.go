package soak

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/registry"
)

// Result is a soak's verdict and figures.
type Result struct {
	Seed int64
	// Duration is the chaos; Setup the start of the servers and nodes before it; Drain from
	// the end of the chaos to every workflow's end; Wall all of it.
	Duration, Setup, Drain, Wall time.Duration
	// Servers is how many ZooKeeper servers the cluster ran on.
	Servers int
	// Faults counts the faults by kind.
	Faults map[string]int
	// Submitted counts the workflows submitted by kind (for soak-hook the deliveries
	// acknowledged, for soak-emit the asset events); SubmitFailures the submissions no
	// master took (all down, or their database).
	Submitted      map[string]int
	SubmitFailures int
	// Actions counts the operator's kills, stops and reruns, and their refusals.
	Actions map[string]int
	// Workflows counts the workflow instances by final state, Attempts the attempts by
	// outcome; Tasks is the number of task instances.
	Workflows map[string]int
	Tasks     int
	Attempts  map[string]int
	// Failovers counts the leader's failovers (failover_event rows) by the lost node's role.
	Failovers map[string]int
	// Elsewhere is, for each task running on a worker killed with kill -9, the time from the
	// kill to its next attempt's start.
	Elsewhere []time.Duration
	// Exits counts the node exits by what ended them; FencedAfter counts the fenced exits
	// (75) by the node's own fault they are set against (exit.cause); HealToFencedExit is,
	// for each fenced exit after that fault had ended, the time from its end to the exit.
	Exits       map[string]int
	FencedAfter map[string]int
	// FencedByServers counts the fenced exits of nodes with no fault of their own just
	// before, by the server faults under way then: losing one ZooKeeper server of three
	// should fence no node.
	FencedByServers  map[string]int
	HealToFencedExit []time.Duration
	// Flows counts what the flow checks judged (for-each items, child instances, keyed
	// instances, paused agents approved), so a verdict without them shows it judged nothing.
	Flows map[string]int
	// AllowedOverlaps counts the overlapping runs that a whole-machine freeze explains.
	AllowedOverlaps int
	// Outside is set when the soak ran on a cluster it did not start (RunOn): the node exits,
	// fence markers and freezes are not its to judge.
	Outside bool
	// Anomalies make the soak fail; Notes are what was allowed.
	Anomalies []string
	Notes     []string
	// Detail is, when there are anomalies (or Config.Detail is set), the fault log, the
	// node exits and the timelines of the workflows the anomalies are about.
	Detail string
}

// verdict judges a soak once the chaos is over.
type verdict struct {
	cfg Config
	cl  *cluster
	db  *dao.DB
	rec *history.Recorder
	w   *workload
	nm  *nemesis
	// outside is the nemesis of a cluster the soak did not start (RunOn); cl and nm are nil then.
	outside Nemesis
	zkc     *zk.Conn
	res     *Result
	// suspects are the workflow instances the history's problems are about.
	suspects []int64
	// chaosAt is when the nemesis began: the origin of every time the report shows.
	chaosAt time.Time
	// parentOf is each child instance's parent task; approvals each paused agent's output of
	// its wait step (loadFlows).
	parentOf  map[int64]int64
	approvals map[int64]string
	// ledger is the file the agents' tools write each run to (kinds).
	ledger string
}

// flow counts one thing a flow check judged.
func (v *verdict) flow(what string) {
	if v.res.Flows == nil {
		v.res.Flows = map[string]int{}
	}
	v.res.Flows[what]++
}

func (v *verdict) anomaly(format string, args ...any) {
	v.res.Anomalies = append(v.res.Anomalies, fmt.Sprintf(format, args...))
}

// judge waits for the cluster to come back and every workflow to end, then judges the
// history, the nodes' exits and the fence markers.
func (v *verdict) judge(healedAt time.Time) *Result {
	v.res = &Result{Seed: v.cfg.Seed, Duration: v.cfg.Duration, Servers: v.cfg.Servers,
		Workflows: map[string]int{}, Attempts: map[string]int{}, Exits: map[string]int{}, FencedAfter: map[string]int{},
		FencedByServers: map[string]int{}, Failovers: map[string]int{}, Outside: v.nm == nil}
	failures := v.nemesisFailures()
	if v.nm != nil {
		v.res.Faults = v.nm.counts
	} else {
		v.res.Faults = v.outside.Faults()
	}
	for _, f := range failures {
		v.anomaly("nemesis: %s", f)
	}
	ctx := context.Background()

	// Every node back: a node that cannot start again is an anomaly of its own. (A cluster
	// the soak did not start is brought back by its own nemesis.)
	deadline := time.Now().Add(60 * time.Second)
	for _, n := range v.nodes() {
		for {
			p, id := n.current()
			if id != "" && strings.Contains(p.Log(), `"message":"registered"`) {
				break
			}
			if time.Now().After(deadline) {
				v.anomaly("%s did not come back within 60 s of the chaos's end (its latest process: %s)", n.name, p.Name)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	v.w.wait()
	v.res.Submitted, v.res.SubmitFailures, v.res.Actions = v.w.submitted, v.w.failures, v.w.actions

	// Every workflow ended, no task left queued or running, and no asset-triggered run left
	// to start (the masters start one at their next poll after its last event): read in one
	// snapshot, nothing can start after it.
	drainEnd := healedAt.Add(v.cfg.Drain)
	var open, busy, assetsDue int
	for {
		err := v.db.SQL().QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM workflow_instance WHERE state NOT IN ('succeeded', 'failed', 'stopped')),
			(SELECT count(*) FROM task_instance WHERE state IN ('queued', 'running')),
			(`+assetsDueSQL+`)`).Scan(&open, &busy, &assetsDue)
		if err == nil && open == 0 && busy == 0 && assetsDue == 0 {
			break
		}
		if time.Now().After(drainEnd) {
			v.anomaly("drain: %d workflow instance(s) not ended, %d task instance(s) queued or running and %d asset consumer(s) with a run due %v after the chaos (error: %v)",
				open, busy, assetsDue, v.cfg.Drain, err)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	v.res.Drain = time.Since(healedAt)

	// No run alive any more: one still beating outlived its attempt.
	for end := time.Now().Add(5 * time.Second); ; {
		runs, err := v.rec.Runs(ctx)
		if err != nil {
			v.anomaly("read the run log: %v", err)
			break
		}
		var alive []history.Run
		for _, r := range runs {
			if !r.Ended && time.Since(r.Last) < time.Second {
				alive = append(alive, r)
			}
		}
		if len(alive) == 0 {
			break
		}
		if time.Now().After(end) {
			for _, r := range alive {
				v.anomaly("outlived its attempt: task %d attempt %d on %s still beating after every workflow ended", r.TaskID, r.Attempt, r.Worker)
			}
			break
		}
		time.Sleep(250 * time.Millisecond)
	}

	rows, err := v.db.SQL().QueryContext(ctx, `SELECT role, count(*) FROM failover_event GROUP BY role`)
	if err == nil {
		for rows.Next() {
			var role string
			var n int
			if rows.Scan(&role, &n) == nil {
				v.res.Failovers[role] = n
			}
		}
		rows.Close()
	}

	h, err := history.Load(ctx, v.db, v.rec, nil)
	if err != nil {
		v.anomaly("load the history: %v", err)
		return v.res
	}
	if err := v.loadFlows(ctx); err != nil {
		v.anomaly("%v", err)
	}
	v.judgeHistory(h)
	if v.cl != nil {
		v.judgeMarkers(healedAt)
		v.judgeExits()
	}
	if len(v.res.Anomalies) > 0 || v.cfg.Detail {
		v.res.Detail = v.detail(h)
	}
	return v.res
}

// judgeHistory runs the history checker with what the nemesis and the operator did.
func (v *verdict) judgeHistory(h *history.History) {
	mayFail := map[string]bool{}
	for _, k := range v.w.kinds {
		mayFail[k.name] = k.mayFail
	}
	// FaultAt only sets the timelines' origin: the start of the chaos, as in the fault log.
	opts := history.Options{Freezes: v.freezes(), WakeGrace: v.cfg.KillGrace + time.Second,
		Kills: v.w.kills, Reruns: v.w.reruns, AtLeastOnce: true, FaultAt: v.chaosAt}
	for _, wf := range h.Workflows {
		v.res.Workflows[string(wf.State)]++
		if mayFail[wf.WorkflowName] {
			opts.MayFail = append(opts.MayFail, wf.ID)
		}
	}
	v.res.Tasks = len(h.Tasks)
	for _, a := range h.Attempts {
		o := "running"
		if a.Outcome != nil {
			o = string(*a.Outcome)
		}
		v.res.Attempts[o]++
	}
	rep := h.Judge(opts)
	v.suspects = rep.Suspects
	for _, p := range rep.Problems {
		v.anomaly("history: %s", p)
	}
	v.res.Notes = append(v.res.Notes, rep.Notes...)
	for _, n := range rep.Notes {
		if strings.HasPrefix(n, "overlap of") {
			v.res.AllowedOverlaps++
		}
	}
	v.judgeOrphans(h)
	v.judgePools(h)
	v.judgeSignals(h)
	v.judgeTools(h)
	v.judgeHooks()
	v.judgeAssets()
	v.judgeSensors(h)
	if l, err := limitsOf(v.w.kinds); err != nil {
		v.anomaly("read the kinds' limits: %v", err)
	} else {
		v.judgeForEach(h, l.maxParallel)
		v.judgeChildren(h, v.parentOf, l.childOnly)
		v.judgeKeys(h, l.keyMax)
	}
	for _, k := range v.lost() {
		for _, f := range h.Moved(k.Worker, k.At) {
			v.res.Elsewhere = append(v.res.Elsewhere, f.Elsewhere)
		}
	}
	slices.Sort(v.res.Elsewhere)
}

// orphanGrace is how long a task's run may stay alive once its worker's process is gone: its
// supervisor kills the task's process group on the parent-death signal, or at its next
// 100 ms check of its parent, and the run beats every 100 ms. The rest is room for a loaded
// machine.
const orphanGrace = 500 * time.Millisecond

// judgeOrphans checks that no run outlived its worker's process: started or still alive more
// than orphanGrace after the process had exited.
func (v *verdict) judgeOrphans(h *history.History) {
	if v.cl == nil {
		return // the processes of a cluster the soak did not start are not watched
	}
	v.cl.mu.Lock()
	gone := map[string]time.Time{}
	for _, e := range v.cl.exits {
		gone[e.id] = e.at
	}
	v.cl.mu.Unlock()
	for _, r := range history.RunsOf(h.Events) {
		at, ok := gone[r.Worker]
		if !ok {
			continue
		}
		if from := maxTime(at, r.Start); r.Last.Sub(from) > orphanGrace {
			ended := "killed"
			if r.Ended {
				ended = "ran to its end"
			}
			v.anomaly("outlived its worker: task %d attempt %d on %s ran %s..%s, and %s, %v after its worker's process exited at %s",
				r.TaskID, r.Attempt, r.Worker, r.Start.Format("15:04:05.000"), r.Last.Format("15:04:05.000"), ended,
				r.Last.Sub(at).Round(time.Millisecond), at.Format("15:04:05.000"))
			v.suspectTask(h, r.TaskID)
		}
	}
}

// judgePools checks that the runs of a pool's tasks never outnumbered its limit, except for
// the runs of a worker frozen whole (which nothing could stop until it woke).
func (v *verdict) judgePools(h *history.History) {
	pool := map[int64]string{}
	for _, t := range h.Tasks {
		if t.Pool != nil {
			pool[t.ID] = *t.Pool
		}
	}
	type edge struct {
		at    time.Time
		delta int
		run   history.Run
	}
	edges := map[string][]edge{}
	for _, r := range history.RunsOf(h.Events) {
		p, ok := pool[r.TaskID]
		// A run seen at one instant overlaps nothing (the history's own rule).
		if !ok || !r.Last.After(r.Start) || v.frozenDuring(r) {
			continue
		}
		edges[p] = append(edges[p], edge{r.Start, 1, r}, edge{r.Last, -1, r})
	}
	for p, es := range edges {
		limit, ok := poolLimits[p]
		if !ok {
			continue
		}
		// Ends first at equal times: a run that ended as another began did not overlap it.
		sort.Slice(es, func(i, j int) bool {
			if !es[i].at.Equal(es[j].at) {
				return es[i].at.Before(es[j].at)
			}
			return es[i].delta < es[j].delta
		})
		alive := map[history.Run]bool{}
		for _, e := range es {
			if e.delta < 0 {
				delete(alive, e.run)
				continue
			}
			alive[e.run] = true
			if len(alive) > limit {
				var who []string
				for r := range alive {
					who = append(who, fmt.Sprintf("task %d attempt %d on %s", r.TaskID, r.Attempt, r.Worker))
					v.suspectTask(h, r.TaskID)
				}
				sort.Strings(who)
				v.anomaly("pool %s over its limit of %d: %d runs alive at +%.3fs: %s", p, limit, len(alive),
					e.at.Sub(v.chaosAt).Seconds(), strings.Join(who, ", "))
				break // one report per pool
			}
		}
	}
}

// nodes are the soak's own nodes, none when it did not start the cluster.
func (v *verdict) nodes() []*node {
	if v.cl == nil {
		return nil
	}
	return v.cl.nodes
}

// freezes are the whole-worker freezes of the soak's own nemesis; an outside nemesis
// freezes nothing.
func (v *verdict) freezes() []history.Freeze {
	if v.nm == nil {
		return nil
	}
	return v.nm.freezes
}

// lost are the workers killed with kill -9, by either nemesis.
func (v *verdict) lost() []Lost {
	if v.nm == nil {
		return v.outside.Lost()
	}
	out := make([]Lost, 0, len(v.nm.kills))
	for _, k := range v.nm.kills {
		out = append(out, Lost{Worker: k.worker, At: k.at})
	}
	return out
}

// nemesisFailures are the faults either nemesis could not inject or heal.
func (v *verdict) nemesisFailures() []string {
	if v.nm == nil {
		return v.outside.Failures()
	}
	return v.nm.failures
}

// frozenDuring reports whether the run's worker was frozen whole while it ran.
func (v *verdict) frozenDuring(r history.Run) bool {
	for _, f := range v.freezes() {
		if f.Worker == r.Worker && f.From.Before(r.Last) && r.Start.Before(f.To.Add(v.cfg.KillGrace+time.Second)) {
			return true
		}
	}
	return false
}

// suspectTask adds the workflow instance of a task to the suspects.
func (v *verdict) suspectTask(h *history.History, task int64) {
	for _, t := range h.Tasks {
		if t.ID == task && !slices.Contains(v.suspects, t.WorkflowInstanceID) {
			v.suspects = append(v.suspects, t.WorkflowInstanceID)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// judgeExits checks that every node process ended by the nemesis's hand or fenced.
func (v *verdict) judgeExits() {
	v.cl.mu.Lock()
	exits := append([]exit(nil), v.cl.exits...)
	v.cl.mu.Unlock()
	for _, e := range exits {
		what, ok := e.verdict()
		v.res.Exits[what]++
		if !ok {
			v.anomaly("node %s (%s) %s at %s, not by the nemesis's hand nor fenced (last fault on it: %s)",
				e.node, e.id, what, e.at.Format("15:04:05.000"), orNone(e.after()))
		}
		if e.code != exitFenced {
			continue
		}
		f, own := e.cause(v.ownFaultWindow())
		if !own {
			v.res.FencedByServers[v.serverFaultsBefore(e.at)]++
			continue
		}
		v.res.FencedAfter[f.kind]++
		if !f.to.IsZero() {
			v.res.HealToFencedExit = append(v.res.HealToFencedExit, e.at.Sub(f.to))
		}
	}
	slices.Sort(v.res.HealToFencedExit)
}

// ownFaultWindow is how long after a fault on a node ended a fenced exit is set against it:
// the session timeout (its session may have expired just before the fault ended), the
// failover delay, and room for the reconnect that tells the node.
func (v *verdict) ownFaultWindow() time.Duration {
	return v.cfg.SessionTimeout + v.cfg.FailoverDelay + 5*time.Second
}

// serverFaultsBefore names the faults of the servers (ZooKeeper, PostgreSQL) that began in
// the window before at, "none" if none did.
func (v *verdict) serverFaultsBefore(at time.Time) string {
	v.nm.mu.Lock()
	defer v.nm.mu.Unlock()
	seen := map[string]bool{}
	var kinds []string
	for _, e := range v.nm.events {
		if e.target != "zookeeper" && e.target != "postgresql" {
			continue
		}
		// A server fault lasts up to 9 s (span, and half again for a frozen leader).
		if e.at.After(at) || e.at.Before(at.Add(-v.ownFaultWindow()-9*time.Second)) || seen[e.kind] {
			continue
		}
		seen[e.kind] = true
		kinds = append(kinds, e.kind)
	}
	sort.Strings(kinds)
	if len(kinds) == 0 {
		return "none"
	}
	return strings.Join(kinds, "+")
}

// fencedExitWait bounds the wait for a fenced node to exit once everything has healed: it
// learns of its fence when it reaches ZooKeeper again, after the client's reconnect backoff.
const fencedExitWait = 20 * time.Second

// judgeMarkers checks that every fenced identity exits, and that every node that exited with
// 75 had been fenced.
func (v *verdict) judgeMarkers(healedAt time.Time) {
	var fenced map[string]bool
	var running []string
	for {
		fenced, running = map[string]bool{}, nil
		for _, role := range []registry.Role{registry.RoleMaster, registry.RoleWorker} {
			dir := root + "/failover-finish-nodes/" + string(role)
			ids, _, err := v.zkc.Children(dir)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				v.anomaly("list the fence markers in %s: %v", dir, err)
				return
			}
			for _, id := range ids {
				fenced[id] = true
			}
		}
		for id := range fenced {
			n := v.cl.nodeOf(id)
			if n == nil {
				continue // a node that died before it logged its identity
			}
			p, cur := n.current()
			if cur != id {
				continue // it has exited: its exit is judged apart
			}
			select {
			case <-p.Exited():
			default:
				running = append(running, fmt.Sprintf("%s (%s)", n.name, id))
			}
		}
		if len(running) == 0 || time.Since(healedAt) > fencedExitWait {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, r := range running {
		v.anomaly("fenced but running: %s has a fence marker and has not exited %v after everything healed", r, fencedExitWait)
	}
	v.cl.mu.Lock()
	defer v.cl.mu.Unlock()
	for _, e := range v.cl.exits {
		if e.code == exitFenced && !fenced[e.id] {
			v.anomaly("node %s (%s) exited 75 without a fence marker", e.node, e.id)
		}
	}
}

// detail is what a failed soak prints: the seed, the faults in order and the timelines of the
// workflows the anomalies are about.
func (v *verdict) detail(h *history.History) string {
	var b strings.Builder
	origin := v.chaosAt
	if v.nm == nil {
		fmt.Fprintf(&b, "seed %d; faults (0 = the chaos's start, %s):\n%s", v.cfg.Seed, origin.Format("15:04:05.000"), v.outside.Log(origin))
		if len(v.suspects) > 0 {
			b.WriteString(h.Timeline(history.Options{FaultAt: origin}, v.suspects...))
		}
		return b.String()
	}
	v.nm.mu.Lock()
	fmt.Fprintf(&b, "seed %d; faults (0 = the chaos's start, %s):\n", v.cfg.Seed, origin.Format("15:04:05.000"))
	for _, e := range v.nm.events {
		fmt.Fprintf(&b, "  %+8.3fs %-18s %-9s %s\n", e.at.Sub(origin).Seconds(), e.kind, e.target, e.detail)
	}
	v.nm.mu.Unlock()
	v.cl.mu.Lock()
	b.WriteString("node exits:\n")
	for _, e := range v.cl.exits {
		what, _ := e.verdict()
		fmt.Fprintf(&b, "  %+8.3fs %s (%s): %s (last fault: %s)\n", e.at.Sub(origin).Seconds(), e.node, e.id, what, orNone(e.after()))
	}
	v.cl.mu.Unlock()
	if len(v.suspects) > 0 {
		b.WriteString(h.Timeline(history.Options{FaultAt: origin}, v.suspects...))
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// String is the soak's report: the figures, then the anomalies.
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: seed %d, chaos %v (setup %v, drain %v, wall %v), %d ZooKeeper server(s)\n",
		r.Seed, r.Duration, r.Setup.Round(time.Millisecond), r.Drain.Round(time.Millisecond), r.Wall.Round(time.Millisecond), r.Servers)
	total := 0
	for _, n := range r.Faults {
		total += n
	}
	fmt.Fprintf(&b, "faults: %d: %s\n", total, sortedCounts(r.Faults))
	fmt.Fprintf(&b, "workflows submitted: %s; %d submission(s) no master took\n", sortedCounts(r.Submitted), r.SubmitFailures)
	fmt.Fprintf(&b, "operator: %s\n", sortedCounts(r.Actions))
	fmt.Fprintf(&b, "workflows: %s; tasks %d; attempts: %s\n", sortedCounts(r.Workflows), r.Tasks, sortedCounts(r.Attempts))
	fmt.Fprintf(&b, "flows judged: %s\n", sortedCounts(r.Flows))
	fmt.Fprintf(&b, "failovers by the lost node's role: %s\n", sortedCounts(r.Failovers))
	fmt.Fprintf(&b, "kill -9 of a worker → its tasks running elsewhere: %s\n", spread(r.Elsewhere))
	if r.Outside {
		b.WriteString("node exits and fence markers: not judged (the nemesis restarts the cluster's nodes)\n")
	} else {
		fmt.Fprintf(&b, "node exits: %s; fenced exits by the node's own fault: %s; fault healed → exit 75: %s\n",
			sortedCounts(r.Exits), sortedCounts(r.FencedAfter), spread(r.HealToFencedExit))
		fmt.Fprintf(&b, "fenced exits with no fault of the node's own before, by the server faults then: %s\n", sortedCounts(r.FencedByServers))
		fmt.Fprintf(&b, "overlaps a whole-machine freeze explains (allowed): %d\n", r.AllowedOverlaps)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  allowed: %s\n", n)
	}
	fmt.Fprintf(&b, "anomalies: %d\n", len(r.Anomalies))
	for _, a := range r.Anomalies {
		fmt.Fprintf(&b, "  %s\n", a)
	}
	return b.String()
}

// spread is "n: min/median/max" of sorted durations.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none measured"
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%d: min %v, median %v, max %v", len(ds), r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)-1]))
}

// judgeSignals checks the operator's signals against the ends of the wait tasks and paused
// agents: a signal a master accepted (200) is applied, once: its task ended as it said, and
// no other signal of the task was accepted. A wait task approved succeeded with the signal's
// output; a paused agent approved had the output as its wait step's (its checkpoint,
// v.approvals), then resumed and succeeded with a final output that used it; one rejected
// failed with an error ending with the text. A signal no master answered may have been
// applied or not, but only it may explain an end the accepted ones do not.
func (v *verdict) judgeSignals(h *history.History) {
	tasks := map[int64]dao.TaskInstance{}
	for _, t := range h.Tasks {
		tasks[t.ID] = t
	}
	byTask := map[int64][]signalSent{}
	for _, s := range v.w.signals {
		byTask[s.TaskID] = append(byTask[s.TaskID], s)
	}
	for id, sigs := range byTask {
		t, ok := tasks[id]
		if !ok {
			v.anomaly("signals: task %d was signalled but is not in the history", id)
			continue
		}
		var accepted, unanswered []signalSent
		for _, s := range sigs {
			switch s.Status {
			case http.StatusOK:
				accepted = append(accepted, s)
			case 0:
				unanswered = append(unanswered, s)
			}
		}
		matches := func(s signalSent) bool {
			switch {
			case s.Fail:
				return t.State == dao.TaskFailed && t.Error != nil && strings.HasSuffix(*t.Error, s.Output)
			case t.Type == "agent":
				step, ok := v.approvals[id]
				return t.State == dao.TaskSucceeded && ok && step == s.Output && t.Output != nil && strings.Contains(*t.Output, "["+s.Output+"]")
			}
			return t.State == dao.TaskSucceeded && t.Output != nil && *t.Output == s.Output
		}
		if t.Type == "agent" && len(accepted) == 1 && !accepted[0].Fail {
			v.flow("agents approved")
		}
		switch {
		case len(accepted) > 1:
			v.anomaly("signals: task %d (workflow instance %d) accepted %d signals: %+v", id, t.WorkflowInstanceID, len(accepted), accepted)
			v.suspects = append(v.suspects, t.WorkflowInstanceID)
		case len(accepted) == 1 && !matches(accepted[0]):
			v.anomaly("signals: task %d (workflow instance %d) ended %s (output %s, error %s, step %s %s), not as its accepted signal %+v said",
				id, t.WorkflowInstanceID, t.State, deref(t.Output), deref(t.Error), approveStep, derefStep(v.approvals, id), accepted[0])
			v.suspects = append(v.suspects, t.WorkflowInstanceID)
		case len(accepted) == 0 && (t.State == dao.TaskSucceeded || (t.Error != nil && strings.HasPrefix(*t.Error, "failed by a signal"))) &&
			!slices.ContainsFunc(unanswered, matches):
			v.anomaly("signals: task %d (workflow instance %d) ended %s by a signal no master accepted", id, t.WorkflowInstanceID, t.State)
			v.suspects = append(v.suspects, t.WorkflowInstanceID)
		}
	}
}

// derefStep is the output of the task's wait step, quoted, or "none".
func derefStep(steps map[int64]string, task int64) string {
	if out, ok := steps[task]; ok {
		return fmt.Sprintf("%q", out)
	}
	return "none"
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return fmt.Sprintf("%q", *s)
}
