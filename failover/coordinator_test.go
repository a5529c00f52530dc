package failover

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/signal"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/registry"
)

type coordBundle struct {
	zk    testenv.ZK
	db    *dao.DB
	clock *clockwork.FakeClock
	ctx   context.Context
	log   *syncBuffer // the coordinator's log

	// passed is the coordinator's test signal, last the state at the end of the last pass
	// the test has taken from it.
	passed *signal.Test[termState]
	last   *termState
	nudges int
}

func workerKey(id string) nodeKey { return nodeKey{registry.RoleWorker, id} }
func masterKey(id string) nodeKey { return nodeKey{registry.RoleMaster, id} }

// syncBuffer is a log output tests can read while the coordinator writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// wantLog checks that the coordinator has logged a line containing substr.
func (b *coordBundle) wantLog(t *testing.T, substr string) {
	t.Helper()
	if !strings.Contains(b.log.String(), substr) {
		t.Fatalf("no log line %q; log:\n%s", substr, b.log.String())
	}
}

const testDelay = 5 * time.Second

// setupCoordinator starts a leading master's coordinator on a fake clock.
func setupCoordinator(t *testing.T) *coordBundle {
	t.Helper()
	b := newCoordBundle(t)
	b.start(t)
	return b
}

// newCoordBundle makes the test's ZooKeeper root and schema; start starts the coordinator.
func newCoordBundle(t *testing.T) *coordBundle {
	t.Helper()
	b := &coordBundle{zk: testenv.ZooKeeper(t), clock: clockwork.NewFakeClockAt(time.Unix(1_800_000_000, 0)),
		ctx: context.Background(), log: &syncBuffer{}}
	b.db, _ = daotest.New(t)
	return b
}

// start makes a master that leads, runs its coordinator until the test ends, and returns once
// the coordinator's first pass is over.
func (b *coordBundle) start(t *testing.T) {
	t.Helper()
	c := b.dial(t)
	reg, err := c.Register(b.ctx, registry.NodeInfo{ID: "127.0.0.1:1_1", Role: registry.RoleMaster, Host: "127.0.0.1", Port: 1})
	if err != nil {
		t.Fatal(err)
	}
	el, err := reg.Elect(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for !el.IsLeader() {
		select {
		case <-el.Changed():
		case <-time.After(10 * time.Second):
			t.Fatal("the only master did not become leader")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	co := NewCoordinator(CoordinatorConfig{ID: "127.0.0.1:1_1", Delay: testDelay, MarkerRetention: time.Hour,
		SweepInterval: time.Hour, Clock: b.clock, Log: zerolog.New(b.log)}, c, el, b.db)
	co.passed.Init()
	b.passed = &co.passed
	done := make(chan struct{})
	go func() { co.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	b.waitPass(t, "the first pass", func(termState) bool { return true })
}

// waitPass returns once the state at the end of the coordinator's last pass satisfies cond.
// The coordinator makes a pass at every change of the registered nodes and whenever its timer
// on the fake clock fires.
func (b *coordBundle) waitPass(t *testing.T, what string, cond func(termState) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if b.last != nil && cond(*b.last) {
			return
		}
		select {
		case v := <-b.passed.C():
			b.last = &v
		case <-deadline:
			t.Fatalf("coordinator: no pass with %s within 10s; log:\n%s", what, b.log.String())
		}
	}
}

// waiting returns once the coordinator waits on its timer: it has one on the fake clock only
// while it waits between two passes.
func (b *coordBundle) waiting(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("coordinator: never waited on its timer")
	}
}

// advance moves the fake clock on by d and returns once the coordinator waits again: if its
// timer fell within d, after the pass the timer woke. Call it only once the coordinator has
// made its pass for every change of the registered nodes (waitPass): a pass a watch woke
// could otherwise read the clock before the move and start its timer after it.
func (b *coordBundle) advance(t *testing.T, d time.Duration) {
	t.Helper()
	b.waiting(t)
	b.clock.Advance(d)
	b.waiting(t)
}

// waitUnregistered returns once the identity's znode is gone.
func (b *coordBundle) waitUnregistered(t *testing.T, c *registry.Client, role registry.Role, id string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ids, changed, err := c.Members(b.ctx, role)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids, id) {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s %s still registered after 10s", role, id)
		}
	}
}

