package e2e

// The failover fault tests: real masters and workers, real faults (kill -9, SIGSTOP, a cut
// ZooKeeper link, a leader crashing mid-failover, servers restarted), judged by what the
// tasks really ran (internal/history). Each test logs its figures as "figure: …" lines.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/workflow"
)

// The timing every fault test runs with (set by setupE2E).
const (
	sessionTimeout = 2 * time.Second
	failoverDelay  = 2 * time.Second
	killGrace      = 500 * time.Millisecond
	// elsewhereTarget is the design's target from a worker's death to its tasks running on
	// another worker.
	elsewhereTarget = sessionTimeout + failoverDelay + time.Second
)

// fault is one fault scenario: a cluster of real processes on the test's own ZooKeeper root
// and schema, and the run log its tasks write.
type fault struct {
	*testcluster.Cluster
	db   *dao.DB
	rec  *history.Recorder
	root string
}

// setupFault starts nothing yet: it prepares the test's ZooKeeper root, schema and run log.
// The workers get the run log's variables.
func setupFault(t *testing.T) *fault {
	t.Helper()
	t.Parallel()
	rec := history.New(t)
	e := setupE2E(t, nil, "", rec.Env()...)
	return &fault{Cluster: e.Cluster, db: e.db, rec: rec, root: envValue(e.Env, "ZKSCHED_REGISTRY_ROOT")}
}

// envValue is the value of key in env, the last one if repeated (as exec does).
func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// proc is a started master or worker and its identity.
type proc struct {
	*testcluster.Proc
	id string
}

// startWorker starts a worker with slots and waits until it is registered.
func (f *fault) startWorker(t *testing.T, name string, slots int, env ...string) *proc {
	t.Helper()
	p := f.Worker(name, append([]string{"ZKSCHED_WORKER_SLOTS=" + strconv.Itoa(slots)}, env...)...)
	return f.registered(t, p)
}

// startMaster starts a master and waits until it is registered.
func (f *fault) startMaster(t *testing.T, name string, env ...string) *proc {
	t.Helper()
	return f.registered(t, f.Master(name, env...))
}

func (f *fault) registered(t *testing.T, p *testcluster.Proc) *proc {
	t.Helper()
	n := &proc{Proc: p, id: p.ID(t, 30*time.Second)}
	p.WaitLog(t, 30*time.Second, `"message":"registered"`)
	return n
}

// task is one task of a test workflow: a recorded shell task running body.
type task struct {
	name, body string
	after      []string
}

// submit stores a workflow of tasks and creates an instance of it, as `zksched submit` does.
func (f *fault) submit(t *testing.T, name string, tasks ...task) int64 {
	t.Helper()
	type yamlTask struct {
		Name      string   `yaml:"name"`
		Type      string   `yaml:"type"`
		Command   string   `yaml:"command"`
		DependsOn []string `yaml:"depends-on,omitempty"`
	}
	doc := struct {
		Name  string     `yaml:"name"`
		Tasks []yamlTask `yaml:"tasks"`
	}{Name: name}
	for _, tk := range tasks {
		doc.Tasks = append(doc.Tasks, yamlTask{Name: tk.name, Type: "shell", Command: f.rec.Command(tk.body), DependsOn: tk.after})
	}
	raw, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return f.submitFile(t, string(raw))
}

// submitFile stores the workflow file src and creates an instance of it, as `zksched submit`
// does.
func (f *fault) submitFile(t *testing.T, src string) int64 {
	t.Helper()
	spec, err := workflow.Parse([]byte(src))
	if err != nil {
		t.Fatalf("workflow: %v\n%s", err, src)
	}
	// As a user's submission is made (CLI, API): the root tasks are queued with the instance,
	// which no master drives until one of them ends.
	st, err := lifecycle.Define(context.Background(), f.db, lifecycle.Definition{Spec: spec, Run: &lifecycle.Run{}}, time.Now())
	if err != nil {
		t.Fatalf("submit %s: %v", spec.Name, err)
	}
	return st.Instance
}

// parallel is n tasks running body side by side, then a short join.
func parallel(n int, body string) []task {
	var ts []task
	var names []string
	for i := range n {
		name := fmt.Sprintf("long-%d", i+1)
		ts = append(ts, task{name: name, body: body})
		names = append(names, name)
	}
	return append(ts, task{name: "join", body: "true", after: names})
}

// waitRuns polls the run log (the tasks give the test no signal) until cond holds.
func (f *fault) waitRuns(t *testing.T, d time.Duration, what string, cond func([]history.Run) bool) []history.Run {
	t.Helper()
	var runs []history.Run
	waitUntil(t, d, what, func() bool {
		var err error
		runs, err = f.rec.Runs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return cond(runs)
	})
	return runs
}

