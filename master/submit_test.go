package master

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
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
	spec, err := workflow.Parse([]byte(`
name: early
params: {region: us, size: small}
tasks:
  - {name: first, type: shell, command: "echo {{.Params.region}}"}
  - {name: second, type: shell, command: "true", depends-on: [first]}
`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	var id int64
	err = db.Tx(ctx, func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(ctx, spec.Name, raw)
		if err != nil {
			return err
		}
		id, err = Submit(ctx, q, spec, v, json.RawMessage(`{"region":"eu"}`), 3)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := db.WorkflowGet(ctx, id)
	if err != nil || wf.State != dao.WorkflowRunning || wf.Owner != nil || wf.StartedAt == nil {
		t.Fatalf("instance after submit: %+v, %v; want running, started, without an owner", wf, err)
	}

	// No master yet: a worker claims the root and finishes it.
	got, err := db.TaskClaim(ctx, "w1", []string{workflow.DefaultGroup}, 10)
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

	mctx, cancel := context.WithCancel(ctx)
	m := New(Config{ID: "m1", PollInterval: 100 * time.Millisecond, Log: zerolog.Nop()}, db, newGate(true))
	done := make(chan struct{})
	go func() { _ = m.Run(mctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	var second []dao.TaskInstance
	waitFor(t, "the master to queue the second task", func() bool {
		second, err = db.TaskClaim(ctx, "w1", []string{workflow.DefaultGroup}, 10)
		return err == nil && len(second) == 1
	})
	if err := json.Unmarshal(second[0].Params, &p); err != nil || p.Upstream["first"].Output != out {
		t.Fatalf("second task's upstream = %+v, %v; want the root's output", p.Upstream, err)
	}
	if err := db.TaskFinishIfRunning(ctx, second[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded,
		Next: dao.TaskSucceeded}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the instance to succeed", func() bool {
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
	spec, err := workflow.Parse([]byte("name: byid\ntasks:\n  - {name: first, type: noop}\n  - {name: second, type: noop, depends-on: [first]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	submit := func() int64 {
		var id int64
		err := db.Tx(ctx, func(q *dao.Queries) error {
			v, err := q.DefinitionEnsure(ctx, spec.Name, raw)
			if err != nil {
				return err
			}
			id, err = Submit(ctx, q, spec, v, nil, 0)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	mine, theirs := submit(), submit()
	err = db.Tx(ctx, func(q *dao.Queries) error {
		got, err := q.WorkflowLockUnowned(ctx, []int64{theirs})
		if err != nil || len(got) != 1 {
			return fmt.Errorf("m2's lock of %d = %v, %v", theirs, got, err)
		}
		return q.WorkflowTakeLocked(ctx, "m2", []int64{theirs})
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.TaskClaim(ctx, "w1", []string{workflow.DefaultGroup}, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	for _, ti := range got {
		if err := db.TaskFinishIfRunning(ctx, ti.Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
			t.Fatal(err)
		}
	}

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
	got, err = db.TaskClaim(ctx, "w1", []string{workflow.DefaultGroup}, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	if err := db.TaskFinishIfRunning(ctx, got[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
		t.Fatal(err)
	}
	if !m.advanceRound(ctx, map[int64]struct{}{mine: {}}) {
		t.Fatal("advance round failed")
	}
	if wf, err := db.WorkflowGet(ctx, mine); err != nil || wf.State != dao.WorkflowSucceeded || *wf.Owner != "m1" {
		t.Fatalf("instance %d = %+v, %v; want succeeded under m1", mine, wf, err)
	}

	// A single-task instance whose task ends is finished by the first round, never driven.
	single, err := workflow.Parse([]byte("name: single\ntasks:\n  - {name: only, type: noop}\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec = single
	raw, _ = json.Marshal(spec)
	one := submit()
	got, err = db.TaskClaim(ctx, "w1", []string{workflow.DefaultGroup}, 10)
	if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != one {
		t.Fatalf("claim = %v, %v", got, err)
	}
	if err := db.TaskFinishIfRunning(ctx, got[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
		t.Fatal(err)
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
	spec, err := workflow.Parse([]byte("name: stranded\ntasks:\n  - {name: only, type: noop}\n"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	var ids []int64
	for range 5 {
		err := db.Tx(ctx, func(q *dao.Queries) error {
			v, err := q.DefinitionEnsure(ctx, spec.Name, raw)
			if err != nil {
				return err
			}
			id, err := Submit(ctx, q, spec, v, nil, 0)
			ids = append(ids, id)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	m := New(Config{ID: "m1", PollInterval: 20 * time.Millisecond, SweepSlice: 2, Log: zerolog.Nop()}, db, newGate(true))
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = m.Run(mctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// The fourth instance's task ends with no wake-up sent (written as a worker would, by SQL),
	// once the pass at start is over (three steps of two): only the steps of later polls can
	// find it.
	time.Sleep(300 * time.Millisecond)
	if _, err := db.SQL().ExecContext(ctx, `UPDATE task_instance SET state = 'succeeded', worker_id = 'w-gone',
		attempt = 1, started_at = now() - interval '1 minute', ended_at = now() - interval '1 minute'
		WHERE workflow_instance_id = $1`, ids[3]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sweep to finish the stranded instance", func() bool {
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
	spec, err := workflow.Parse([]byte("name: late\ntasks:\n  - {name: only, type: noop}\n"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	var id int64
	err = db.Tx(ctx, func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(ctx, spec.Name, raw)
		if err != nil {
			return err
		}
		id, err = Submit(ctx, q, spec, v, nil, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().ExecContext(ctx, `UPDATE task_instance SET state = 'succeeded', worker_id = 'w-gone',
		attempt = 1, started_at = now(), ended_at = now() WHERE workflow_instance_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	m := New(Config{ID: "m1", PollInterval: time.Hour, Log: zerolog.Nop()}, db, newGate(true))
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = m.Run(mctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the second pass to finish the instance", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowSucceeded
	})
	if took := time.Since(started); took < dao.StrandedAfter {
		t.Errorf("finished %v after the start, before the grace of %v was over: by what?", took, dao.StrandedAfter)
	}
}