func (b *coordBundle) dial(t *testing.T) *registry.Client {
	t.Helper()
	c, err := registry.Dial(b.ctx, registry.Config{Servers: b.zk.Servers, Root: b.zk.Root, SessionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// worker registers a worker identity with its own session and gives it one running task.
func (b *coordBundle) worker(t *testing.T, id string) (*registry.Client, dao.TaskInstance) {
	t.Helper()
	return b.workerWith(t, registry.NodeInfo{ID: id, Role: registry.RoleWorker, Host: "127.0.0.1", Port: 2})
}

// workerWith is worker with the NodeInfo the worker publishes.
func (b *coordBundle) workerWith(t *testing.T, info registry.NodeInfo) (*registry.Client, dao.TaskInstance) {
	t.Helper()
	id := info.ID
	c := b.dial(t)
	if _, err := c.Register(b.ctx, info); err != nil {
		t.Fatal(err)
	}
	wf := daotest.Submit(t, b.db, "wf", map[string]any{"name": "wf"})
	if _, err := b.db.SQL().Exec(`UPDATE workflow_instance SET owner = '127.0.0.1:1_1', state = 'running' WHERE id = $1`, wf); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{{WorkflowInstanceID: wf, Name: "t", Type: "noop", State: dao.TaskQueued, Group: "g-" + id}}); err != nil {
		t.Fatal(err)
	}
	got, err := b.db.TaskClaimQueued(b.ctx, id, []string{"g-" + id}, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	return c, got[0]
}

func (b *coordBundle) task(t *testing.T, id int64) *dao.TaskInstance {
	t.Helper()
	ti, err := b.db.TaskGet(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}

// registered waits for the coordinator's pass that saw the worker id registered (and read its
// node info).
func (b *coordBundle) registered(t *testing.T, id string) {
	t.Helper()
	b.waitPass(t, "worker "+id+" registered", func(v termState) bool {
		_, read := v.killGrace[workerKey(id)]
		return v.members[workerKey(id)] && read
	})
}

// lost waits for the coordinator's pass that saw the worker id lost.
func (b *coordBundle) lost(t *testing.T, id string) {
	t.Helper()
	b.waitPass(t, "worker "+id+" lost", func(v termState) bool { _, ok := v.absent[workerKey(id)]; return ok })
}

// nudge makes the coordinator make a pass now, at the fake clock's time, as any change of the
// registered nodes does: a bystander worker registers. A check that nothing happens before a
// time comes after a nudge, so that the coordinator has looked at that time and not only
// waited on its timer.
func (b *coordBundle) nudge(t *testing.T) {
	t.Helper()
	b.nudges++
	id := fmt.Sprintf("127.0.0.1:99_%d", b.nudges)
	if _, err := b.dial(t).Register(b.ctx, registry.NodeInfo{ID: id, Role: registry.RoleWorker}); err != nil {
		t.Fatal(err)
	}
	b.registered(t, id)
	b.waiting(t)
}

func (b *coordBundle) wantState(t *testing.T, task int64, want dao.TaskState, when string) *dao.TaskInstance {
	t.Helper()
	ti := b.task(t, task)
	if ti.State != want {
		t.Fatalf("%s the task is %s, want %s", when, ti.State, want)
	}
	return ti
}

func TestLostWorkerIsFailedOverOnlyAfterTheDelay(t *testing.T) {
	t.Parallel()
	b := setupCoordinator(t)
	wc, task := b.worker(t, "127.0.0.1:2_1")
	b.registered(t, "127.0.0.1:2_1")
	wc.Close() // the session ends: ZooKeeper deletes the worker's znode
	b.lost(t, "127.0.0.1:2_1")
	b.advance(t, testDelay-time.Second)
	b.nudge(t)
	b.wantState(t, task.ID, dao.TaskRunning, "before the delay passed")
	b.advance(t, time.Second)
	ti := b.wantState(t, task.ID, dao.TaskQueued, "once the delay passed")
	if ti.FailoverCount != 1 || ti.Retries != 0 {
		t.Errorf("task failover_count %d retries %d; want 1, 0", ti.FailoverCount, ti.Retries)
	}
	atts, _ := b.db.AttemptList(b.ctx, task.ID)
	if len(atts) != 1 || atts[0].Outcome == nil || *atts[0].Outcome != dao.OutcomeFailedOver {
		t.Errorf("attempts = %+v, want one failed_over", atts)
	}
	c := b.dial(t)
	rec, found, err := c.Marker(b.ctx, registry.RoleWorker, "127.0.0.1:2_1")
	if err != nil || !found || rec.Phase != registry.PhaseFinished {
		t.Fatalf("marker = %+v %v %v; want finished", rec, found, err)
	}
	if rec.TasksRequeued != 1 || rec.Leader != "127.0.0.1:1_1" {
		t.Errorf("marker = %+v", rec)
	}
	evs, err := b.db.FailoverEventList(b.ctx, 10)
	if err != nil || len(evs) != 1 || evs[0].TasksRequeued != 1 || evs[0].NodeID != "127.0.0.1:2_1" {
		t.Fatalf("failover events = %+v, %v", evs, err)
	}
	// The fenced identity can never register again.
	if _, err := c.Register(b.ctx, registry.NodeInfo{ID: "127.0.0.1:2_1", Role: registry.RoleWorker}); err == nil {
		t.Fatal("a fenced identity registered again")
	}
}

// A worker whose config gives its tasks a longer kill grace than the leader's failover.delay
// covers is failed over only once that grace plus a second has passed: its tasks may still be
// dying until then.
func TestLostWorkerWaitsForItsOwnKillGrace(t *testing.T) {
	t.Parallel()
	b := setupCoordinator(t)
	grace := testDelay + 3*time.Second
	wc, task := b.workerWith(t, registry.NodeInfo{ID: "127.0.0.1:2_2", Role: registry.RoleWorker, Host: "127.0.0.1",
		Port: 2, KillGraceMs: grace.Milliseconds()})
	b.registered(t, "127.0.0.1:2_2")
	wc.Close()
	b.lost(t, "127.0.0.1:2_2")
	b.advance(t, grace) // past failover.delay, short of the grace plus 1 s
	b.nudge(t)
	b.wantState(t, task.ID, dao.TaskRunning, fmt.Sprintf("%v after the loss, with the worker's kill grace %v,", grace, grace))
	b.advance(t, time.Second)
	b.wantState(t, task.ID, dao.TaskQueued, "after the kill grace plus 1 s")
}

// A marker of a worker that is registered cannot be a leader's (Fence needs the znode gone):
// someone who reached an unprotected ZooKeeper made it. The leader leaves the worker's running
// task where it is and says so; only once the worker is really lost (its znode gone) and the
// delay has passed does the marker count, as for any lost node: a sweep that trusted the
// marker would requeue the live worker's task at once.
func TestForgedMarkerOfLiveWorkerRequeuesNothing(t *testing.T) {
	t.Parallel()
	b := setupCoordinator(t)
	wc, task := b.worker(t, "127.0.0.1:7_1")
	b.registered(t, "127.0.0.1:7_1")
	anyone := testenv.DialZK(t)
	if _, err := anyone.Create(b.zk.Root+"/failover-finish-nodes/worker/127.0.0.1:7_1",
		[]byte(`{"id":"127.0.0.1:7_1","role":"worker","phase":"fenced","leader":"mallory"}`), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	b.advance(t, time.Hour) // the next sweep reads the markers
	b.wantLog(t, "fence marker of a node that is registered")
	b.advance(t, 2*testDelay)
	b.nudge(t)
	if ti := b.task(t, task.ID); ti.State != dao.TaskRunning || ti.WorkerID == nil || *ti.WorkerID != "127.0.0.1:7_1" {
		t.Fatalf("after a forged marker of its live worker the task is %s on %v; want still running there", ti.State, ti.WorkerID)
	}
	if evs, err := b.db.FailoverEventList(b.ctx, 10); err != nil || len(evs) != 0 {
		t.Fatalf("failover events = %+v, %v; want none", evs, err)
	}

	// Lost for real: the work goes back after the delay, no sooner.
	wc.Close()
	b.lost(t, "127.0.0.1:7_1")
	b.advance(t, testDelay-time.Second)
	b.nudge(t)
	b.wantState(t, task.ID, dao.TaskRunning, "before the delay passed")
	b.advance(t, time.Second)
	b.wantState(t, task.ID, dao.TaskQueued, "after the worker was lost and the delay passed")
}

func TestWorkerBackBeforeTheDelayIsLeftAlone(t *testing.T) {
	t.Parallel()
	b := setupCoordinator(t)
	wc, task := b.worker(t, "127.0.0.1:3_1")
	b.registered(t, "127.0.0.1:3_1")
	wc.Close()
	b.lost(t, "127.0.0.1:3_1")
	b.advance(t, testDelay/2)
	// The same identity registers again (as the node does after an expiry, through the fenced
	// multi) before the delay has passed.
	again := b.dial(t)
	if _, err := again.Register(b.ctx, registry.NodeInfo{ID: "127.0.0.1:3_1", Role: registry.RoleWorker}); err != nil {
		t.Fatal(err)
	}
	b.waitPass(t, "the worker registered again", func(v termState) bool {
		_, lost := v.absent[workerKey("127.0.0.1:3_1")]
		return v.members[workerKey("127.0.0.1:3_1")] && !lost
	})
	b.advance(t, 2*testDelay)
	b.nudge(t)
	b.wantState(t, task.ID, dao.TaskRunning, "on the worker that came back,")
	if _, found, _ := again.Marker(b.ctx, registry.RoleWorker, "127.0.0.1:3_1"); found {
		t.Fatal("a node that came back in time was fenced")
	}
}

// TestSweepFindsLostOwnersAndFinishesFencedMarkers covers what a new leader inherits: a worker
// that owns work but is not registered (its loss happened before this term), and a worker that
// another master already fenced but whose failover nobody finished.
func TestSweepFindsLostOwnersAndFinishesFencedMarkers(t *testing.T) {
	t.Parallel()
	b := setupCoordinator(t)
	// A worker identity that owns a running task but never registered in this root.
	oc, orphan := b.worker(t, "127.0.0.1:4_1")
	oc.Close()
	b.lost(t, "127.0.0.1:4_1")
	b.advance(t, testDelay)
	b.wantState(t, orphan.ID, dao.TaskQueued, "the delay after its loss, the orphaned worker's")
	// A marker left in phase fenced by an earlier leader, whose worker still owns a task.
	wc, task := b.worker(t, "127.0.0.1:5_1")
	wc.Close()
	other := b.dial(t)
	oreg, err := other.Register(b.ctx, registry.NodeInfo{ID: "127.0.0.1:9_9", Role: registry.RoleMaster})
	if err != nil {
		t.Fatal(err)
	}
	oel, err := oreg.Elect(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Seen lost, its znode is gone: the other master can fence it.
	b.waitPass(t, "worker 127.0.0.1:5_1 lost and the other master registered", func(v termState) bool {
		_, lost := v.absent[workerKey("127.0.0.1:5_1")]
		return lost && v.members[masterKey("127.0.0.1:9_9")]
	})
	if err := other.Fence(b.ctx, oel.ZnodePath(), registry.FenceRecord{ID: "127.0.0.1:5_1", Role: registry.RoleWorker,
		FencedAt: b.clock.Now(), Phase: registry.PhaseFenced, Leader: "127.0.0.1:9_9"}); err != nil {
		t.Fatal(err)
	}
	b.advance(t, testDelay)
	b.wantState(t, task.ID, dao.TaskQueued, "the delay after its loss, the fenced worker's")
	b.wantLog(t, "already fenced by an earlier leader")
}

func TestFinishedMarkersPastRetentionAreRemoved(t *testing.T) {
	t.Parallel()
	b := setupCoordinator(t)
	other := b.dial(t)
	oreg, err := other.Register(b.ctx, registry.NodeInfo{ID: "127.0.0.1:8_8", Role: registry.RoleMaster})
	if err != nil {
		t.Fatal(err)
	}
	oel, err := oreg.Elect(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.waitPass(t, "the other master registered", func(v termState) bool { return v.members[masterKey("127.0.0.1:8_8")] })
	// The next sweep is an hour on (setupCoordinator's sweep interval); the ages are those
	// the markers have then.
	sweep := b.clock.Now().Add(time.Hour)
	for _, m := range []struct {
		id  string
		age time.Duration
	}{{"127.0.0.1:6_1", 2 * time.Hour}, {"127.0.0.1:6_2", time.Minute}} {
		rec := registry.FenceRecord{ID: m.id, Role: registry.RoleWorker, FencedAt: sweep.Add(-m.age),
			Phase: registry.PhaseFenced, Leader: "127.0.0.1:8_8"}
		if err := other.Fence(b.ctx, oel.ZnodePath(), rec); err != nil {
			t.Fatal(err)
		}
		finished := sweep.Add(-m.age)
		rec.Phase, rec.FinishedAt = registry.PhaseFinished, &finished
		if err := other.FinishMarker(b.ctx, oel.ZnodePath(), rec); err != nil {
			t.Fatal(err)
		}
	}
	b.advance(t, time.Hour)
	_, oldFound, err1 := other.Marker(b.ctx, registry.RoleWorker, "127.0.0.1:6_1")
	_, newFound, err2 := other.Marker(b.ctx, registry.RoleWorker, "127.0.0.1:6_2")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if oldFound {
		t.Fatal("the marker past retention was not removed by the sweep")
	}
	if !newFound {
		t.Fatal("a marker younger than the retention was removed")
	}
}

// TestGarbageMarkerStillFencesAndIsLeftAlone: a marker whose data does not parse still fences
// its identity, so the identity's work is given back; the data stays as it was, for an operator.
// The leader's term begins after the worker was lost, so its first sweep meets the marker.
func TestGarbageMarkerStillFencesAndIsLeftAlone(t *testing.T) {
	t.Parallel()
	b := newCoordBundle(t)
	wc, task := b.worker(t, "127.0.0.1:7_1")
	zc := testenv.DialZK(t)
	path := b.zk.Root + "/failover-finish-nodes/worker/127.0.0.1:7_1"
	if _, err := zc.Create(path, []byte("[1,2"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	wc.Close()
	b.waitUnregistered(t, b.dial(t), registry.RoleWorker, "127.0.0.1:7_1")
	b.start(t)
	b.wantState(t, task.ID, dao.TaskQueued, "after the first sweep, the garbage-fenced worker's")
	b.wantLog(t, "fence marker with unreadable data")
	data, _, err := zc.Get(path)
	if err != nil || string(data) != "[1,2" {
		t.Fatalf("marker data = %q, %v; want it left as it was", data, err)
	}
}

// TestGarbageMarkerMetAtTheFence: a worker this term saw lost, whose marker with data that does
// not parse appeared meanwhile, is failed over after the delay like any other; the fence meets
// the marker, and the marker is left as it is.
func TestGarbageMarkerMetAtTheFence(t *testing.T) {
	t.Parallel()
	b := setupCoordinator(t)
	wc, task := b.worker(t, "127.0.0.1:7_2")
	b.registered(t, "127.0.0.1:7_2")
	wc.Close()
	b.lost(t, "127.0.0.1:7_2")
	zc := testenv.DialZK(t)
	path := b.zk.Root + "/failover-finish-nodes/worker/127.0.0.1:7_2"
	if _, err := zc.Create(path, []byte("[1,2"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	b.advance(t, testDelay-time.Second)
	b.nudge(t)
	b.wantState(t, task.ID, dao.TaskRunning, "before the delay passed")
	b.advance(t, time.Second)
	b.wantState(t, task.ID, dao.TaskQueued, "once the delay passed")
	b.wantLog(t, "fence marker has unreadable data")
	data, _, err := zc.Get(path)
	if err != nil || string(data) != "[1,2" {
		t.Fatalf("marker data = %q, %v; want it left as it was", data, err)
	}
}