// alive returns the runs that have started, beaten at least once and not ended, by worker.
func alive(runs []history.Run) map[string][]history.Run {
	out := map[string][]history.Run{}
	for _, r := range runs {
		if r.Started && !r.Ended && r.Beats > 0 {
			out[r.Worker] = append(out[r.Worker], r)
		}
	}
	return out
}

func aliveCount(runs []history.Run) int {
	n := 0
	for _, on := range alive(runs) {
		n += len(on)
	}
	return n
}

// waitAliveOn waits until worker runs n tasks that have begun beating.
func (f *fault) waitAliveOn(t *testing.T, worker *proc, n int) []history.Run {
	t.Helper()
	runs := f.waitRuns(t, 30*time.Second, fmt.Sprintf("%d tasks running on %s", n, worker.Name), func(rs []history.Run) bool {
		return len(alive(rs)[worker.id]) == n
	})
	return alive(runs)[worker.id]
}

// attempts returns "outcome@worker" of each attempt of a task.
func (f *fault) attempts(t *testing.T, taskID int64) []string {
	t.Helper()
	as, err := f.db.AttemptList(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		o := "running"
		if a.Outcome != nil {
			o = string(*a.Outcome)
		}
		out = append(out, o+"@"+a.WorkerID)
	}
	return out
}

func (f *fault) task(t *testing.T, id int64) *dao.TaskInstance {
	t.Helper()
	ti, err := f.db.TaskGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}

