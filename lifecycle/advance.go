package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/faultinject"
	"github.com/zksched/zksched/workflow"
)

// Driver carries out a master's transitions of the workflow instances it drives: claims,
// admissions and advances, each in one transaction whose every write is conditioned on the
// owner (or on the instance being unowned and locked).
type Driver struct {
	owner string
	db    *dao.DB
	clock clockwork.Clock
	specs Specs

	// madeItems, nil outside tests, is called in an advance's transaction once it has created
	// items of a for-each task, before it commits; an error aborts the transaction.
	madeItems func() error
	// madeRunWait, nil outside tests, is called likewise once it has created a workflow sensor.
	madeRunWait func() error
}

// NewDriver returns the Driver of master owner. clock is the one Stepped.Deadlines are on.
func NewDriver(db *dao.DB, owner string, clock clockwork.Clock) *Driver {
	return &Driver{owner: owner, db: db, clock: clock}
}

// Stepped is what one advance transaction did, once it has committed.
type Stepped struct {
	// Locked are the instances the step held: those advanced, finished or not.
	Locked []dao.WorkflowInstance
	// Taken are the unowned instances the step made its owner's, with AdvanceUnowned.
	Taken []dao.WorkflowInstance
	// Ended are the instances the step finished.
	Ended []Ended
	// Lost are the ids asked for (AdvanceOwned) that the owner no longer drives.
	Lost []int64
	// Released are the instances the step gave up (or did not take): they only wait, for a
	// signal or a timeout, whose end wakes the masters as a task's end does.
	Released []int64
	// RunWaits are the workflow sensors the step created waiting for a run: once it has
	// committed, step looks whether their run ended already (dao.TaskEndIfRunEnded), and
	// RunWaitsEnded counts those it ended. RunWaitErr is that look's failure, which the
	// masters' poll makes up for: the step itself committed.
	RunWaits      []int64
	RunWaitsEnded int
	RunWaitErr    error
	// Deadlines holds when each instance with a workflow timeout that goes on times out, on
	// this host's clock.
	Deadlines map[int64]time.Time
}

// Ended is the end a step gave an instance.
type Ended struct {
	ID    int64
	State dao.WorkflowState
	Error string
}

// AdvanceOwned advances those of ids the owner still drives (dao.WorkflowLockManyIfOwned);
// the others are Lost.
func (d *Driver) AdvanceOwned(ctx context.Context, ids []int64) (Stepped, error) {
	return d.step(ctx, ids, func(q *dao.Queries) ([]dao.WorkflowInstance, error) {
		return q.WorkflowLockManyIfOwned(ctx, ids, d.owner)
	}, false)
}

// AdvanceUnowned advances those of ids that run without an owner and that no other master
// holds (dao.WorkflowLockUnowned): a task of theirs ended while no master drove them. Those
// that finish are finished; the owner takes the others (Taken), but for those that only wait
// (Released).
func (d *Driver) AdvanceUnowned(ctx context.Context, ids []int64) (Stepped, error) {
	return d.step(ctx, nil, func(q *dao.Queries) ([]dao.WorkflowInstance, error) {
		return q.WorkflowLockUnowned(ctx, ids)
	}, true)
}

// ClaimAndAdvance claims up to limit unowned instances that need a master whatever their
// tasks do (dao.WorkflowClaimUnowned) and advances them in the same transaction, which the
// claim's row locks already protect: a new instance's first tasks are queued by the statement
// after the one that claimed it.
func (d *Driver) ClaimAndAdvance(ctx context.Context, limit int) (Stepped, error) {
	return d.step(ctx, nil, func(q *dao.Queries) ([]dao.WorkflowInstance, error) {
		return q.WorkflowClaimUnowned(ctx, d.owner, limit)
	}, false)
}

// SweepAndAdvance takes one step of the sweep: of the next slice unowned running instances
// after id after, it claims and advances those with no task left queued or running
// (dao.WorkflowClaimStranded). It returns the last id the step looked at and how many
// instances it looked at: fewer than slice means the sweep reached the end.
func (d *Driver) SweepAndAdvance(ctx context.Context, after int64, slice int) (st Stepped, upto int64, n int, err error) {
	st, err = d.step(ctx, nil, func(q *dao.Queries) ([]dao.WorkflowInstance, error) {
		var err error
		if upto, n, err = q.WorkflowSweepRange(ctx, after, slice); err != nil || n == 0 {
			return nil, err
		}
		return q.WorkflowClaimStranded(ctx, d.owner, after, upto)
	}, false)
	return st, upto, n, err
}

