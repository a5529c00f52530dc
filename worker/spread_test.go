package worker_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
)

// peers is a fixed list of the other workers of a group, as the registry gives it.
type peers map[string]int

func (p peers) Slots() map[string]int { return p }

// holder is an executor whose attempts run until the test lets them go: a burst's tasks are
// all claimed before any ends. Each start is sent on started.
type holder struct {
	started chan executor.Task
	release chan struct{}
}

func newHolder() *holder {
	return &holder{started: make(chan executor.Task, 100), release: make(chan struct{})}
}

func (h *holder) Run(ctx context.Context, t executor.Task, _ io.Writer) executor.Result {
	h.started <- t
	select {
	case <-h.release:
		return executor.Result{}
	case <-ctx.Done():
		return executor.Result{Stopped: true}
	}
}

// waitStarts returns the workers of the next n attempts started, by task name, within d.
func (h *holder) waitStarts(t *testing.T, n int, d time.Duration) map[string]string {
	t.Helper()
	deadline := time.After(d)
	ran := map[string]string{}
	for len(ran) < n {
		select {
		case s := <-h.started:
			ran[s.Spec.Name] = s.WorkerID
		case <-deadline:
			t.Fatalf("%d of %d attempts started within %v: %v", len(ran), n, d, ran)
		}
	}
	return ran
}

// startSpreading runs worker id of slots slots beside the others of workers (all of slots
// slots), its "noop" tasks held by h, leaving its peers their shares for wait; it stops when
// the test ends. It polls once an hour: notifications and its own looks alone move it.
func (b *testBundle) startSpreading(t *testing.T, id string, slots int, workers []string, wait time.Duration, h *holder) {
	t.Helper()
	others := peers{}
	for _, w := range workers {
		if w != id {
			others[w] = slots
		}
	}
	w := worker.New(worker.Config{ID: id, Groups: []string{"default"}, Slots: slots, PollInterval: time.Hour,
		ShutdownTimeout: time.Second, LogLimit: 1 << 20, Log: zerolog.Nop(), Peers: others, SpreadWait: wait}, b.db, openGate{},
		executor.Set{"noop": h})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// parallel is a workflow of n tasks that all start at once.
func parallel(n int) string {
	var y strings.Builder
	fmt.Fprintf(&y, "name: burst-%d\ntasks:\n", n)
	for i := range n {
		fmt.Fprintf(&y, "  - {name: t%d, type: noop}\n", i)
	}
	return y.String()
}

// runsPerWorker counts the tasks of workflow instance wf running on each worker, by the worker
// of their attempts.
func (b *testBundle) runsPerWorker(t *testing.T, wf int64) map[string]int {
	t.Helper()
	tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, ti := range tasks {
		as, err := b.db.AttemptList(b.ctx, ti.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if a.Outcome == nil {
				n[a.WorkerID]++
			}
		}
	}
	return n
}

// TestBurstSpreadsOverIdleWorkers: a burst of parallel tasks on idle workers of one group
// runs spread evenly over them, each worker running its share (by the workers of the
// attempts), whichever worker is woken first; a burst larger than all their free slots fills
// every slot. The workers leave each other their shares for an hour: none takes another's.
func TestBurstSpreadsOverIdleWorkers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		workers, slots, tasks int
		each                  int // running on each worker
	}{
		{2, 4, 4, 2},
		{3, 4, 6, 2},
		{3, 4, 9, 3},
		{2, 2, 6, 2},
	} {
		t.Run(fmt.Sprintf("%d tasks on %d workers of %d slots", c.tasks, c.workers, c.slots), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			h := newHolder()
			defer close(h.release)
			var workers []string
			for i := range c.workers {
				workers = append(workers, fmt.Sprint("w", i+1))
			}
			for _, w := range workers {
				b.startSpreading(t, w, c.slots, workers, time.Hour, h)
			}
			wf := b.submit(t, parallel(c.tasks))
			h.waitStarts(t, c.each*c.workers, 30*time.Second)
			got := b.runsPerWorker(t, wf)
			for _, w := range workers {
				if got[w] != c.each {
					t.Errorf("runs per worker %v; want %d on each of %v", got, c.each, workers)
					break
				}
			}
			if left := c.tasks - c.each*c.workers; left > 0 {
				tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
				if err != nil {
					t.Fatal(err)
				}
				queued := 0
				for _, ti := range tasks {
					if ti.State == dao.TaskQueued {
						queued++
					}
				}
				if queued != left {
					t.Errorf("%d tasks queued, want the %d no slot was free for", queued, left)
				}
			}
		})
	}
}

// TestBurstBesideADeadPeerRunsWhole: a worker whose peer is listed but gone takes its share
// of a burst at once, and the peer's share once it has waited the spread wait, at a look of
// its own (the poll is an hour away): every task runs, none is stranded.
func TestBurstBesideADeadPeerRunsWhole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newHolder()
	defer close(h.release)
	const wait = 300 * time.Millisecond
	b.startSpreading(t, "w1", 4, []string{"w1", "gone"}, wait, h)
	wf := b.submit(t, parallel(4))
	if ran := h.waitStarts(t, 4, 10*time.Second); len(ran) != 4 {
		t.Fatalf("started %v", ran)
	}
	tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	claims := map[time.Time]int{} // tasks by claim: a claim starts its tasks at one time
	var queued, last time.Time
	for _, ti := range tasks {
		if ti.WorkerID == nil || *ti.WorkerID != "w1" || ti.StartedAt == nil {
			t.Fatalf("task %s: worker %v, started %v; want running on w1", ti.Name, ti.WorkerID, ti.StartedAt)
		}
		claims[*ti.StartedAt]++
		queued = ti.QueuedAt
		if ti.StartedAt.After(last) {
			last = *ti.StartedAt
		}
	}
	if took := last.Sub(queued); took < wait || took > wait+5*time.Second {
		t.Errorf("the last task started %v after the burst was queued; want soon after the spread wait, %v", took, wait)
	}
	var first time.Time
	for at := range claims {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	// A first claim that came after the spread wait (a stalled machine) rightly took all.
	if first.Sub(queued) < wait && claims[first] != 2 {
		t.Errorf("the first claim took %d tasks (claims %v); want its share, 2", claims[first], claims)
	}
}