// failoverEvents returns the failover_event rows by node identity.
func (f *fault) failoverEvents(t *testing.T) map[string]dao.FailoverEvent {
	t.Helper()
	evs, err := f.db.FailoverEventList(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dao.FailoverEvent{}
	for _, ev := range evs {
		out[ev.NodeID] = ev
	}
	return out
}

// marker reads the fence marker of a worker or master from ZooKeeper; found is false when
// there is none.
func (f *fault) marker(t *testing.T, zc *zk.Conn, role registry.Role, id string) (rec registry.FenceRecord, found bool) {
	t.Helper()
	data, _, err := zc.Get(f.root + "/failover-finish-nodes/" + string(role) + "/" + id)
	if errors.Is(err, zk.ErrNoNode) {
		return rec, false
	}
	if err != nil {
		t.Fatalf("read marker of %s: %v", id, err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("marker of %s does not parse: %v: %q", id, err, data)
	}
	return rec, true
}

// expectFailedOver checks the tasks that ran on the lost worker: each was requeued once by
// the failover (outcome failed_over, failover_count 1) and then succeeded on another worker.
func (f *fault) expectFailedOver(t *testing.T, lost *proc, runs []history.Run) {
	t.Helper()
	for _, r := range runs {
		ti := f.task(t, r.TaskID)
		got := f.attempts(t, r.TaskID)
		if len(got) != 2 || got[0] != "failed_over@"+lost.id || !strings.HasPrefix(got[1], "succeeded@") || got[1] == "succeeded@"+lost.id {
			t.Errorf("task %d %s attempts = %v, want failed_over@%s (the lost worker) then succeeded elsewhere", ti.ID, ti.Name, got, lost.id)
		}
		if ti.FailoverCount != 1 || ti.Retries != 0 {
			t.Errorf("task %d %s: failover_count %d retries %d, want 1 and 0", ti.ID, ti.Name, ti.FailoverCount, ti.Retries)
		}
	}
}

// expectUndisturbed checks that no task was run twice or failed over and that nothing was
// failed over at all.
func (f *fault) expectUndisturbed(t *testing.T, rep *history.Report, wfs ...int64) {
	t.Helper()
	for _, wf := range wfs {
		for _, ti := range f.taskList(t, wf) {
			if got := f.attempts(t, ti.ID); len(got) != 1 || ti.FailoverCount != 0 {
				t.Errorf("task %d %s: attempts %v, failover_count %d; want one attempt and no failover", ti.ID, ti.Name, got, ti.FailoverCount)
			}
		}
	}
	if evs := f.failoverEvents(t); len(evs) != 0 {
		t.Errorf("failover events %v, want none", evs)
	}
	if len(rep.Failovers) != 0 {
		t.Errorf("the history shows %d failed-over task(s), want none", len(rep.Failovers))
	}
}

func (f *fault) taskList(t *testing.T, wf int64) []dao.TaskInstance {
	t.Helper()
	ts, err := f.db.TaskListByWorkflow(context.Background(), wf)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// figure logs one measured figure of the scenario, against its target when it has one.
func figure(t *testing.T, what string, got, target time.Duration) {
	t.Helper()
	switch {
	case target == 0:
		t.Logf("figure: %s: %v", what, got.Round(time.Millisecond))
	case got <= target:
		t.Logf("figure: %s: %v (target %v)", what, got.Round(time.Millisecond), target)
	default:
		t.Logf("figure: %s: %v, OVER the target %v", what, got.Round(time.Millisecond), target)
	}
}

// stillRunning fails the test if the node has exited.
func stillRunning(t *testing.T, n *proc) {
	t.Helper()
	select {
	case <-n.Exited():
		t.Errorf("%s (%s) exited with code %d; want it still running", n.Name, n.id, n.Cmd.ProcessState.ExitCode())
	default:
	}
}

// Scenario 1: kill -9 of a worker in the middle of long tasks. Its tasks run again on the
// other workers once ZooKeeper has expired its session and the failover delay has passed,
// and each succeeds once.
func TestFaultWorkerKilled(t *testing.T) {
	f := setupFault(t)
	f.startMaster(t, "master")
	workers := []*proc{f.startWorker(t, "worker-1", 2), f.startWorker(t, "worker-2", 2), f.startWorker(t, "worker-3", 2)}
	wf := f.submit(t, "killed-worker", parallel(4, "sleep 4")...)
	runs := f.waitRuns(t, 30*time.Second, "the four long tasks to run", func(rs []history.Run) bool { return aliveCount(rs) == 4 })
	victim := workers[0]
	for _, w := range workers {
		if len(alive(runs)[w.id]) > len(alive(runs)[victim.id]) {
			victim = w
		}
	}
	lostRuns := alive(runs)[victim.id]

	faultAt := time.Now()
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})

	f.expectFailedOver(t, victim, lostRuns)
	if ev, ok := f.failoverEvents(t)[victim.id]; !ok || ev.Role != "worker" || ev.TasksRequeued != len(lostRuns) {
		t.Errorf("failover event of %s = %+v (found %v), want a worker event with %d tasks requeued", victim.id, ev, ok, len(lostRuns))
	}
	if len(rep.Failovers) != len(lostRuns) {
		t.Errorf("the history shows %d failed-over tasks, want the %d the killed worker ran", len(rep.Failovers), len(lostRuns))
	}
	figure(t, fmt.Sprintf("kill -9 of a worker → its %d tasks running elsewhere (slowest)", len(lostRuns)), rep.MaxElsewhere(), elsewhereTarget)
	figure(t, "overlap", rep.MaxOverlap(), 0)
}

// Scenario 2, frozen: a worker stopped with SIGSTOP past the session timeout and the failover
// delay, then continued. The supervisors of its tasks kill them once it has been stopped for
// the session timeout (failover/doc.go), so its tasks do not overlap the runs the leader
// starts elsewhere; on waking it commits nothing and exits with code 75.
func TestFaultWorkerFrozen(t *testing.T) {
	f := setupFault(t)
	f.startMaster(t, "master")
	w1 := f.startWorker(t, "worker-1", 2)
	wf := f.submit(t, "frozen-worker", parallel(2, "sleep 8")...)
	lostRuns := f.waitAliveOn(t, w1, 2)
	f.startWorker(t, "worker-2", 2)

	faultAt := time.Now()
	if err := w1.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(sessionTimeout + failoverDelay + 2*time.Second) // the freeze itself
	wakeAt := time.Now()
	if err := w1.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := w1.Wait(t, 15*time.Second); code != exitFenced {
		t.Errorf("worker-1 exit code %d after waking, want %d (fenced)", code, exitFenced)
	}
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})

	// Committed nothing: the leader closed its attempts; none is its own report.
	f.expectFailedOver(t, w1, lostRuns)
	if _, ok := f.failoverEvents(t)[w1.id]; !ok {
		t.Errorf("no failover event for the frozen worker %s", w1.id)
	}
	figure(t, "SIGSTOP → the frozen worker's tasks killed (slowest)", maxStopped(rep), 0)
	figure(t, "SIGSTOP → its tasks running elsewhere (slowest)", rep.MaxElsewhere(), elsewhereTarget)
	figure(t, "SIGCONT → exit 75", w1.ExitedAt().Sub(wakeAt), 0)
	figure(t, "overlap", rep.MaxOverlap(), 0)
}