// Admit makes the owner the master of the waiting instances of capped workflows that fit
// under their caps (dao.WorkflowAdmitIfUnderCap); its next advance creates their roots.
func (d *Driver) Admit(ctx context.Context, limit int) ([]dao.WorkflowInstance, error) {
	return d.db.WorkflowAdmitIfUnderCap(ctx, d.owner, limit)
}

// AdmitKeys makes the owner the master of the waiting instances of concurrency keys that may
// start now, key by key (dao.WorkflowAdmitKeyedIfUnderMax), in each key's submit order: with
// ids, the keys of those instances (a wake-up's: an instance of theirs was created, ended or
// stopped); with ids nil, up to limit keys that have an instance to admit (a poll's pass,
// which finds what a lost wake-up left waiting). A key of a capped workflow is looked at with
// every key of its workflow that has an instance to admit: the end of one of its instances
// frees a slot of the whole workflow. Its next advance creates the admitted instances' roots.
func (d *Driver) AdmitKeys(ctx context.Context, ids []int64, limit int) ([]dao.WorkflowInstance, error) {
	var keys []dao.Key
	var err error
	if ids == nil {
		keys, err = d.db.WorkflowKeysAdmittable(ctx, "", limit)
	} else {
		keys, err = d.keysToAdmit(ctx, ids, limit)
	}
	if err != nil {
		return nil, err
	}
	var all []dao.WorkflowInstance
	for _, k := range keys {
		got, err := d.db.WorkflowAdmitKeyedIfUnderMax(ctx, d.owner, k, limit)
		all = append(all, got...)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// keysToAdmit returns the keys of the instances ids, those of a capped workflow replaced by
// every key of the workflow with an instance to admit (up to limit).
func (d *Driver) keysToAdmit(ctx context.Context, ids []int64, limit int) ([]dao.Key, error) {
	of, err := d.db.WorkflowKeysOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	var keys []dao.Key
	wide := map[string]bool{}
	for _, k := range of {
		if !k.Capped {
			keys = append(keys, k)
			continue
		}
		if wide[k.Workflow] {
			continue
		}
		wide[k.Workflow] = true
		more, err := d.db.WorkflowKeysAdmittable(ctx, k.Workflow, limit)
		if err != nil {
			return nil, err
		}
		keys = append(keys, more...)
	}
	return keys, nil
}

// step advances, in one transaction, the instances pick returns locked: those of ids still
// owned, or newly claimed ones (then ids is nil), or, with take, unowned ones pick locked
// without claiming them: those that finish are finished in one update, and the owner takes
// the others. An instance left with nothing live but waiting tasks and no workflow timeout
// to enforce needs no master until a wait ends: it is released, or not taken.
func (d *Driver) step(ctx context.Context, ids []int64, pick func(q *dao.Queries) ([]dao.WorkflowInstance, error), take bool) (Stepped, error) {
	var st Stepped
	began := d.clock.Now()
	err := d.db.Tx(ctx, func(q *dao.Queries) error {
		st = Stepped{Deadlines: map[int64]time.Time{}}
		var err error
		if st.Locked, err = pick(q); err != nil {
			return err
		}
		locked := make(map[int64]bool, len(st.Locked))
		var wfIDs []int64 // those that may have task instances: all but freshly claimed ones
		for _, wf := range st.Locked {
			locked[wf.ID] = true
			if !wf.Fresh {
				wfIDs = append(wfIDs, wf.ID)
			}
		}
		for _, id := range ids {
			if !locked[id] {
				st.Lost = append(st.Lost, id)
			}
		}
		var all []dao.TaskOutcome
		if len(wfIDs) > 0 {
			if all, err = q.TaskListByWorkflows(ctx, wfIDs); err != nil {
				return err
			}
		}
		tasksOf := make(map[int64][]dao.TaskOutcome, len(st.Locked))
		for _, t := range all {
			tasksOf[t.WorkflowInstanceID] = append(tasksOf[t.WorkflowInstanceID], t)
		}
		a := &advance{d: d, q: q, take: take, began: began, st: &st}
		for i := range st.Locked {
			if err := a.instance(ctx, &st.Locked[i], tasksOf[st.Locked[i].ID]); err != nil {
				return err
			}
		}
		return a.write(ctx)
	})
	if err != nil {
		return Stepped{}, err
	}
	if len(st.RunWaits) > 0 {
		// Where the fault tests kill a master: its workflow sensors are created, unlooked at.
		faultinject.Point("runwait-before-look")
	}
	st.RunWaitsEnded, st.RunWaitErr = d.endRunWaits(ctx, st.RunWaits)
	return st, nil
}

// advance is one step's transaction: what it decides for each instance it holds, gathered
// and written at its end, a statement for each kind of write.
type advance struct {
	d     *Driver
	q     *dao.Queries
	take  bool
	began time.Time
	st    *Stepped

	rows        []dao.NewTask
	fins        []dao.WorkflowFinish
	forEachEnds []dao.ForEachEnd
	// madeItems says the items of a for-each task are among rows.
	madeItems bool
}

// instance decides the next step of the locked instance wf, whose task instances are tasks:
// failed past its workflow timeout, or the tasks to create (a for-each's items, children
// started), and then finished, released while it only waits, or taken.
func (a *advance) instance(ctx context.Context, wf *dao.WorkflowInstance, tasks []dao.TaskOutcome) error {
	spec, err := a.d.specs.Get(ctx, a.q, wf.WorkflowName, wf.WorkflowVersion)
	if err != nil {
		return err
	}
	if done, err := a.timeout(ctx, wf, spec); done || err != nil {
		return err
	}
	// rows[created:] are the rows this instance's advance creates; a task that started its
	// child is created waiting on it, apart from them (children).
	created, children := len(a.rows), 0
	// The params (and the asset events of a run they started) are read only for an instance
	// that creates tasks.
	var in *inputs
	readParams := func() (inputs, error) {
		if in != nil {
			return *in, nil
		}
		params, err := instanceParams(spec, wf.Params)
		if err != nil {
			return inputs{}, fmt.Errorf("workflow instance %d: %w", wf.ID, err)
		}
		assets, err := runAssets(ctx, a.q, spec, wf.ID)
		if err != nil {
			return inputs{}, err
		}
		in = &inputs{params: params, assets: assets}
		return *in, nil
	}
	items, ended, err := forEach(ctx, a.q, wf, spec, tasks, readParams)
	if err != nil {
		return err
	}
	a.rows, a.forEachEnds = append(a.rows, items...), append(a.forEachEnds, ended...)
	a.madeItems = a.madeItems || len(items) > 0
	states := make(map[string]dao.TaskState, len(tasks))
	for _, t := range tasks {
		states[t.Name] = t.State
	}
	data := func(t *workflow.Task) (workflow.TemplateData, error) {
		in, err := readParams()
		return workflow.TemplateData{Params: in.params, Upstream: upstream(t, tasks), Assets: in.assets}, err
	}
	p := Decide(spec, states, func(t *workflow.Task) (bool, error) {
		if t.When == "" {
			return true, nil
		}
		d, err := data(t)
		if err != nil {
			return false, err
		}
		return t.Runs(ctx, d)
	}, func(t *workflow.Task) ([]string, error) {
		d, err := data(t)
		if err != nil {
			return nil, err
		}
		items, err := t.Items(ctx, d)
		if err == nil && len(items) == 0 {
			// Created succeeded by this advance: the tasks it decides next see its output.
			out := noItems
			tasks = append(tasks, dao.TaskOutcome{WorkflowInstanceID: wf.ID, Name: t.Name, State: dao.TaskSucceeded, Output: &out})
		}
		return items, err
	})
	if len(p.Create) > 0 {
		in, err := readParams()
		if err != nil {
			return err
		}
		if children, err = a.create(ctx, wf, p.Create, in, tasks); err != nil {
			return err
		}
	}
	switch {
	case p.Done:
		fin := dao.WorkflowFinish{ID: wf.ID, State: p.State, Error: p.Error}
		if p.State == dao.WorkflowSucceeded {
			fin.Output = finalOutput(spec, tasks)
		}
		a.fins = append(a.fins, fin)
		a.st.Ended = append(a.st.Ended, Ended{ID: wf.ID, State: p.State, Error: p.Error})
	case spec.Timeout == 0 && onlyWaiting(tasks, a.rows[created:], children):
		a.st.Released = append(a.st.Released, wf.ID)
	case a.take:
		a.st.Taken = append(a.st.Taken, *wf)
	}
	return nil
}

// timeout enforces the workflow timeout of spec on wf: it notes the deadline of one still
// within it, or fails one past it (and kills its tasks), which it reports done. The database's
// clock decides, the one ended_at is set by: no skew between hosts.
func (a *advance) timeout(ctx context.Context, wf *dao.WorkflowInstance, spec *workflow.Spec) (done bool, err error) {
	limit := time.Duration(spec.Timeout)
	if limit <= 0 || wf.RunningMs == nil {
		return false, nil
	}
	ran := time.Duration(*wf.RunningMs) * time.Millisecond
	if ran < limit {
		a.st.Deadlines[wf.ID] = a.began.Add(limit - ran)
		return false, nil
	}
	msg := "workflow timeout " + limit.String() + " exceeded"
	if a.take {
		// Failed by its owner, as one it drove: it kills the tasks as well.
		if err := a.q.WorkflowTakeIfUnowned(ctx, a.d.owner, []int64{wf.ID}); err != nil {
			return false, err
		}
	}
	stopping, err := a.q.WorkflowTimeOutIfOwned(ctx, wf.ID, a.d.owner, msg)
	if err != nil {
		return false, err
	}
	a.st.Ended = append(a.st.Ended, Ended{ID: wf.ID, State: dao.WorkflowFailed,
		Error: fmt.Sprintf("%s; killing %d running tasks", msg, stopping)})
	return true, nil
}

// create adds the rows of the planned tasks of wf to the step's: each task's, a for-each's
// first items, for a workflow task its child, started now (or the task failed if it cannot
// start one), and a workflow sensor, created waiting for its run. It returns how many tasks it
// created waiting apart from the rows: workflow tasks on their children, workflow sensors.
func (a *advance) create(ctx context.Context, wf *dao.WorkflowInstance, planned []Planned, in inputs, tasks []dao.TaskOutcome) (children int, err error) {
	for _, c := range planned {
		if c.Task.WorkflowRun != nil && c.State == dao.TaskQueued {
			id, failed, err := a.d.awaitRun(ctx, a.q, wf, c, in, tasks)
			switch {
			case err != nil:
				return children, err
			case failed != nil:
				a.rows = append(a.rows, *failed)
			default:
				children++
				if id != 0 {
					a.st.RunWaits = append(a.st.RunWaits, id)
				}
			}
			continue
		}
		if c.Task.Type == workflow.TypeWorkflow && c.State == dao.TaskQueued {
			failed, err := a.d.startChild(ctx, a.q, wf, c, in, tasks)
			if err != nil {
				return children, err
			}
			if failed != nil {
				a.rows = append(a.rows, *failed)
			} else {
				children++
			}
			continue
		}
		row, err := taskRow(wf.ID, wf.Priority, c, in, tasks)
		if err != nil {
			return children, err
		}
		a.rows = append(a.rows, row)
		if c.State != dao.TaskWaiting || c.Items == nil {
			continue
		}
		first := c.Items[:firstItems(c.Task, len(c.Items))]
		made, err := itemRows(wf, c.Task, in, upstream(c.Task, tasks), first, 0)
		if err != nil {
			return children, err
		}
		a.rows = append(a.rows, made...)
		a.madeItems = true
	}
	return children, nil
}

// write carries out what the step decided, a statement each: the for-each parents ended, the
// task instances created, the instances released, finished and taken.
func (a *advance) write(ctx context.Context) error {
	q, st := a.q, a.st
	if _, err := q.TaskFinishManyForEachIfWaiting(ctx, a.forEachEnds); err != nil {
		return err
	}
	if _, err := q.TaskCreateMany(ctx, a.rows); err != nil {
		return err
	}
	if !a.take {
		if err := q.WorkflowReleaseIfOwned(ctx, a.d.owner, st.Released); err != nil {
			return err
		}
	}
	if a.madeItems {
		// Where the fault tests kill a master: the items exist in this transaction alone.
		faultinject.Point("foreach-before-commit")
		if a.d.madeItems != nil {
			if err := a.d.madeItems(); err != nil {
				return err
			}
		}
	}
	// The rows are locked and running, unowned or under this owner, so every one of them
	// finishes; a child's parent task ends with it.
	if _, err := q.WorkflowFinishManyIfOwnedOrUnowned(ctx, a.d.owner, a.fins); err != nil {
		return err
	}
	takenIDs := make([]int64, len(st.Taken))
	for i, wf := range st.Taken {
		takenIDs[i] = wf.ID
	}
	return q.WorkflowTakeIfUnowned(ctx, a.d.owner, takenIDs)
}

// onlyWaiting reports whether an instance whose task instances are tasks, and which creates
// rows and children tasks waiting on their child, has something live and all of it waiting:
// nothing for a master to drive until a wait ends (a signal, a timeout, a child's end), which
// wakes the masters with the instance.
func onlyWaiting(tasks []dao.TaskOutcome, rows []dao.NewTask, children int) bool {
	live := children
	for _, t := range tasks {
		if !t.State.Terminal() {
			if t.State != dao.TaskWaiting {
				return false
			}
			live++
		}
	}
	for _, r := range rows {
		if !r.State.Terminal() {
			if r.State != dao.TaskWaiting {
				return false
			}
			live++
		}
	}
	return live > 0
}
