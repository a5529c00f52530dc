package worker_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/signal"
	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
)

// switchGate is a Gate the test opens and closes.
type switchGate struct {
	mu      sync.Mutex
	active  bool
	changed chan struct{}
}

func newSwitchGate() *switchGate { return &switchGate{active: true, changed: make(chan struct{})} }

func (g *switchGate) Active() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active
}

func (g *switchGate) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

func (g *switchGate) set(active bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active = active
	close(g.changed)
	g.changed = make(chan struct{})
}

// hookEvents hands each claim and each recorded result to the test's functions, on the
// worker's own goroutines: a hook that blocks holds that goroutine where it is.
type hookEvents struct {
	claimed func(t *dao.TaskInstance)
	ended   func(o dao.Outcome, refused bool)
}

func (h hookEvents) Claimed(t *dao.TaskInstance) {
	if h.claimed != nil {
		h.claimed(t)
	}
}

func (h hookEvents) Ended(o dao.Outcome, refused bool) {
	if h.ended != nil {
		h.ended(o, refused)
	}
}

func (h hookEvents) AssetsProduced(int) {}

// runWorker runs a worker with the given gate and events until the test ends.
func (b *testBundle) runWorker(t *testing.T, id string, slots int, gate worker.Gate, ev worker.Events) *worker.Worker {
	t.Helper()
	w, _ := b.runWorkerPolled(t, id, slots, gate, ev)
	return w
}

// runWorkerPolled is runWorker that also returns the worker's polls (see startWorkerPolled).
func (b *testBundle) runWorkerPolled(t *testing.T, id string, slots int, gate worker.Gate, ev worker.Events) (*worker.Worker, *signal.Test[struct{}]) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(worker.Config{ID: id, Groups: []string{"default"}, Slots: slots, PollInterval: 100 * time.Millisecond,
		ShutdownTimeout: time.Second, LogLimit: 1 << 20, Log: zerolog.Nop(), Events: ev}, b.db, gate,
		executor.Set{"noop": executor.Noop{}, "shell": executor.Shell{Self: self, KillGrace: 500 * time.Millisecond}})
	polls := worker.Polled(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, polls
}

func (b *testBundle) onlyTask(t *testing.T, wf int64) dao.TaskInstance {
	t.Helper()
	tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks of %d: %v, %v", wf, tasks, err)
	}
	return tasks[0]
}

// TestReclaimWhileTheEarlierAttemptEnds: a worker claims a task again (a retry without an
// interval) while the goroutine of the attempt before is still finishing. The new attempt must
// stay known to the worker: forgotten, the worker's reconcile hands it back as "never
// started" while it runs, and another claim runs the task a second time at once.
func TestReclaimWhileTheEarlierAttemptEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reclaimed := make(chan struct{})
	var once sync.Once
	ev := hookEvents{
		claimed: func(ti *dao.TaskInstance) {
			if ti.Attempt == 2 {
				once.Do(func() { close(reclaimed) })
			}
		},
		ended: func(o dao.Outcome, _ bool) {
			if o == dao.OutcomeFailed {
				// Attempt 1's result is recorded; its goroutine waits here, before it ends,
				// until the same worker has claimed attempt 2.
				select {
				case <-reclaimed:
				case <-time.After(10 * time.Second):
				}
			}
		},
	}
	w, polls := b.runWorkerPolled(t, "w1", 1, openGate{}, ev)
	wf := b.submit(t, `
name: retry-at-once
tasks:
  - {name: t, type: shell, retries: 3, command: 'if [ "$ZKSCHED_ATTEMPT" = 1 ]; then exit 1; fi; sleep 30'}
`)
	select {
	case <-reclaimed:
	case <-time.After(20 * time.Second):
		t.Fatal("attempt 2 was never claimed")
	}
	// Several polls (each reconciles) go by while attempt 2 runs.
	for range 10 {
		waitPolls(t, polls, 1)
		if got := strings.Join(b.attempts(t, b.onlyTask(t, wf).ID), ","); got != "failed,running" {
			t.Fatalf("attempts = %s, want failed,running: the worker lost track of attempt 2", got)
		}
	}
	if n := w.Running(); n != 1 {
		t.Fatalf("Running() = %d, want 1", n)
	}
}

// TestClaimReturningAfterTheNodeStoppedBeingLive: a claim waits on a pool's row lock while the
// node stops being live (its deadline passes). The tasks it then returns must not start; they
// go back to the queue unstarted, and run once the node is live again.
func TestClaimReturningAfterTheNodeStoppedBeingLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A pool's row is made with its first task; this one is there first, to be locked.
	if _, err := b.db.SQL().ExecContext(b.ctx, `INSERT INTO task_pool (name) VALUES ('p')`); err != nil {
		t.Fatal(err)
	}
	tx, err := b.db.SQL().BeginTx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`SELECT 1 FROM task_pool WHERE name = 'p' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	wf := b.submit(t, `
name: pooled
tasks:
  - {name: t, type: shell, pool: p, command: 'echo ran on attempt $ZKSCHED_ATTEMPT'}
`)
	gate := newSwitchGate()
	b.runWorker(t, "w1", 2, gate, nil)
	// The claim is waiting for the pool's row: wait until PostgreSQL shows it blocked.
	waitUntil(t, "the worker's claim to wait on the pool's lock", func() bool {
		var waiting int
		if err := b.db.SQL().QueryRowContext(b.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%open_pool%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	gate.set(false)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var task dao.TaskInstance
	waitUntil(t, "attempt 1 to be handed back", func() bool {
		// The task is made by an advance that waited for the pool's lock too: it may not be
		// there yet.
		tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != 1 {
			return false
		}
		task = tasks[0]
		return task.Attempt >= 1 && task.State != dao.TaskRunning
	})
	if got := strings.Join(b.attempts(t, task.ID), ","); task.State != dao.TaskQueued || got != "interrupted" {
		t.Fatalf("task %s, attempts %s; want queued after one interrupted attempt that never ran", task.State, got)
	}
	if log, _ := b.db.TaskLogRead(b.ctx, task.ID, 1); log != "" {
		t.Fatalf("attempt 1 ran while the node was not live: log %q", log)
	}
	gate.set(true)
	_, tasks := b.waitDone(t, wf)
	if got := strings.Join(b.attempts(t, tasks["t"].ID), ","); tasks["t"].State != dao.TaskSucceeded || got != "interrupted,succeeded" {
		t.Fatalf("task %s, attempts %s; want succeeded at attempt 2", tasks["t"].State, got)
	}
}