// Scenario 2, the whole machine frozen: the worker, its tasks' supervisors and the tasks are
// all stopped past the deadline, so no supervisor can act. This is the case where the design
// accepts an overlap: the old runs go on after waking until the worker's watchdog (or its exit
// when fenced) stops them. The overlap is allowed and reported; the result is still committed
// once, by the new run.
func TestFaultWorkerMachineFrozen(t *testing.T) {
	f := setupFault(t)
	f.startMaster(t, "master")
	w1 := f.startWorker(t, "worker-1", 2)
	wf := f.submit(t, "frozen-machine", parallel(2, "sleep 8")...)
	lostRuns := f.waitAliveOn(t, w1, 2)
	f.startWorker(t, "worker-2", 2)

	faultAt := time.Now()
	frozen := testenv.FreezeTree(w1.Cmd.Process.Pid)
	time.Sleep(sessionTimeout + failoverDelay + 2*time.Second) // the freeze itself
	wakeAt := time.Now()
	testenv.ThawTree(frozen)
	if code := w1.Wait(t, 15*time.Second); code != exitFenced {
		t.Errorf("worker-1 exit code %d after waking, want %d (fenced)", code, exitFenced)
	}
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt, AllowOverlap: true})

	f.expectFailedOver(t, w1, lostRuns)
	// The scenario itself: the frozen tasks did not beat while frozen (a beat takes 100 ms,
	// so one may land just after the SIGSTOP was sent).
	evs, err := f.rec.Events(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var afterWake time.Duration
	for _, e := range evs {
		if e.Worker != w1.id {
			continue
		}
		if e.At.After(faultAt.Add(200*time.Millisecond)) && e.At.Before(wakeAt) {
			t.Errorf("task %d attempt %d beat at %s, during the freeze (%s..%s): the machine was not frozen",
				e.TaskID, e.Attempt, e.At.Format("15:04:05.000"), faultAt.Format("15:04:05.000"), wakeAt.Format("15:04:05.000"))
		}
		afterWake = max(afterWake, e.At.Sub(wakeAt))
	}
	figure(t, "waking → the frozen worker's tasks' last beat (0: none after waking)", afterWake, 0)
	figure(t, "freeze → its tasks running elsewhere (slowest)", rep.MaxElsewhere(), elsewhereTarget)
	figure(t, "waking → exit 75", w1.ExitedAt().Sub(wakeAt), 0)
	figure(t, fmt.Sprintf("overlap (allowed here) in %d pair(s)", len(rep.Overlaps)), rep.MaxOverlap(), 0)
}

func maxStopped(rep *history.Report) time.Duration {
	var m time.Duration
	for _, fo := range rep.Failovers {
		m = max(m, fo.Stopped)
	}
	return m
}

// Scenario 2, a pause shorter than the session timeout: nothing is failed over and the tasks
// complete on the paused worker, each in one attempt.
func TestFaultWorkerPausedBriefly(t *testing.T) {
	f := setupFault(t)
	f.startMaster(t, "master")
	w1 := f.startWorker(t, "worker-1", 2)
	wf := f.submit(t, "paused-worker", parallel(2, "sleep 3")...)
	f.waitAliveOn(t, w1, 2)

	faultAt := time.Now()
	if err := w1.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the pause itself, shorter than the session timeout
	if err := w1.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})

	f.expectUndisturbed(t, rep, wf)
	for _, ti := range f.taskList(t, wf) {
		if ti.WorkerID == nil || *ti.WorkerID != w1.id {
			t.Errorf("task %s ran on %v, want the paused worker %s", ti.Name, ti.WorkerID, w1.id)
		}
	}
	stillRunning(t, w1)
	figure(t, "overlap", rep.MaxOverlap(), 0)
}

