package master

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/workflow"
)

// TestSubmittedRootsRunBeforeAnyMaster: a submission queues its root tasks itself, with the
// instance's params merged over the definition's, so a worker runs them while no master is
// up; the master that comes up later claims the instance, creates the next task with the
// root's output, and finishes the instance.
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

// TestTaskEndClaimsTheInstanceByID: a task that ends in an instance no master has claimed yet
// (one that started with its roots) makes the master that hears of it claim that instance by
// id and advance it in the same round, rather than wait for its next claim of new instances;
// an instance another master owns is left alone.
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
	if got, err := db.WorkflowClaimByID(ctx, "m2", []int64{theirs}); err != nil || len(got) != 1 {
		t.Fatalf("m2's claim of %d = %v, %v", theirs, got, err)
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
}
