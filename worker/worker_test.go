package worker_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/signal"
	"github.com/zksched/zksched/master"
	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
	"github.com/zksched/zksched/workflow"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == executor.SuperviseArg {
		os.Exit(executor.SuperviseMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// openGate is a node that is always registered and connected.
type openGate struct{}

func (openGate) Active() bool             { return true }
func (openGate) Changed() <-chan struct{} { return nil }

type testBundle struct {
	db  *dao.DB
	dsn string // the DSN of db's schema
	ctx context.Context
}

// setup starts one master in the background; workers are started by each test.
func setup(t *testing.T) *testBundle {
	t.Helper()
	db, dsn := daotest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	startMaster(t, db, 200*time.Millisecond)
	return &testBundle{db: db, dsn: dsn, ctx: ctx}
}

// startMaster runs a master with its parts, as a node starts them, on db until the test
// ends.
func startMaster(tb testing.TB, db *dao.DB, poll time.Duration) {
	tb.Helper()
	cfg := master.Config{ID: "m1", PollInterval: poll, Log: zerolog.Nop()}
	m := master.New(cfg, db, openGate{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{m.Run, master.NewSweep(m).Run,
		master.NewWaitTimeouts(cfg, db, openGate{}).Run, master.NewDeadlines(cfg, db, openGate{}).Run} {
		wg.Go(func() { _ = run(ctx) })
	}
	tb.Cleanup(func() { cancel(); wg.Wait() })
}

// startWorker runs a worker until the returned stop function is called; stop returns once
// the worker's shutdown is over.
func (b *testBundle) startWorker(t *testing.T, id string, shutdown time.Duration) (stop func()) {
	t.Helper()
	return b.startWorkerSlots(t, id, 4, shutdown)
}

// startWorkerSlots is startWorker with slots slots.
func (b *testBundle) startWorkerSlots(t *testing.T, id string, slots int, shutdown time.Duration) (stop func()) {
	t.Helper()
	stop, _ = b.startWorkerPolled(t, id, slots, shutdown)
	return stop
}

// startWorkerPolled is startWorkerSlots that also returns the worker's polls: a mark is there
// once the worker has handled a poll since the test last took one (worker.Polled).
func (b *testBundle) startWorkerPolled(t *testing.T, id string, slots int, shutdown time.Duration) (stop func(), polls *signal.Test[struct{}]) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(worker.Config{ID: id, Groups: []string{"default"}, Slots: slots, PollInterval: 200 * time.Millisecond,
		ShutdownTimeout: shutdown, LogLimit: 1 << 20, Log: zerolog.Nop()}, b.db, openGate{},
		executor.Set{"noop": executor.Noop{}, "shell": executor.Shell{Self: self, KillGrace: 500 * time.Millisecond}})
	polls = worker.Polled(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	var stopped bool
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop, polls
}

// waitPolls returns once the worker has handled n more polls.
func waitPolls(t *testing.T, polls *signal.Test[struct{}], n int) {
	t.Helper()
	polls.Clear() // a mark left from before the call is not one of the n
	for range n {
		polls.Wait(t, "a poll of the worker")
	}
}

func (b *testBundle) submit(t *testing.T, yaml string) int64 {
	t.Helper()
	spec, err := workflow.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return daotest.Submit(t, b.db, spec.Name, spec)
}

// waitDone waits until the workflow instance finishes.
func (b *testBundle) waitDone(t *testing.T, id int64) (*dao.WorkflowInstance, map[string]dao.TaskInstance) {
	t.Helper()
	var wf *dao.WorkflowInstance
	waitUntil(t, fmt.Sprintf("workflow instance %d to finish", id), func() bool {
		var err error
		if wf, err = b.db.WorkflowGet(b.ctx, id); err != nil {
			t.Fatal(err)
		}
		return wf.State.Terminal()
	})
	tasks, err := b.db.TaskListByWorkflow(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]dao.TaskInstance{}
	for _, ti := range tasks {
		byName[ti.Name] = ti
	}
	return wf, byName
}

func (b *testBundle) attempts(t *testing.T, taskID int64) []string {
	t.Helper()
	as, err := b.db.AttemptList(b.ctx, taskID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		o := "running"
		if a.Outcome != nil {
			o = string(*a.Outcome)
		}
		out = append(out, o)
	}
	return out
}

func TestDAGWithFanOutFanInRetriesTimeoutAndSkip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t, "w1", time.Second)
	b.startWorker(t, "w2", time.Second)
	id := b.submit(t, `
name: mixed
params: {greeting: hello}
tasks:
  - {name: start, type: shell, command: 'echo "$ZKSCHED_PARAM_greeting from $ZKSCHED_TASK_NAME"'}
  - {name: left, type: shell, command: 'echo left', depends-on: [start]}
  - {name: right, type: noop, depends-on: [start]}
  - {name: join, type: shell, command: 'echo joined', depends-on: [left, right]}
  - {name: flaky, type: shell, command: 'echo try $ZKSCHED_ATTEMPT; exit 4', retries: 2, retry-interval: 100ms}
  - {name: after-flaky, type: noop, depends-on: [flaky]}
  - {name: slow, type: shell, command: 'echo sleeping; sleep 30', timeout: 1s}
`)
	wf, tasks := b.waitDone(t, id)
	if wf.State != dao.WorkflowFailed || wf.Error == nil || !strings.Contains(*wf.Error, "flaky") || !strings.Contains(*wf.Error, "slow") {
		t.Fatalf("workflow = %s (%v); want failed naming flaky and slow", wf.State, wf.Error)
	}
	for name, want := range map[string]dao.TaskState{"start": dao.TaskSucceeded, "left": dao.TaskSucceeded,
		"right": dao.TaskSucceeded, "join": dao.TaskSucceeded, "flaky": dao.TaskFailed,
		"after-flaky": dao.TaskSkipped, "slow": dao.TaskFailed} {
		if got := tasks[name].State; got != want {
			t.Errorf("task %s is %s, want %s", name, got, want)
		}
	}
	if out := tasks["start"].Output; out == nil || *out != "hello from start" {
		t.Errorf("start output = %v, want %q", out, "hello from start")
	}
	if got := b.attempts(t, tasks["flaky"].ID); strings.Join(got, ",") != "failed,failed,failed" {
		t.Errorf("flaky attempts = %v, want three failures", got)
	}
	if f := tasks["flaky"]; f.Retries != 2 || f.ExitCode == nil || *f.ExitCode != 4 {
		t.Errorf("flaky = retries %d exit %v; want 2 retries used, exit 4", f.Retries, f.ExitCode)
	}
	if got := b.attempts(t, tasks["slow"].ID); strings.Join(got, ",") != "timed_out" {
		t.Errorf("slow attempts = %v, want one timeout", got)
	}
	if e := tasks["slow"].Error; e == nil || !strings.Contains(*e, "timed out after 1s") {
		t.Errorf("slow error = %v", e)
	}
	log, err := b.db.TaskLogRead(b.ctx, tasks["flaky"].ID, 3)
	if err != nil || !strings.Contains(log, "try 3") {
		t.Errorf("flaky attempt 3 log = %q, %v", log, err)
	}
	if n := len(b.attempts(t, tasks["after-flaky"].ID)); n != 0 {
		t.Errorf("skipped task has %d attempts, want none", n)
	}
}

func TestShutdownHandsBackAndAnotherWorkerFinishes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stop1 := b.startWorker(t, "w1", 300*time.Millisecond)
	id := b.submit(t, `
name: long
tasks:
  - {name: long, type: shell, command: 'if [ "$ZKSCHED_WORKER" = w1 ]; then echo started; sleep 60; fi; echo done on $ZKSCHED_WORKER'}
`)
	// Wait until w1 runs the task, then shut w1 down.
	waitUntil(t, "the task to run on w1", func() bool {
		tasks, _ := b.db.TaskListByWorkflow(b.ctx, id)
		return len(tasks) == 1 && tasks[0].State == dao.TaskRunning
	})
	stop1()
	tasks, _ := b.db.TaskListByWorkflow(b.ctx, id)
	if tasks[0].State != dao.TaskQueued {
		t.Fatalf("after w1's shutdown the task is %s, want queued", tasks[0].State)
	}
	b.startWorker(t, "w2", time.Second)
	_, byName := b.waitDone(t, id)
	long := byName["long"]
	if long.State != dao.TaskSucceeded || *long.Output != "done on w2" || long.Retries != 0 {
		t.Fatalf("task = %s output %v retries %d; want succeeded on w2 without a retry used", long.State, long.Output, long.Retries)
	}
	if got := b.attempts(t, long.ID); strings.Join(got, ",") != "handed_back,succeeded" {
		t.Fatalf("attempts = %v", got)
	}
}

// TestSlotFreedWhileTheResultIsWritten: an attempt whose run has ended gives its slot back
// while its result is written, and the worker holds no more than twice its slots. The test
// holds the rows of the first two running tasks, so their results cannot be written: the
// worker (2 slots) still runs the next two, then claims nothing more until the writes go
// through; every task then ends once, on one attempt.
func TestSlotFreedWhileTheResultIsWritten(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec, err := workflow.Parse([]byte(`
name: short
tasks:
  - {name: t, type: shell, command: 'sleep 0.3'}
`))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for range 6 {
		ids = append(ids, daotest.Submit(t, b.db, spec.Name, spec))
	}
	count := func(state dao.TaskState) int {
		var n int
		if err := b.db.SQL().Get(&n, `SELECT count(*) FROM task_instance WHERE state = $1`, string(state)); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		defer func() {
			if t.Failed() {
				t.Logf("%s: still %d running, %d queued", what, count(dao.TaskRunning), count(dao.TaskQueued))
			}
		}()
		waitUntil(t, what, ok)
	}
	_, polls := b.startWorkerPolled(t, "w1", 2, time.Second)
	waitFor("two tasks running", func() bool { return count(dao.TaskRunning) == 2 })
	hold, err := b.db.SQL().Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	var held []int64
	if err := hold.Select(&held, `SELECT id FROM task_instance WHERE state = 'running' FOR UPDATE`); err != nil || len(held) != 2 {
		t.Fatalf("held %v, %v", held, err)
	}
	waitFor("the next two claimed while the first two results wait", func() bool { return count(dao.TaskRunning) == 4 })
	// Four held, two of them recording and two running or recording: no fifth claim, though
	// the worker looks at every poll. A poll's claim comes before the next poll is handled.
	waitPolls(t, polls, 4)
	if r, q := count(dao.TaskRunning), count(dao.TaskQueued); r != 4 || q != 2 {
		t.Fatalf("with four results unwritten: %d running, %d queued; want 4 and 2", r, q)
	}
	if err := hold.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		wf, byName := b.waitDone(t, id)
		task := byName["t"]
		if wf.State != dao.WorkflowSucceeded || task.State != dao.TaskSucceeded {
			t.Fatalf("instance %d %s, task %s; want both succeeded", id, wf.State, task.State)
		}
		if got := b.attempts(t, task.ID); strings.Join(got, ",") != "succeeded" {
			t.Fatalf("task %d attempts = %v; want one", task.ID, got)
		}
	}
}