// Scenario 3: a worker's ZooKeeper link cut (PostgreSQL reachable) for the session timeout +
// the failover delay + 2 s. Its watchdog kills its tasks before the leader requeues them (no
// overlap); the leader fences it; when the link heals it finds its marker and exits with 75.
func TestFaultWorkerCutOffFromZooKeeper(t *testing.T) {
	f := setupFault(t)
	f.startMaster(t, "master")
	link := testenv.NewProxy(t, testenv.ZKServers()[0])
	w1 := f.startWorker(t, "worker-1", 2, "ZKSCHED_REGISTRY_SERVERS="+link.Addr())
	wf := f.submit(t, "cut-worker", parallel(2, "sleep 6")...)
	lostRuns := f.waitAliveOn(t, w1, 2)
	f.startWorker(t, "worker-2", 2)
	zc := testenv.DialZK(t)

	faultAt := time.Now()
	link.Cut()
	time.Sleep(sessionTimeout + failoverDelay + 2*time.Second) // the cut itself
	rec, fenced := f.marker(t, zc, registry.RoleWorker, w1.id)
	if !fenced {
		t.Fatalf("worker-1 (%s) was not fenced after a cut of %v; the test needs a fenced worker",
			w1.id, time.Since(faultAt).Round(time.Millisecond))
	}
	healAt := time.Now()
	link.Heal()
	if code := w1.Wait(t, 10*time.Second); code != exitFenced {
		t.Errorf("worker-1 exit code %d after the link healed, want %d (fenced)", code, exitFenced)
	}
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})

	ev, ok := f.failoverEvents(t)[w1.id]
	if !ok {
		t.Fatalf("no failover event for the cut-off worker %s (marker %+v)", w1.id, rec)
	}
	// Stopped by its own watchdog: each run had ended before the leader fenced the worker,
	// and its attempt ended as the watchdog's hand-back or as the failover's requeue.
	for _, r := range lostRuns {
		got := f.attempts(t, r.TaskID)
		if len(got) != 2 || (got[0] != "interrupted@"+w1.id && got[0] != "failed_over@"+w1.id) || !strings.HasPrefix(got[1], "succeeded@") {
			t.Errorf("task %d attempts = %v, want interrupted or failed_over on %s, then succeeded elsewhere", r.TaskID, got, w1.id)
		}
	}
	for _, fo := range rep.Failovers {
		if fo.From.Worker == w1.id && !fo.From.Last.Before(ev.FencedAt) {
			t.Errorf("task %d: the cut-off run was alive until %s, not before the fence at %s: its watchdog did not stop it first",
				fo.TaskID, fo.From.Last.Format("15:04:05.000"), ev.FencedAt.Format("15:04:05.000"))
		}
	}
	if len(rep.Failovers) != len(lostRuns) {
		t.Errorf("the history shows %d tasks moved, want the %d that ran on the cut-off worker", len(rep.Failovers), len(lostRuns))
	}
	figure(t, "cut → the cut-off worker's tasks killed by its watchdog (slowest)", maxStopped(rep), sessionTimeout+killGrace)
	figure(t, "cut → the worker fenced", ev.FencedAt.Sub(faultAt), 0)
	figure(t, "cut → its tasks running elsewhere (slowest)", rep.MaxElsewhere(), elsewhereTarget)
	figure(t, "heal → exit 75", w1.ExitedAt().Sub(healAt), time.Second)
	figure(t, "overlap", rep.MaxOverlap(), 0)
}

// Scenario 3, a cut shorter than the session timeout: no failover, the tasks finish on the
// worker in one attempt and it keeps running.
func TestFaultWorkerLinkBlip(t *testing.T) {
	f := setupFault(t)
	f.startMaster(t, "master")
	link := testenv.NewProxy(t, testenv.ZKServers()[0])
	w1 := f.startWorker(t, "worker-1", 2, "ZKSCHED_REGISTRY_SERVERS="+link.Addr())
	wf := f.submit(t, "blip", parallel(2, "sleep 3")...)
	f.waitAliveOn(t, w1, 2)

	faultAt := time.Now()
	link.Cut()
	time.Sleep(time.Second) // the cut itself, shorter than the session timeout
	link.Heal()
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})

	f.expectUndisturbed(t, rep, wf)
	for _, ti := range f.taskList(t, wf) {
		if ti.WorkerID == nil || *ti.WorkerID != w1.id {
			t.Errorf("task %s ran on %v, want the worker whose link blipped, %s", ti.Name, ti.WorkerID, w1.id)
		}
	}
	stillRunning(t, w1)
}

