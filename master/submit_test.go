package master

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/signal"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// TestSubmittedRootsRunBeforeAnyMaster: a submission queues its root tasks itself, with the
// instance's params merged over the definition's, so a worker runs them while no master is
// up; the master that comes up later claims the instance (its sweep at start: the root's
// wake-up went unheard), creates the next task with the root's output, and finishes the
// instance.
func TestSubmittedRootsRunBeforeAnyMaster(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	id := submitFile(t, db, `
name: early
priority: 3
params: {region: us, size: small}
tasks:
  - {name: first, type: shell, command: "echo {{.Params.region}}"}
  - {name: second, type: shell, command: "true", depends-on: [first]}
`, json.RawMessage(`{"region":"eu"}`))
	wf, err := db.WorkflowGet(ctx, id)
	if err != nil || wf.State != dao.WorkflowRunning || wf.Owner != nil || wf.StartedAt == nil {
		t.Fatalf("instance after submit: %+v, %v; want running, started, without an owner", wf, err)
	}

	// No master yet: a worker claims the root and finishes it.
	got, err := db.TaskClaimQueued(ctx, "w1", []string{workflow.DefaultGroup}, 10)
	if err != nil || len(got) != 1 || got[0].Name != "first" || got[0].Priority != 3 {
		t.Fatalf("claim before any master = %+v, %v; want the root, with the workflow's priority", got, err)
	}
	var p workflow.TaskParams
	if err := json.Unmarshal(got[0].Params, &p); err != nil || p.Params["region"] != "eu" || p.Params["size"] != "small" {
		t.Fatalf("root params = %+v, %v; want the instance's region over the definition's, and its size", p.Params, err)
	}
	out := "eu\n"
	if err := db.TaskFinishIfRunning(ctx, got[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded,
		Next: dao.TaskSucceeded, Output: &out}); err != nil {
		t.Fatal(err)
	}
	// Time passes before a master comes up: the sweep takes an instance whose task ended
	// more than 5 s ago, as its wake-up is no longer on its way.
	if _, err := db.SQL().ExecContext(ctx, `UPDATE task_instance SET ended_at = ended_at - interval '1 minute'
		WHERE workflow_instance_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})

	var second []dao.TaskInstance
	m.waitFor(t, "the master to queue the second task", func() bool {
		second, err = db.TaskClaimQueued(ctx, "w1", []string{workflow.DefaultGroup}, 10)
		return err == nil && len(second) == 1
	})
	if err := json.Unmarshal(second[0].Params, &p); err != nil || p.Upstream["first"].Output != out {
		t.Fatalf("second task's upstream = %+v, %v; want the root's output", p.Upstream, err)
	}
	succeed(t, db, second...)
	m.waitFor(t, "the instance to succeed", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowSucceeded
	})
	if wf, _ := db.WorkflowGet(ctx, id); wf.Owner == nil || *wf.Owner != "m1" {
		t.Errorf("owner = %v, want m1", wf.Owner)
	}
}

// TestTaskEndClaimsTheInstanceByID: a task that ends in an instance no master has claimed
// (one that started with its roots) makes the master that hears of it lock that instance by
// id and advance it in the same round, taking it as its own since it goes on; an instance
// another master owns is left alone, and one that finishes is finished without ever being
// driven (one update, which names the master).
func TestTaskEndClaimsTheInstanceByID(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	const byID = "name: byid\ntasks:\n  - {name: first, type: noop}\n  - {name: second, type: noop, depends-on: [first]}\n"
	mine, theirs := submitFile(t, db, byID, nil), submitFile(t, db, byID, nil)
	err := db.Tx(ctx, func(q *dao.Queries) error {
		got, err := q.WorkflowLockUnowned(ctx, []int64{theirs})
		if err != nil || len(got) != 1 {
			return fmt.Errorf("m2's lock of %d = %v, %v", theirs, got, err)
		}
		return q.WorkflowTakeIfUnowned(ctx, "m2", []int64{theirs})
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.TaskClaimQueued(ctx, "w1", []string{workflow.DefaultGroup}, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	succeed(t, db, got...)

	m := New(Config{ID: "m1", PollInterval: time.Hour, Log: zerolog.Nop()}, db, newGate(true))
	if !m.advanceRound(ctx, map[int64]struct{}{mine: {}, theirs: {}}) {
		t.Fatal("advance round failed")
	}
	for id, owner := range map[int64]string{mine: "m1", theirs: "m2"} {
		wf, err := db.WorkflowGet(ctx, id)
		if err != nil || wf.Owner == nil || *wf.Owner != owner {
			t.Fatalf("owner of %d = %v, %v; want %s", id, wf.Owner, err, owner)
		}
	}
	if m.Owned() != 1 {
		t.Errorf("m1 drives %d instances, want 1", m.Owned())
	}
	tasks, err := db.TaskListByWorkflow(ctx, mine)
	if err != nil || len(tasks) != 2 || tasks[1].Name != "second" || tasks[1].State != dao.TaskQueued {
		t.Errorf("tasks of %d after the round = %+v, %v; want second queued", mine, tasks, err)
	}
	if tasks, _ := db.TaskListByWorkflow(ctx, theirs); len(tasks) != 1 {
		t.Errorf("m1 advanced m2's instance: %+v", tasks)
	}

	// The second task of mine ends: m1 drives it now, and finishes it.
	got, err = db.TaskClaimQueued(ctx, "w1", []string{workflow.DefaultGroup}, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	succeed(t, db, got...)
	if !m.advanceRound(ctx, map[int64]struct{}{mine: {}}) {
		t.Fatal("advance round failed")
	}
	if wf, err := db.WorkflowGet(ctx, mine); err != nil || wf.State != dao.WorkflowSucceeded || *wf.Owner != "m1" {
		t.Fatalf("instance %d = %+v, %v; want succeeded under m1", mine, wf, err)
	}

	// An instance whose tasks all ended before a master heard of them is finished by the
	// first round, never driven. (A single-task one is ended by its task's own statement:
	// dao.TestFinishEndsAWorkflowOfOneTask.)
	one := submitFile(t, db, "name: pair\ntasks:\n  - {name: a, type: noop}\n  - {name: b, type: noop}\n", nil)
	got, err = db.TaskClaimQueued(ctx, "w1", []string{workflow.DefaultGroup}, 10)
	if err != nil || len(got) != 2 || got[0].WorkflowInstanceID != one {
		t.Fatalf("claim = %v, %v", got, err)
	}
	succeed(t, db, got...)
	if wf, err := db.WorkflowGet(ctx, one); err != nil || wf.State != dao.WorkflowRunning {
		t.Fatalf("instance %d after its tasks ended = %+v, %v; want running, for a master", one, wf, err)
	}
	if !m.advanceRound(ctx, map[int64]struct{}{one: {}}) {
		t.Fatal("advance round failed")
	}
	if wf, err := db.WorkflowGet(ctx, one); err != nil || wf.State != dao.WorkflowSucceeded || wf.Owner == nil || *wf.Owner != "m1" {
		t.Fatalf("instance %d = %+v, %v; want succeeded, finished by m1", one, wf, err)
	}
	if m.Owned() != 0 {
		t.Errorf("m1 drives %d instances after both finished, want 0", m.Owned())
	}
}

// TestSweepFindsStrandedInstances: an instance whose last task ended without a wake-up any
// master heard (its worker died between the commit and the wake-up) is found by the sweep,
// which looks at a slice of the unowned running instances every poll and starts over at the
// end, and is finished. Instances whose tasks still run are left alone.
func TestSweepFindsStrandedInstances(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	var ids []int64
	for range 5 {
		ids = append(ids, submitFile(t, db, singleTask("stranded"), nil))
	}
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 20 * time.Millisecond, SweepSlice: 2})

	// The fourth instance's task ends with no wake-up sent (written as a worker would, by SQL),
	// once the pass at start is over (three steps of two): only the steps of later polls can
	// find it.
	m.waitSwept(t)
	endUnheard(t, db, ids[3], "1 minute")
	m.waitFor(t, "the sweep to finish the stranded instance", func() bool {
		wf, err := db.WorkflowGet(ctx, ids[3])
		return err == nil && wf.State == dao.WorkflowSucceeded && wf.Owner != nil && *wf.Owner == "m1"
	})
	for _, id := range []int64{ids[0], ids[1], ids[2], ids[4]} {
		if wf, err := db.WorkflowGet(ctx, id); err != nil || wf.State != dao.WorkflowRunning || wf.Owner != nil {
			t.Errorf("instance %d, whose task is queued = %+v, %v; want running without an owner", id, wf, err)
		}
	}
}

// TestSweepAgainAfterTheGrace: at start a master's sweep leaves an instance whose task ended
// a moment ago (its wake-up may be on its way), so it sweeps once more when that moment has
// passed: an instance whose task ended just before the master came up, with no wake-up
// anyone heard, is finished without any poll.
func TestSweepAgainAfterTheGrace(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	id := submitFile(t, db, singleTask("late"), nil)
	endUnheard(t, db, id, "0 seconds")
	started := time.Now()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: time.Hour})
	m.waitFor(t, "the second pass to finish the instance", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowSucceeded
	})
	if took := time.Since(started); took < dao.StrandedAfter {
		t.Errorf("finished %v after the start, before the grace of %v was over: by what?", took, dao.StrandedAfter)
	}
}

// TestSweepWaitsForTheGate: the sweep acts only while the gate is open. An instance stranded
// before the master came up is left alone while the gate is closed, and taken when it opens,
// with no poll (the clock is fake, so no poll and no second pass come): a change of the gate
// is what a reconnect looks like to the master.
func TestSweepWaitsForTheGate(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	id := submitFile(t, db, singleTask("stranded"), nil)
	endUnheard(t, db, id, "1 minute")
	gate := newGate(false)
	m := startMaster(t, New(Config{ID: "m1", PollInterval: time.Minute, Clock: clockwork.NewFakeClock(), Log: zerolog.Nop()}, db, gate))
	m.rescanned.Wait(t, "the master's listener to listen")
	if wf, err := db.WorkflowGet(ctx, id); err != nil || wf.State != dao.WorkflowRunning || wf.Owner != nil {
		t.Fatalf("instance with the gate closed = %+v, %v; want running without an owner", wf, err)
	}
	gate.Set(true)
	m.waitFor(t, "the sweep to finish the stranded instance", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowSucceeded && wf.Owner != nil && *wf.Owner == "m1"
	})
}

// submitFile stores a workflow file and submits an instance of it with params and the file's
// priority, as `zksched submit` does.
func submitFile(t *testing.T, db *dao.DB, file string, params json.RawMessage) int64 {
	t.Helper()
	spec, err := workflow.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	var id int64
	err = db.Tx(context.Background(), func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(context.Background(), spec.Name, raw, lifecycle.Facts(spec))
		if err != nil {
			return err
		}
		id, err = lifecycle.Submit(context.Background(), q, lifecycle.Submission{Spec: spec, Version: v, Params: params, Priority: spec.Priority})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// singleTask is the file of a workflow of one noop task.
func singleTask(name string) string {
	return "name: " + name + "\ntasks:\n  - {name: only, type: noop}\n"
}

// masterRun is a master a test runs with its parts (as a node starts them), and their test
// signals.
type masterRun struct {
	*Master
	sweep     *Sweep
	waits     *WaitTimeouts
	deadlines *Deadlines
}

// runMaster runs a master with cfg (and no log) and its parts until the test ends.
func runMaster(t *testing.T, db *dao.DB, cfg Config) *masterRun {
	t.Helper()
	cfg.Log = zerolog.Nop()
	return startMaster(t, New(cfg, db, newGate(true)))
}

// startMaster runs m and its parts, on m's Config, until the test ends.
func startMaster(t *testing.T, m *Master) *masterRun {
	t.Helper()
	r := &masterRun{Master: m, sweep: NewSweep(m), waits: NewWaitTimeouts(m.cfg, m.db, m.gate),
		deadlines: NewDeadlines(m.cfg, m.db, m.gate)}
	r.waiting.Init()
	r.rescanned.Init()
	r.sweep.swept.Init()
	r.waits.waiting.Init()
	r.deadlines.waiting.Init()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{r.Run, r.sweep.Run, r.waits.Run, r.deadlines.Run} {
		wg.Go(func() { _ = run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return r
}

// waitFor waits until cond holds, looking again each time the master or a part of it has done
// all it had to and waits (or the sweep has reached its end): what they change, they have
// changed by then.
func (r *masterRun) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(signal.WaitTimeout)
	for !cond() {
		select {
		case <-r.waiting.C():
		case <-r.sweep.swept.C():
		case <-r.waits.waiting.C():
		case <-r.deadlines.waiting.C():
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitSwept returns at the next time the master's sweep reaches the last unowned running
// instance, or the last time if the test has not seen it yet.
func (r *masterRun) waitSwept(t *testing.T) {
	t.Helper()
	r.sweep.swept.Wait(t, "the sweep to reach the last unowned running instance")
}

// succeed records the success of each of tasks, claimed by a worker.
func succeed(t *testing.T, db *dao.DB, tasks ...dao.TaskInstance) {
	t.Helper()
	for _, ti := range tasks {
		if err := db.TaskFinishIfRunning(context.Background(), ti.Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
}

// endUnheard ends the tasks of an instance as succeeded, ago ago (an SQL interval), written as
// a worker would write them but with no wake-up sent: its worker died between the two.
func endUnheard(t *testing.T, db *dao.DB, wf int64, ago string) {
	t.Helper()
	if _, err := db.SQL().ExecContext(context.Background(), `UPDATE task_instance SET state = 'succeeded',
		worker_id = 'w-gone', attempt = 1, started_at = now() - $2::interval, ended_at = now() - $2::interval
		WHERE workflow_instance_id = $1`, wf, ago); err != nil {
		t.Fatal(err)
	}
	// The instance started no later than its task.
	if _, err := db.SQL().ExecContext(context.Background(), `UPDATE workflow_instance
		SET started_at = least(started_at, now() - $2::interval) WHERE id = $1`, wf, ago); err != nil {
		t.Fatal(err)
	}
}
