package lifecycle_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
)

// store stores the workflow file src without submitting it.
func store(ctx context.Context, t *testing.T, db *dao.DB, src string) {
	t.Helper()
	spec := parse(t, src)
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Tx(ctx, func(q *dao.Queries) error {
		_, err := q.DefinitionEnsure(ctx, spec.Name, raw, lifecycle.Facts(spec))
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// children returns the instances the tasks of wf started, and the children the tasks of wf
// name, both ways of the link, which must agree.
func children(ctx context.Context, t *testing.T, db *dao.DB, wf int64) []int64 {
	t.Helper()
	var ids []int64
	if err := db.SQL().SelectContext(ctx, &ids, `SELECT id FROM workflow_instance
		WHERE parent_workflow_instance_id = $1 ORDER BY id`, wf); err != nil {
		t.Fatal(err)
	}
	byTask, err := db.TaskChildren(ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	for task, child := range byTask {
		p, err := db.WorkflowParent(ctx, child)
		if err != nil || p.Task == nil || *p.Task != task {
			t.Errorf("task %d names child %d, whose parent is %+v (%v)", task, child, p, err)
		}
	}
	if len(byTask) != len(ids) {
		t.Errorf("the tasks of %d name %d children, %d instances name it as their parent", wf, len(byTask), len(ids))
	}
	return ids
}

const (
	inner = "name: inner\ntasks:\n  - {name: hold, type: noop, group: nobody}\n"
	outer = "name: outer\ntasks:\n  - {name: start, type: workflow, workflow: inner}\n"
)

// TestChildStartedOnceByRacingDrivers: masters that claim and advance the same instances at
// once, or advance an unowned one whose task ended, start each workflow task's child once.
func TestChildStartedOnceByRacingDrivers(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store(ctx, t, db, inner)
	drivers := []*lifecycle.Driver{
		lifecycle.NewDriver(db, "m1", clockwork.NewRealClock()),
		lifecycle.NewDriver(db, "m2", clockwork.NewRealClock()),
		lifecycle.NewDriver(db, "m3", clockwork.NewRealClock()),
	}
	race := func(step func(d *lifecycle.Driver) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, len(drivers))
		for i, d := range drivers {
			wg.Go(func() { errs[i] = step(d) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	// A workflow task as a root: the instance waits for a master's claim.
	spec := parse(t, outer)
	var claimed []int64
	for range 10 {
		claimed = append(claimed, submit(ctx, t, db, spec))
	}
	for range 3 {
		race(func(d *lifecycle.Driver) error {
			_, err := d.ClaimAndAdvance(ctx, 3)
			return err
		})
	}
	// After a root that ran: the instance is unowned when its task ends.
	spec = parse(t, "name: after\ntasks:\n  - {name: first, type: noop}\n"+
		"  - {name: start, type: workflow, workflow: inner, depends-on: [first]}\n")
	var unowned []int64
	for range 10 {
		id := submit(ctx, t, db, spec)
		got, err := lifecycle.Claim(ctx, db, "w1", []string{"default"}, 1, true)
		if err != nil || len(got) != 1 {
			t.Fatalf("claim = %+v, %v", got, err)
		}
		out := ""
		res := dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded, Output: &out}
		if _, err := lifecycle.Finish(ctx, db, []dao.Finish{{Token: got[0].Token(), Result: res}}); err != nil {
			t.Fatal(err)
		}
		unowned = append(unowned, id)
	}
	race(func(d *lifecycle.Driver) error {
		_, err := d.AdvanceUnowned(ctx, unowned)
		return err
	})
	// And once more by every driver, owner or not.
	race(func(d *lifecycle.Driver) error {
		if _, err := d.AdvanceOwned(ctx, append(claimed, unowned...)); err != nil {
			return err
		}
		_, err := d.AdvanceUnowned(ctx, unowned)
		return err
	})
	for _, id := range append(claimed, unowned...) {
		if got := children(ctx, t, db, id); len(got) != 1 {
			t.Errorf("instance %d has children %v, want one", id, got)
		}
	}
}

// TestChildRolledBackWithItsAdvance: an advance that fails after it created the child (here
// the database refuses the task waiting on it, as a master killed there would never commit)
// leaves no child; the next advance starts one.
func TestChildRolledBackWithItsAdvance(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store(ctx, t, db, inner)
	id := submit(ctx, t, db, parse(t, outer))
	if _, err := db.SQL().ExecContext(ctx, `
		CREATE FUNCTION die_here() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'the master dies after creating the child'; END $$;
		CREATE TRIGGER die_here BEFORE INSERT ON task_instance
			FOR EACH ROW WHEN (NEW.type = 'workflow') EXECUTE FUNCTION die_here();`); err != nil {
		t.Fatal(err)
	}
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
	if _, err := d.ClaimAndAdvance(ctx, 10); err == nil {
		t.Fatal("the advance succeeded through the trigger that fails it")
	}
	var instances int
	if err := db.SQL().GetContext(ctx, &instances, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'inner'`); err != nil {
		t.Fatal(err)
	}
	if wf, err := db.WorkflowGet(ctx, id); err != nil || instances != 0 || wf.Owner != nil || wf.State != dao.WorkflowSubmitted {
		t.Fatalf("after the failed advance: %d children, parent %+v (%v); want none, the parent unclaimed", instances, wf, err)
	}
	if _, err := db.SQL().ExecContext(ctx, `DROP TRIGGER die_here ON task_instance`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ClaimAndAdvance(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if got := children(ctx, t, db, id); len(got) != 1 {
		t.Errorf("children %v after the second advance, want one", got)
	}
}

// TestSweepLeavesParentWaitingOnChild: an unowned parent (its master was fenced) whose only
// live task waits on its child is not stranded, however long the child runs; once the child
// ended, and with it the task, with no wake-up heard, the sweep takes the parent on.
func TestSweepLeavesParentWaitingOnChild(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store(ctx, t, db, "name: inner\ntasks:\n  - {name: hold, type: noop}\n")
	id := submit(ctx, t, db, parse(t, outer))
	m1 := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
	if _, err := m1.ClaimAndAdvance(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := db.Tx(ctx, func(q *dao.Queries) error {
		_, err := lifecycle.ReleaseLostMaster(ctx, q, "m1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	backdate := func() {
		t.Helper()
		if _, err := db.SQL().ExecContext(ctx, `UPDATE workflow_instance SET started_at = now() - interval '1 minute' WHERE id = $1;`, id); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL().ExecContext(ctx, `UPDATE task_instance SET ended_at = now() - interval '1 minute'
			WHERE workflow_instance_id = $1 AND ended_at IS NOT NULL`, id); err != nil {
			t.Fatal(err)
		}
	}
	backdate()
	m2 := lifecycle.NewDriver(db, "m2", clockwork.NewRealClock())
	sweep := func() []dao.WorkflowInstance {
		t.Helper()
		st, _, _, err := m2.SweepAndAdvance(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return st.Locked
	}
	if got := sweep(); len(got) != 0 {
		t.Fatalf("the sweep took %+v while the parent's task waits on its child", got)
	}
	kids := children(ctx, t, db, id)
	if len(kids) != 1 {
		t.Fatalf("children %v, want one", kids)
	}
	got, err := lifecycle.Claim(ctx, db, "w1", []string{"default"}, 1, true)
	if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != kids[0] {
		t.Fatalf("claim = %+v, %v; want the child's task", got, err)
	}
	out := "done"
	res := dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded, Output: &out}
	if _, err := lifecycle.Finish(ctx, db, []dao.Finish{{Token: got[0].Token(), Result: res}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.AdvanceUnowned(ctx, kids); err != nil {
		t.Fatal(err)
	}
	backdate()
	if got := sweep(); len(got) != 1 || got[0].ID != id {
		t.Fatalf("the sweep took %+v, want the parent %d whose child ended unheard", got, id)
	}
	if wf, err := db.WorkflowGet(ctx, id); err != nil || wf.State != dao.WorkflowSucceeded {
		t.Errorf("parent = %+v, %v; want it succeeded with its child", wf, err)
	}
}

// TestStopRacingTheChildsEnd: a stop of the parent and the master's end of its child at the
// same moment both apply, in either order, without a deadlock: the task ends with the child
// and the parent is stopped, or the task is killed and the child stopped.
func TestStopRacingTheChildsEnd(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store(ctx, t, db, "name: inner\ntasks:\n  - {name: hold, type: noop}\n")
	spec := parse(t, outer)
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
	const rounds = 20
	var ended, stopped int
	for range rounds {
		id := submit(ctx, t, db, spec)
		if _, err := d.ClaimAndAdvance(ctx, 10); err != nil {
			t.Fatal(err)
		}
		kids := children(ctx, t, db, id)
		got, err := lifecycle.Claim(ctx, db, "w1", []string{"default"}, 1, true)
		if err != nil || len(kids) != 1 || len(got) != 1 {
			t.Fatalf("children %v, claim %+v, %v", kids, got, err)
		}
		res := dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}
		if _, err := lifecycle.Finish(ctx, db, []dao.Finish{{Token: got[0].Token(), Result: res}}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var stopErr, endErr error
		wg.Go(func() { _, stopErr = lifecycle.Stop(ctx, db, id, nil) })
		wg.Go(func() { _, endErr = d.AdvanceUnowned(ctx, kids) })
		wg.Wait()
		if stopErr != nil || endErr != nil {
			t.Fatalf("stop: %v; the child's end: %v", stopErr, endErr)
		}
		task, err := db.TaskGet(ctx, got[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		child, err := db.WorkflowGet(ctx, kids[0])
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := db.TaskListByWorkflow(ctx, id)
		if err != nil || len(tasks) != 1 {
			t.Fatalf("parent's tasks = %+v, %v", tasks, err)
		}
		switch start := tasks[0]; {
		case child.State == dao.WorkflowSucceeded && start.State == dao.TaskSucceeded:
			ended++
		case child.State == dao.WorkflowStopped && start.State == dao.TaskKilled:
			stopped++
		default:
			t.Fatalf("child %s (its task %s), parent task %s: want both ended or both stopped", child.State, task.State, start.State)
		}
	}
	t.Logf("%d rounds: the child's end first %d times, the stop %d", rounds, ended, stopped)
}