// Scenario 4: kill -9 of a master that owns running workflows, with two masters. The leader
// releases its workflows and the other master claims and finishes them, without re-running
// a task that had succeeded or was running on a live worker. A master comes to own an
// instance when the first task of it ends (its root was queued at submission): here the
// short root "a", after which "b" and "c" run while the master is killed. In "leader" the
// killed master owns every workflow and leads, so the other must first take the leadership
// over; in "either" both masters run and the owner of the first workflow is killed.
func TestFaultMasterKilled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// ownerFirst starts the masters one after the other, the second once the first has
		// claimed every workflow.
		ownerFirst bool
	}{{"leader", true}, {"either", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := setupFault(t)
			masters := []*proc{f.startMaster(t, "master-1")}
			if !tc.ownerFirst {
				masters = append(masters, f.startMaster(t, "master-2"))
			}
			f.startWorker(t, "worker-1", 2)
			f.startWorker(t, "worker-2", 2)
			chain := []task{
				{name: "a", body: "sleep 0.2"},
				{name: "b", body: "sleep 3", after: []string{"a"}}, {name: "c", body: "sleep 3", after: []string{"a"}},
				{name: "d", body: "sleep 1", after: []string{"b", "c"}},
			}
			wfs := []int64{f.submit(t, "chain-1", chain...), f.submit(t, "chain-2", chain...)}
			// Four runs alive at once can only be the b and c of both: each "a" ends first.
			f.waitRuns(t, 30*time.Second, "the four tasks after the roots to run", func(rs []history.Run) bool { return aliveCount(rs) == 4 })
			if tc.ownerFirst {
				masters = append(masters, f.startMaster(t, "master-2"))
			}
			victim, survivor := masters[0], masters[1]
			if f.owner(t, wfs[0]) == masters[1].id {
				victim, survivor = masters[1], masters[0]
			}
			var owned []int64
			for _, wf := range wfs {
				if f.owner(t, wf) == victim.id {
					owned = append(owned, wf)
				}
			}
			wasLeader := strings.Contains(victim.Log(), `"message":"became the leader"`)
			if tc.ownerFirst && (!wasLeader || len(owned) != len(wfs)) {
				t.Fatalf("master-1 leads %v and owns %v of %v; the scenario needs the leader owning all", wasLeader, owned, wfs)
			}

			faultAt := time.Now()
			if err := victim.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 30*time.Second, "the surviving master to own the killed master's workflows", func() bool {
				for _, wf := range owned {
					if f.owner(t, wf) != survivor.id {
						return false
					}
				}
				return true
			})
			claimed := time.Since(faultAt)
			rep := history.Check(t, f.db, f.rec, history.Options{Workflows: wfs, FaultAt: faultAt})

			// Workers never died: every task ran exactly once.
			for _, wf := range wfs {
				for _, ti := range f.taskList(t, wf) {
					if got := f.attempts(t, ti.ID); len(got) != 1 || ti.FailoverCount != 0 {
						t.Errorf("workflow %d task %s attempts %v failover_count %d, want one attempt: no task re-run", wf, ti.Name, got, ti.FailoverCount)
					}
				}
			}
			ev, ok := f.failoverEvents(t)[victim.id]
			if !ok || ev.Role != "master" || ev.WorkflowsReleased != len(owned) {
				t.Errorf("failover event of %s = %+v (found %v), want a master event releasing %d workflow(s)", victim.id, ev, ok, len(owned))
			}
			t.Logf("the killed master %s (leader: %v) owned workflow instances %v", victim.Name, wasLeader, owned)
			figure(t, "kill -9 of a master → its workflows claimed by the other", claimed, elsewhereTarget)
			figure(t, "overlap", rep.MaxOverlap(), 0)
		})
	}
}

// owner returns the owner of a workflow instance, "" for none.
func (f *fault) owner(t *testing.T, wf int64) string {
	t.Helper()
	w, err := f.db.WorkflowGet(context.Background(), wf)
	if err != nil {
		t.Fatal(err)
	}
	if w.Owner == nil {
		return ""
	}
	return *w.Owner
}

// Scenario 5: with two masters, the leader crashes in the middle of a worker's failover, at
// the fault point the faultinject build offers; the next leader finishes it: marker phase
// finished, tasks requeued once, one failover_event row.
func TestFaultLeaderDiesMidFailover(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"after-fence", "after-requeue"} {
		t.Run(point, func(t *testing.T) {
			f := setupFault(t)
			m1 := f.startMaster(t, "master-1", "ZKSCHED_TEST_FAULT="+point)
			m1.WaitLog(t, 30*time.Second, `"message":"became the leader"`)
			f.startMaster(t, "master-2")
			w1 := f.startWorker(t, "worker-1", 2)
			wf := f.submit(t, "leader-crash-"+point, parallel(2, "sleep 5")...)
			lostRuns := f.waitAliveOn(t, w1, 2)
			f.startWorker(t, "worker-2", 2)
			zc := testenv.DialZK(t)

			faultAt := time.Now()
			if err := w1.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			m1.Wait(t, 30*time.Second)
			crashed := time.Since(faultAt)
			if sig := m1.KilledBy(); sig != syscall.SIGKILL || !strings.Contains(m1.Log(), "fault injection: SIGKILL at "+point) {
				t.Fatalf("master-1 ended by signal %v without the fault injection at %s; the scenario did not happen", sig, point)
			}
			rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})

			f.expectFailedOver(t, w1, lostRuns)
			waitUntil(t, 10*time.Second, "worker-1's marker to reach phase finished", func() bool {
				rec, ok := f.marker(t, zc, registry.RoleWorker, w1.id)
				return ok && rec.Phase == registry.PhaseFinished
			})
			// Who requeued: the next leader, after the crash, when the crashed one never got
			// there; the crashed one, before its crash, when its transaction had committed (and
			// the next leader's repeat of the idempotent step requeued nothing more).
			crashedAt := m1.ExitedAt()
			for _, r := range lostRuns {
				as, err := f.db.AttemptList(context.Background(), r.TaskID)
				if err != nil || len(as) == 0 || as[0].EndedAt == nil {
					t.Fatalf("attempts of task %d: %+v, %v", r.TaskID, as, err)
				}
				requeued := *as[0].EndedAt
				if after := requeued.After(crashedAt); after != (point == "after-fence") {
					t.Errorf("task %d was requeued at %s, the leader crashed at %s: want the requeue %s the crash",
						r.TaskID, requeued.Format("15:04:05.000"), crashedAt.Format("15:04:05.000"),
						map[bool]string{true: "after", false: "before"}[point == "after-fence"])
				}
			}
			if ev, ok := f.failoverEvents(t)[w1.id]; !ok || ev.FinishedAt == nil || ev.TasksRequeued != len(lostRuns) {
				t.Errorf("failover event of worker-1 %s = %+v (found %v), want a finished one with %d tasks requeued", w1.id, ev, ok, len(lostRuns))
			}
			figure(t, "kill -9 of the worker → the leader crashed "+point, crashed, 0)
			figure(t, "kill -9 of the worker → its tasks running elsewhere (slowest)", rep.MaxElsewhere(), 0)
			figure(t, "overlap", rep.MaxOverlap(), 0)
		})
	}
}

