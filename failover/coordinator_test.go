package failover

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/registry"
)

// fakeClock is a Clock that moves only when the test says so.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	// added is signalled whenever After registers a waiter.
	added chan struct{}
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_800_000_000, 0), added: make(chan struct{}, 1)}
}

// waitForWaiter returns once someone waits on the clock for a moment still to come, so that
// the next Advance past it reaches them: advancing before a waiter has registered its timer
// would move time under it unnoticed.
func (c *fakeClock) waitForWaiter(t *testing.T) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		waiting := false
		for _, w := range c.waiters {
			waiting = waiting || w.at.After(c.now)
		}
		c.mu.Unlock()
		if waiting {
			return
		}
		select {
		case <-c.added:
		case <-deadline:
			t.Fatal("nothing waits on the clock")
		}
	}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	select {
	case c.added <- struct{}{}:
	default:
	}
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

type coordBundle struct {
	zk    testenv.ZK
	db    *dao.DB
	clock *fakeClock
	ctx   context.Context
	log   *syncBuffer // the coordinator's log
}

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

// waitLog waits until the coordinator has logged a line containing substr.
func (b *coordBundle) waitLog(t *testing.T, substr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.log.String(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q within 10s; log:\n%s", substr, b.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const testDelay = 5 * time.Second

// setupCoordinator starts a leading master's coordinator on a fake clock.
func setupCoordinator(t *testing.T) *coordBundle {
	t.Helper()
	b := &coordBundle{zk: testenv.ZooKeeper(t), clock: newFakeClock(), ctx: context.Background(), log: &syncBuffer{}}
	b.db, _ = daotest.New(t)
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
	done := make(chan struct{})
	go func() { co.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return b
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

// settle gives the coordinator real time to react to ZooKeeper events: it has no signal the
// test could wait on, and the fake clock does not move meanwhile.
func settle() { time.Sleep(700 * time.Millisecond) }

func TestLostWorkerIsFailedOverOnlyAfterTheDelay(t *testing.T) {
	t.Parallel()
	b := setupCoordinator(t)
	wc, task := b.worker(t, "127.0.0.1:2_1")
	settle()
	wc.Close() // the session ends: ZooKeeper deletes the worker's znode
	settle()
	b.clock.Advance(testDelay - time.Second)
	settle()
	if ti := b.task(t, task.ID); ti.State != dao.TaskRunning {
		t.Fatalf("before the delay passed the task is %s, want still running", ti.State)
	}
	b.clock.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for b.task(t, task.ID).State != dao.TaskQueued {
		if time.Now().After(deadline) {
			t.Fatal("the task was not requeued after the delay")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ti := b.task(t, task.ID)
	if ti.FailoverCount != 1 || ti.Retries != 0 {
		t.Errorf("task failover_count %d retries %d; want 1, 0", ti.FailoverCount, ti.Retries)
	}
	atts, _ := b.db.AttemptList(b.ctx, task.ID)
	if len(atts) != 1 || atts[0].Outcome == nil || *atts[0].Outcome != dao.OutcomeFailedOver {
		t.Errorf("attempts = %+v, want one failed_over", atts)
	}
	c := b.dial(t)
	deadline = time.Now().Add(10 * time.Second)
	for {
		rec, found, err := c.Marker(b.ctx, registry.RoleWorker, "127.0.0.1:2_1")
		if err == nil && found && rec.Phase == registry.PhaseFinished {
			if rec.TasksRequeued != 1 || rec.Leader != "127.0.0.1:1_1" {
				t.Errorf("marker = %+v", rec)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("marker = %+v %v %v; want finished", rec, found, err)
		}
		time.Sleep(50 * time.Millisecond)
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
	settle()
	wc.Close()
	settle()
	b.clock.Advance(grace) // past failover.delay, short of the grace plus 1 s
	settle()
	if ti := b.task(t, task.ID); ti.State != dao.TaskRunning {
		t.Fatalf("%v after the loss, with the worker's kill grace %v, the task is %s; want still running", grace, grace, ti.State)
	}
	b.clock.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for b.task(t, task.ID).State != dao.TaskQueued {
		if time.Now().After(deadline) {
			t.Fatal("the task was not requeued after the kill grace plus 1 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	anyone := testenv.DialZK(t)
	if _, err := anyone.Create(b.zk.Root+"/failover-finish-nodes/worker/127.0.0.1:7_1",
		[]byte(`{"id":"127.0.0.1:7_1","role":"worker","phase":"fenced","leader":"mallory"}`), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour) // the next sweep reads the markers
	b.waitLog(t, "fence marker of a node that is registered")
	b.clock.Advance(2 * testDelay)
	settle()
	if ti := b.task(t, task.ID); ti.State != dao.TaskRunning || ti.WorkerID == nil || *ti.WorkerID != "127.0.0.1:7_1" {
		t.Fatalf("after a forged marker of its live worker the task is %s on %v; want still running there", ti.State, ti.WorkerID)
	}
	if evs, err := b.db.FailoverEventList(b.ctx, 10); err != nil || len(evs) != 0 {
		t.Fatalf("failover events = %+v, %v; want none", evs, err)
	}

	// Lost for real: the work goes back after the delay, no sooner.
	wc.Close()
	settle()
	b.clock.Advance(testDelay - time.Second)
	settle()
	if ti := b.task(t, task.ID); ti.State != dao.TaskRunning {
		t.Fatalf("before the delay passed the task is %s, want still running", ti.State)
	}
	b.clock.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for b.task(t, task.ID).State != dao.TaskQueued {
		if time.Now().After(deadline) {
			t.Fatal("the task was not requeued after the worker was lost and the delay passed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWorkerBackBeforeTheDelayIsLeftAlone(t *testing.T) {
	t.Parallel()
	b := setupCoordinator(t)
	wc, task := b.worker(t, "127.0.0.1:3_1")
	settle()
	wc.Close()
	settle()
	b.clock.Advance(testDelay / 2)
	// The same identity registers again (as the node does after an expiry, through the fenced
	// multi) before the delay has passed.
	again := b.dial(t)
	if _, err := again.Register(b.ctx, registry.NodeInfo{ID: "127.0.0.1:3_1", Role: registry.RoleWorker}); err != nil {
		t.Fatal(err)
	}
	settle()
	b.clock.Advance(2 * testDelay)
	settle()
	if ti := b.task(t, task.ID); ti.State != dao.TaskRunning {
		t.Fatalf("the task is %s, want still running on the worker that came back", ti.State)
	}
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
	_, orphan := func() (*registry.Client, dao.TaskInstance) {
		c, ti := b.worker(t, "127.0.0.1:4_1")
		c.Close()
		return c, ti
	}()
	settle()
	b.clock.Advance(testDelay)
	deadline := time.Now().Add(10 * time.Second)
	for b.task(t, orphan.ID).State != dao.TaskQueued {
		if time.Now().After(deadline) {
			t.Fatal("the orphaned task was not requeued")
		}
		b.clock.Advance(time.Second)
		time.Sleep(100 * time.Millisecond)
	}
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
	time.Sleep(300 * time.Millisecond) // let ZooKeeper delete the closed session's znode
	if err := other.Fence(b.ctx, oel.ZnodePath(), registry.FenceRecord{ID: "127.0.0.1:5_1", Role: registry.RoleWorker,
		FencedAt: time.Now(), Phase: registry.PhaseFenced, Leader: "127.0.0.1:9_9"}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for b.task(t, task.ID).State != dao.TaskQueued {
		if time.Now().After(deadline) {
			t.Fatal("the fenced worker's task was not requeued")
		}
		b.clock.Advance(time.Second)
		time.Sleep(100 * time.Millisecond)
	}
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
	for _, m := range []struct {
		id  string
		age time.Duration
	}{{"127.0.0.1:6_1", 2 * time.Hour}, {"127.0.0.1:6_2", time.Minute}} {
		rec := registry.FenceRecord{ID: m.id, Role: registry.RoleWorker, FencedAt: time.Now().Add(-m.age),
			Phase: registry.PhaseFenced, Leader: "127.0.0.1:8_8"}
		if err := other.Fence(b.ctx, oel.ZnodePath(), rec); err != nil {
			t.Fatal(err)
		}
		finished := time.Now().Add(-m.age)
		rec.Phase, rec.FinishedAt = registry.PhaseFinished, &finished
		if err := other.FinishMarker(b.ctx, oel.ZnodePath(), rec); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.Advance(time.Hour) // the sweep interval of setupCoordinator
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, oldFound, err1 := other.Marker(b.ctx, registry.RoleWorker, "127.0.0.1:6_1")
		_, newFound, err2 := other.Marker(b.ctx, registry.RoleWorker, "127.0.0.1:6_2")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !newFound {
			t.Fatal("a marker younger than the retention was removed")
		}
		if !oldFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the marker past retention was not removed by the sweep")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGarbageMarkerStillFencesAndIsLeftAlone: a marker whose data does not parse still fences
// its identity, so the identity's work is given back; the data stays as it was, for an operator.
func TestGarbageMarkerStillFencesAndIsLeftAlone(t *testing.T) {
	t.Parallel()
	b := setupCoordinator(t)
	wc, task := b.worker(t, "127.0.0.1:7_1")
	zc := testenv.DialZK(t)
	path := b.zk.Root + "/failover-finish-nodes/worker/127.0.0.1:7_1"
	if _, err := zc.Create(path, []byte("[1,2"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	wc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for b.task(t, task.ID).State != dao.TaskQueued {
		if time.Now().After(deadline) {
			t.Fatal("the garbage-fenced worker's task was not requeued")
		}
		b.clock.Advance(time.Hour) // sweeps, which read the markers
		time.Sleep(100 * time.Millisecond)
	}
	data, _, err := zc.Get(path)
	if err != nil || string(data) != "[1,2" {
		t.Fatalf("marker data = %q, %v; want it left as it was", data, err)
	}
}