// TestClaimWhoseReplyWasLostIsHandedBack: the database committed a claim for this worker but
// the worker never heard (a restart mid-statement). The worker finds the task running under its
// name, hands it back, and the task runs.
func TestClaimWhoseReplyWasLostIsHandedBack(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	b := &testBundle{db: db, ctx: context.Background()}
	id := b.submit(t, "name: lost-reply\ntasks:\n  - {name: t, type: noop}\n")
	startMaster(t, db, 100*time.Millisecond)
	waitUntil(t, "the master to queue the task, and a claim of it", func() bool {
		claimed, err := db.TaskClaimQueued(b.ctx, "w1", []string{"default"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return len(claimed) > 0
	})
	b.startWorker(t, "w1", time.Second)
	_, tasks := b.waitDone(t, id)
	if got := strings.Join(b.attempts(t, tasks["t"].ID), ","); got != "interrupted,succeeded" {
		t.Fatalf("attempts = %s, want the lost claim handed back, then a run", got)
	}
}

// TestPooledTaskRunsOnceAPoolAppears: a worker started on a database that knows no pool
// claims without the pools' part of the claim; the first task to name a pool still runs, once
// the worker's poll has seen the pool appear.
func TestPooledTaskRunsOnceAPoolAppears(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t, "w1", 5*time.Second)
	if wf, _ := b.waitDone(t, b.submit(t, "name: plain\ntasks:\n  - {name: a, type: noop}\n")); wf.State != dao.WorkflowSucceeded {
		t.Fatalf("plain workflow: %s", wf.State)
	}
	if exist, err := b.db.TaskPoolsExist(b.ctx); err != nil || exist {
		t.Fatalf("pools before the pooled workflow: %v, %v", exist, err)
	}
	wf, tasks := b.waitDone(t, b.submit(t, "name: pooled\ntasks:\n  - {name: a, type: noop, pool: gpu}\n  - {name: b, type: noop, pool: gpu, depends-on: [a]}\n"))
	if wf.State != dao.WorkflowSucceeded || tasks["a"].WorkerID == nil || *tasks["a"].WorkerID != "w1" {
		t.Fatalf("pooled workflow: %s, tasks %+v", wf.State, tasks)
	}
}