// Scenario 7: a worker killed and started again on the same address is a new identity: the
// old one is failed over, the new process keeps working and is never fenced.
func TestFaultWorkerRestartedOnSameAddress(t *testing.T) {
	f := setupFault(t)
	f.startMaster(t, "master")
	old := f.startWorker(t, "worker-1", 2)
	wf := f.submit(t, "restarted-worker", parallel(2, "sleep 4")...)
	lostRuns := f.waitAliveOn(t, old, 2)

	faultAt := time.Now()
	if err := old.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	old.Wait(t, 10*time.Second)
	renewed := f.registered(t, f.WorkerOnPort("worker-1-again", old.Port, "ZKSCHED_WORKER_SLOTS=2"))
	oldAddr, _, _ := strings.Cut(old.id, "_")
	newAddr, _, _ := strings.Cut(renewed.id, "_")
	if renewed.id == old.id || newAddr != oldAddr {
		t.Fatalf("restarted worker identity %s, want a new identity on the old address of %s", renewed.id, old.id)
	}
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})

	// It keeps working after the failover of its old identity.
	wf2 := f.submit(t, "after-restart", task{name: "later", body: "sleep 0.5"})
	history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf2}})

	f.expectFailedOver(t, old, lostRuns)
	for _, r := range lostRuns {
		if ti := f.task(t, r.TaskID); ti.WorkerID == nil || *ti.WorkerID != renewed.id {
			t.Errorf("task %s finished on %v, want the restarted worker %s", ti.Name, ti.WorkerID, renewed.id)
		}
	}
	evs := f.failoverEvents(t)
	if ev, ok := evs[old.id]; !ok || ev.TasksRequeued != len(lostRuns) {
		t.Errorf("failover event of the old identity = %+v (found %v), want %d tasks requeued", ev, ok, len(lostRuns))
	}
	if _, ok := evs[renewed.id]; ok {
		t.Errorf("the new identity %s was failed over", renewed.id)
	}
	zc := testenv.DialZK(t)
	if _, fenced := f.marker(t, zc, registry.RoleWorker, renewed.id); fenced {
		t.Errorf("the new identity %s has a fence marker", renewed.id)
	}
	if _, fenced := f.marker(t, zc, registry.RoleWorker, old.id); !fenced {
		t.Errorf("the old identity %s has no fence marker", old.id)
	}
	stillRunning(t, renewed)
	figure(t, "kill -9 → its tasks running on the restarted worker (slowest)", rep.MaxElsewhere(), elsewhereTarget)
	figure(t, "overlap", rep.MaxOverlap(), 0)
}

// Scenario 6: ZooKeeper down longer than the session timeout and restarted, then PostgreSQL
// restarted, during a run, on private servers of the test's own (the shared ones serve the
// other tests). Nothing is lost or committed twice, no runs overlap, and the cluster recovers
// by itself: a node that finds itself fenced exits with 75 and is restarted as a supervisor
// (systemd) would.
func TestFaultServersRestarted(t *testing.T) {
	t.Parallel()
	zks := testenv.NewZKServer(t)
	zks.Start("data")
	pg := testenv.NewPGServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := dao.Open(ctx, pg.DSN, 10, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rec := history.New(t)
	c := testcluster.New(t, []string{zks.Addr()}, "/zksched", pg.DSN, append(rec.Env(),
		"ZKSCHED_REGISTRY_SESSION_TIMEOUT=2s", "ZKSCHED_FAILOVER_DELAY=2s", "ZKSCHED_WORKER_KILL_GRACE=500ms",
		"ZKSCHED_WORKER_POLL_INTERVAL=200ms", "ZKSCHED_MASTER_POLL_INTERVAL=200ms", "ZKSCHED_WORKER_SLOTS=3")...)
	f := &fault{Cluster: c, db: db, rec: rec, root: "/zksched"}
	sup := newSupervisor(t, f)
	sup.start("master", func(name string, port int) *testcluster.Proc { return f.MasterOnPort(name, port) })
	sup.start("worker-1", func(name string, port int) *testcluster.Proc { return f.WorkerOnPort(name, port) })
	sup.start("worker-2", func(name string, port int) *testcluster.Proc { return f.WorkerOnPort(name, port) })

	// Long enough that each outage lands in the middle of the tasks it hits.
	fan := []task{
		{name: "a", body: "sleep 6"}, {name: "b", body: "sleep 6"},
		{name: "c", body: "sleep 2", after: []string{"a", "b"}},
	}
	wfs := []int64{f.submit(t, "outage-1", fan...), f.submit(t, "outage-2", fan...)}
	f.waitRuns(t, 30*time.Second, "the first tasks to run", func(rs []history.Run) bool { return aliveCount(rs) == 4 })

	zkDown := time.Now()
	zks.Stop()
	time.Sleep(2 * sessionTimeout) // the outage, longer than the session timeout
	zks.Start("data")
	zkUp := time.Now()
	runsAfter := func(at time.Time) func([]history.Run) bool {
		return func(rs []history.Run) bool {
			return slices.ContainsFunc(rs, func(r history.Run) bool { return r.Start.After(at) })
		}
	}
	f.waitRuns(t, 30*time.Second, "a task to start after ZooKeeper came back", runsAfter(zkUp))
	zkRecovered := time.Since(zkUp)

	pgDown := time.Now()
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(sessionTimeout) // the outage
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	pgUp := time.Now()
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: wfs, Deadline: 90 * time.Second})

	figure(t, "ZooKeeper down", zkUp.Sub(zkDown), 0)
	figure(t, "ZooKeeper back → a task starts again", zkRecovered, 0)
	figure(t, "PostgreSQL down", pgUp.Sub(pgDown), 0)
	figure(t, "overlap", rep.MaxOverlap(), 0)
	n, exits := sup.restarts()
	t.Logf("figure: node restarts after exit 75: %d (exits: %q)", n, exits)
	t.Logf("figure: failover events: %d", len(f.failoverEvents(t)))
	for _, n := range sup.current() {
		stillRunning(t, n)
	}
}

// supervisor restarts a node that exits with code 75 (fenced) on its port, as a new identity,
// like systemd's Restart=on-failure would.
type supervisor struct {
	t *testing.T
	f *fault
	// done ends the watching when the test ends; stopped (under mu) makes sure nothing is
	// started once the cluster's cleanup may have begun.
	done    chan struct{}
	mu      sync.Mutex
	stopped bool
	nodes   map[string]*proc
	exited  []string
	count   int
}

func newSupervisor(t *testing.T, f *fault) *supervisor {
	s := &supervisor{t: t, f: f, done: make(chan struct{}), nodes: map[string]*proc{}}
	t.Cleanup(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		close(s.done)
	})
	return s
}

// start starts a node with run on a port of its own and watches it.
func (s *supervisor) start(name string, run func(name string, port int) *testcluster.Proc) {
	s.t.Helper()
	port := testcluster.FreePort(s.t)
	n := s.f.registered(s.t, run(name, port))
	s.mu.Lock()
	s.nodes[name] = n
	s.mu.Unlock()
	go s.watch(name, port, n, run)
}

func (s *supervisor) watch(name string, port int, n *proc, run func(name string, port int) *testcluster.Proc) {
	for gen := 2; ; gen++ {
		select {
		case <-s.done:
			return
		case <-n.Exited():
		}
		code := n.Cmd.ProcessState.ExitCode()
		s.mu.Lock()
		s.exited = append(s.exited, fmt.Sprintf("%s exited %d", n.Name, code))
		if code != exitFenced || s.stopped {
			s.mu.Unlock()
			return
		}
		s.count++
		n = &proc{Proc: run(fmt.Sprintf("%s-%d", name, gen), port)}
		s.nodes[name] = n
		s.mu.Unlock()
	}
}

// restarts returns how many restarts there were and the exits seen.
func (s *supervisor) restarts() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count, strings.Join(s.exited, "; ")
}

// current returns the nodes running now, the latest of each name.
func (s *supervisor) current() []*proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*proc
	for _, n := range s.nodes {
		out = append(out, n)
	}
	return out
}

func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
