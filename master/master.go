// Package master drives workflow instances: it creates each task instance once its
// dependencies are terminal (queued, or skipped below a failure), and finishes the instance
// when every task has. Every write is conditioned on ownership, so a master whose instance was
// released by a failover stops driving it.
//
// A submission (Submit, SubmitNow; submit.go) creates the instance with its root tasks already
// queued, so the first tasks start on the workers' wake-up, not a master's claim and a second
// commit later: the instance starts running without an owner, as one a failover released. It
// needs no master until one of its tasks ends; that task's wake-up names it, and the master
// that hears it locks it by id, advances it, and finishes it in one update or becomes its
// owner if it goes on. A workflow of one task (without a cap or a timeout) needs no master:
// the worker's statement that records the task's end ends the instance as well
// (dao.TaskFinishMany), and the masters hear nothing of it. The claim of unowned instances
// (on announcements and polls) takes only those that need a master whatever their tasks do:
// new ones without roots, and running ones whose workflow has a timeout, which their owner
// enforces. A sweep, a slice of the unowned running instances every poll and a whole pass at
// start and after a reconnect, takes those whose last task's wake-up nobody heard. Instances
// of workflows with max-active-instances wait for admission, which creates their roots.
//
// Retries and timeouts are decided where the attempt ends, by the worker, from the policy the
// master copied onto the task instance (max_retries, retry_interval, timeout). The
// workflow-level policies are the master's: an instance of a workflow with
// max-active-instances starts only while its workflow has a free slot, one past its workflow
// timeout (measured from its start, on the master's clock against the database's start time)
// fails and has its tasks killed, and its priority is added to every task's.
//
// The Scheduler, in schedule.go, fires the workflows' cron schedules; fire.go holds what it
// shares with the command line: storing a schedule, triggers and backfills.
package master

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// Gate says whether the node may act: it is registered in ZooKeeper and connected.
type Gate interface {
	Active() bool
	// Changed is closed at the next change of Active.
	Changed() <-chan struct{}
}

// Config configures a Master.
type Config struct {
	// ID is the node identity, host:port_startMillis; it is the owner of the instances.
	ID string
	// PollInterval is how often the master rescans without a notification.
	PollInterval time.Duration
	// SweepSlice is how many unowned running instances a step of the sweep looks at; 0 is
	// sweepSlice.
	SweepSlice int
	Log        zerolog.Logger
}

// Master drives the workflow instances it owns.
type Master struct {
	cfg  Config
	db   *dao.DB
	gate Gate

	mu    sync.Mutex
	specs map[specKey]*workflow.Spec // definitions never change: cache them
	owned map[int64]struct{}
	// deadlines holds when each owned instance with a workflow timeout times out, on this
	// host's clock, from its age by the database's clock at its last advance.
	deadlines map[int64]time.Time

	// sweptTo is where the sweep of unowned running instances goes on from (an id; 0: the
	// start). Only the Run loop touches it.
	sweptTo int64
}

type specKey struct {
	name    string
	version int
}

// claimBatch is how many instances one claim statement takes. A round of the master's loop
// claims advanceParallel batches at most before it advances what it has: a backlog of new
// instances is worked through in rounds, not claimed whole before the first of them starts.
const claimBatch = 100

// sweepSlice is how many unowned running instances one step of the sweep looks at (each an
// index probe of its tasks): a step every poll bounds the sweep's cost whatever the backlog,
// and passes over 10,000 such instances in ten polls.
const sweepSlice = 1000

// New returns a Master.
func New(cfg Config, db *dao.DB, gate Gate) *Master {
	return &Master{cfg: cfg, db: db, gate: gate, specs: map[specKey]*workflow.Spec{}, owned: map[int64]struct{}{},
		deadlines: map[int64]time.Time{}}
}

// Owned returns how many workflow instances the master drives now.
func (m *Master) Owned() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.owned)
}

// newClaimDelay is how long after a new instance is announced the master claims it (Run).
const newClaimDelay = 20 * time.Millisecond

// fullResyncEvery is how many polls pass between two full resyncs, which advance every owned
// instance. A notification is lost only with the listening connection or to an overflowing
// consumer, and both are followed by a full resync at once (Wakeup.Rescan); the periodic one is
// a backstop that costs a pass over every owned instance, so it is not run at every poll.
const fullResyncEvery = 10

// Run drives workflows until ctx ends. It wakes on notifications and polls as a fallback.
func (m *Master) Run(ctx context.Context) error {
	wake := m.db.ListenMaster(m.cfg.Log)
	defer wake.Close()
	tick := time.NewTicker(m.cfg.PollInterval)
	defer tick.Stop()
	// admit asks for a pass over the waiting instances of capped workflows as well as the
	// claim. sweep asks for a whole pass of the sweep (the unowned instances whose wake-ups
	// may have been missed), sweepStep for one step of it.
	rescan, claim, admit, sweep := true, true, true, true
	sweepStep := false
	// A whole pass at start or after a Rescan skips instances whose last task ended in the
	// last dao.StrandedAfter (their wake-up may be on its way, or may have been what was
	// missed): a second pass once that has passed takes those it missed.
	var sweepAgain <-chan time.Time
	pass := func() { sweep, m.sweptTo = true, 0 }
	passNow := func() {
		pass()
		sweepAgain = time.After(dao.StrandedAfter + time.Second)
	}
	passNow()
	// What a change of the gate and the second pass's timer ask for, from either wait below.
	onGate := func() {
		rescan, claim, admit = true, true, true
		passNow()
	}
	onSweepAgain := func() {
		pass()
		sweepAgain = nil
	}
	polls := 0
	dirty := map[int64]struct{}{}
	// newClaim fires the claim of new instances, newClaimDelay after the first announced:
	// they started with their root tasks queued, so nothing waits for the master, and the
	// instances submitted meanwhile are claimed in one statement instead of one each.
	var newClaim <-chan time.Time
	note := func(w dao.Wakeup) {
		switch {
		case w.Rescan:
			rescan, claim, admit = true, true, true
			passNow()
		case w.Payload == "":
			claim, admit = true, true
		case w.Payload == dao.WakeupNew:
			if newClaim == nil && !claim {
				newClaim = time.After(newClaimDelay)
			}
		default:
			// A list of workflow instance ids: a worker's batch of results wakes once.
			for f := range strings.SplitSeq(w.Payload, ",") {
				if id, err := strconv.ParseInt(f, 10, 64); err == nil {
					dirty[id] = struct{}{}
				}
			}
		}
	}
	onTick := func() {
		claim, admit = true, true
		if polls++; polls%fullResyncEvery == 0 {
			rescan = true
		}
		sweepStep = true
		m.markDue(dirty)
	}
	for ctx.Err() == nil {
		busy := false
		if m.gate.Active() {
			if rescan {
				rescan = !m.resync(ctx, dirty)
			}
			if claim {
				// A failed claim waits for the next wake-up or poll, as a failed round does:
				// with the database away, retrying at once would spin.
				var ok bool
				ok, claim = m.claim(ctx, dirty, admit)
				admit = admit && !ok
				newClaim = nil
			}
			if sweep || sweepStep {
				// A failed step waits for the next wake-up or poll, as a failed claim does.
				if done, ok := m.sweepOne(ctx); ok {
					sweep = sweep && !done
				} else {
					sweep = false
				}
				sweepStep = false
			}
			advanced := m.advanceRound(ctx, dirty)
			busy = (advanced && len(dirty) > 0) || claim || sweep
		}
		if busy {
			// More to do: take what has arrived without waiting for it, so the instances whose
			// tasks just ended are advanced in the next round, not behind the whole backlog.
			select {
			case w := <-wake.C:
				note(w)
				drain(wake.C, note)
			case <-tick.C:
				onTick()
			case <-m.gate.Changed():
				onGate()
			case <-newClaim:
				claim = true
			case <-sweepAgain:
				onSweepAgain()
			case <-ctx.Done():
			default:
			}
			continue
		}
		select {
		case <-ctx.Done():
		case w := <-wake.C:
			// Take every wake-up already waiting, so one advance covers them all.
			note(w)
			drain(wake.C, note)
		case <-tick.C:
			onTick()
		case <-m.gate.Changed():
			onGate()
		case <-newClaim:
			claim = true
		case <-sweepAgain:
			onSweepAgain()
		}
	}
	return nil
}

// drain passes every wake-up already waiting on c to note.
func drain(c <-chan dao.Wakeup, note func(dao.Wakeup)) {
	for {
		select {
		case w := <-c:
			note(w)
		default:
			return
		}
	}
}

// markDue marks the owned instances whose workflow timeout has passed, by the deadline their
// last advance computed from the database's clock.
func (m *Master) markDue(dirty map[int64]struct{}) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, at := range m.deadlines {
		if !now.Before(at) {
			dirty[id] = struct{}{}
		}
	}
}

// resync marks every instance the master owns as dirty, which also picks up changes whose
// notification was lost. It reports success.
func (m *Master) resync(ctx context.Context, dirty map[int64]struct{}) bool {
	ids, err := m.db.WorkflowListOwnedActive(ctx, m.cfg.ID)
	if err != nil {
		m.warn(ctx, err, "list owned workflow instances")
		return false
	}
	owned := make(map[int64]struct{}, len(ids))
	for _, id := range ids {
		owned[id] = struct{}{}
		dirty[id] = struct{}{}
	}
	m.mu.Lock()
	m.owned = owned
	for id := range m.deadlines {
		if _, ok := owned[id]; !ok {
			delete(m.deadlines, id)
		}
	}
	m.mu.Unlock()
	return true
}

// claim takes up to advanceParallel batches of unowned instances, and admits waiting ones of capped workflows.
// It reports whether it succeeded, and whether there may be more to claim.
func (m *Master) claim(ctx context.Context, dirty map[int64]struct{}, admit bool) (ok, more bool) {
	// One claim first: a wake-up usually announces a few instances, and a second claim at
	// once would find nothing at the cost of a transaction. Only after a full batch (a
	// backlog) do advanceParallel claims run at once; SKIP LOCKED gives each its own instances.
	n, err := m.claimAndAdvance(ctx)
	if err != nil {
		m.warn(ctx, err, "claim workflow instances")
		return false, false
	}
	if more = n == claimBatch; more {
		ns := make([]int, advanceParallel)
		errs := make([]error, advanceParallel)
		var wg sync.WaitGroup
		for i := range advanceParallel {
			wg.Go(func() { ns[i], errs[i] = m.claimAndAdvance(ctx) })
		}
		wg.Wait()
		more = false
		for i := range ns {
			if errs[i] != nil {
				m.warn(ctx, errs[i], "claim workflow instances")
				return false, false
			}
			more = more || ns[i] == claimBatch
		}
	}
	if !admit {
		return true, more
	}
	// Instances of workflows with max-active-instances start only while their workflow has a
	// free slot; the rest wait, and a finishing instance wakes the masters to look again.
	got, err := m.db.WorkflowClaimWaiting(ctx, m.cfg.ID, claimBatch)
	m.own(got, dirty)
	if err != nil {
		m.warn(ctx, err, "admit waiting workflow instances")
		return false, more
	}
	return true, more
}

func (m *Master) own(got []dao.WorkflowInstance, dirty map[int64]struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, wf := range got {
		m.owned[wf.ID] = struct{}{}
		if dirty != nil {
			dirty[wf.ID] = struct{}{}
		}
		m.cfg.Log.Info().Int64("workflow_instance", wf.ID).Str("workflow", wf.WorkflowName).Msg("claimed workflow instance")
	}
}

// advanceBatch is how many workflow instances one advance transaction takes: one statement
// locks them, one lists their tasks, one creates the new task instances and one finishes the
// instances that are done, whatever the batch's size. advanceParallel transactions run at once,
// on disjoint batches: most of a transaction's time is round trips, and the row locks keep
// two advances of one instance apart anyway.
const (
	advanceBatch    = 100
	advanceParallel = 2
)

// advanceRound advances up to advanceParallel batches of the dirty instances. Dirty instances
// this master does not own (a task of theirs ended while no master drove them, as happens to
// those that started with their root tasks) are locked by id and advanced in a batch of their
// own; those another master owns are left to it. It reports false when a batch failed
// (its instances stay dirty).
func (m *Master) advanceRound(ctx context.Context, dirty map[int64]struct{}) bool {
	if len(dirty) == 0 || !m.gate.Active() || ctx.Err() != nil {
		return true
	}
	var batches [][]int64
	var unowned []int64
	m.mu.Lock()
	ids := make([]int64, 0, advanceBatch)
	for id := range dirty {
		if _, mine := m.owned[id]; !mine {
			if len(unowned) < advanceBatch {
				delete(dirty, id)
				unowned = append(unowned, id)
			}
			continue
		}
		if len(batches) == advanceParallel {
			continue
		}
		delete(dirty, id)
		if ids = append(ids, id); len(ids) == advanceBatch {
			batches = append(batches, ids)
			ids = make([]int64, 0, advanceBatch)
		}
	}
	if len(ids) > 0 && len(batches) < advanceParallel {
		batches = append(batches, ids)
	}
	m.mu.Unlock()
	errs := make([]error, len(batches)+1)
	var wg sync.WaitGroup
	for i, b := range batches {
		wg.Go(func() { errs[i] = m.advance(ctx, b) })
	}
	if len(unowned) > 0 {
		slices.Sort(unowned)
		wg.Go(func() {
			_, errs[len(batches)] = m.advanceWith(ctx, nil, func(q *dao.Queries) ([]dao.WorkflowInstance, error) {
				return q.WorkflowLockUnowned(ctx, unowned)
			}, true)
		})
	}
	wg.Wait()
	ok := true
	for i, err := range errs {
		if err == nil {
			continue
		}
		ok = false
		m.warn(ctx, err, "advance workflow instances")
		// The database is likely down: the next wake-up or poll tries again.
		retry := unowned
		if i < len(batches) {
			retry = batches[i]
		}
		for _, id := range retry {
			dirty[id] = struct{}{}
		}
	}
	return ok
}

func (m *Master) forget(id int64) {
	m.mu.Lock()
	delete(m.owned, id)
	delete(m.deadlines, id)
	m.mu.Unlock()
}

// advance moves workflow instances forward in one transaction that holds their rows: a
// failover that releases one waits for it, and those this master no longer owns are left
// alone (and forgotten).
func (m *Master) advance(ctx context.Context, ids []int64) error {
	_, err := m.advanceWith(ctx, ids, func(q *dao.Queries) ([]dao.WorkflowInstance, error) {
		return q.WorkflowLockManyIfOwned(ctx, ids, m.cfg.ID)
	}, false)
	return err
}

// claimAndAdvance claims up to claimBatch unowned instances and advances them in the same
// transaction, which the claim's row locks already protect: a new instance's first tasks are
// queued by the statement after the one that claimed it. It returns how many it claimed.
func (m *Master) claimAndAdvance(ctx context.Context) (int, error) {
	got, err := m.advanceWith(ctx, nil, func(q *dao.Queries) ([]dao.WorkflowInstance, error) {
		return q.WorkflowClaimUnowned(ctx, m.cfg.ID, claimBatch)
	}, false)
	return len(got), err
}

// sweepOne takes one step of the sweep: of the next sweepSlice unowned running instances, it
// claims and advances those with no task left queued or running, whose last task's wake-up
// no master heard (see dao.WorkflowClaimStranded). It reports whether the step reached the
// last such instance (the next step starts over), and success.
func (m *Master) sweepOne(ctx context.Context) (done, ok bool) {
	from, upto := m.sweptTo, int64(0)
	var n int
	slice := m.cfg.SweepSlice
	if slice <= 0 {
		slice = sweepSlice
	}
	_, err := m.advanceWith(ctx, nil, func(q *dao.Queries) ([]dao.WorkflowInstance, error) {
		var err error
		if upto, n, err = q.WorkflowSweepRange(ctx, from, slice); err != nil || n == 0 {
			return nil, err
		}
		return q.WorkflowClaimStranded(ctx, m.cfg.ID, from, upto)
	}, false)
	if err != nil {
		m.warn(ctx, err, "sweep unowned workflow instances")
		return false, false
	}
	if n < slice {
		m.sweptTo = 0
		return true, true
	}
	m.sweptTo = upto
	return false, true
}

// advanceWith advances, in one transaction, the instances pick returns locked: those of ids
// still owned, or newly claimed ones (then ids is nil, and they are returned once committed),
// or, with take, unowned ones pick locked without claiming them: those that finish are
// finished in one update, and this master becomes the owner of the others.
func (m *Master) advanceWith(ctx context.Context, ids []int64, pick func(q *dao.Queries) ([]dao.WorkflowInstance, error), take bool) ([]dao.WorkflowInstance, error) {
	var finished []plan
	var finishedIDs, lost []int64
	var taken []dao.WorkflowInstance
	var wfs []dao.WorkflowInstance
	deadlines := map[int64]time.Time{}
	began := time.Now()
	err := m.db.Tx(ctx, func(q *dao.Queries) error {
		finished, finishedIDs, lost, taken = nil, nil, nil, nil
		clear(deadlines)
		var err error
		wfs, err = pick(q)
		if err != nil {
			return err
		}
		locked := make(map[int64]bool, len(wfs))
		var wfIDs []int64 // those that may have task instances: all but freshly claimed ones
		for _, wf := range wfs {
			locked[wf.ID] = true
			if !wf.Fresh {
				wfIDs = append(wfIDs, wf.ID)
			}
		}
		for _, id := range ids {
			if !locked[id] {
				lost = append(lost, id)
			}
		}
		var all []dao.TaskOutcome
		if len(wfIDs) > 0 {
			if all, err = q.TaskListByWorkflows(ctx, wfIDs); err != nil {
				return err
			}
		}
		tasksOf := make(map[int64][]dao.TaskOutcome, len(wfs))
		for _, t := range all {
			tasksOf[t.WorkflowInstanceID] = append(tasksOf[t.WorkflowInstanceID], t)
		}
		var rows []dao.NewTask
		var fins []dao.WorkflowFinish
		for i := range wfs {
			wf := &wfs[i]
			spec, err := m.spec(ctx, q, wf.WorkflowName, wf.WorkflowVersion)
			if err != nil {
				return err
			}
			// The database's clock decides, the one ended_at is set by: no skew between hosts.
			if d := time.Duration(spec.Timeout); d > 0 && wf.RunningMs != nil && time.Duration(*wf.RunningMs)*time.Millisecond < d {
				deadlines[wf.ID] = began.Add(d - time.Duration(*wf.RunningMs)*time.Millisecond)
			}
			if d := time.Duration(spec.Timeout); d > 0 && wf.RunningMs != nil && time.Duration(*wf.RunningMs)*time.Millisecond >= d {
				msg := "workflow timeout " + d.String() + " exceeded"
				if take {
					// Failed by its owner, as one it drove: it kills the tasks as well.
					if err := q.WorkflowTakeLocked(ctx, m.cfg.ID, []int64{wf.ID}); err != nil {
						return err
					}
				}
				stopping, err := q.WorkflowTimeOutIfOwned(ctx, wf.ID, m.cfg.ID, msg)
				if err != nil {
					return err
				}
				finished = append(finished, plan{done: true, state: dao.WorkflowFailed, err: fmt.Sprintf("%s; killing %d running tasks", msg, stopping)})
				finishedIDs = append(finishedIDs, wf.ID)
				continue
			}
			tasks := tasksOf[wf.ID]
			states := make(map[string]dao.TaskState, len(tasks))
			for _, t := range tasks {
				states[t.Name] = t.State
			}
			p := advance(spec, states)
			if len(p.create) > 0 {
				params, err := instanceParams(spec, wf.Params)
				if err != nil {
					return fmt.Errorf("workflow instance %d: %w", wf.ID, err)
				}
				for _, c := range p.create {
					row, err := taskRow(wf.ID, wf.Priority, c, params, tasks)
					if err != nil {
						return err
					}
					rows = append(rows, row)
				}
			}
			if p.done {
				fins = append(fins, dao.WorkflowFinish{ID: wf.ID, State: p.state, Error: p.err})
				finished = append(finished, p)
				finishedIDs = append(finishedIDs, wf.ID)
			} else if take {
				taken = append(taken, *wf)
			}
		}
		if _, err := q.TaskInsertMany(ctx, rows); err != nil {
			return err
		}
		// The rows are locked and running, unowned or under this owner, so every one of them
		// finishes.
		if _, err := q.WorkflowFinishManyIfOwned(ctx, m.cfg.ID, fins); err != nil {
			return err
		}
		takenIDs := make([]int64, len(taken))
		for i, wf := range taken {
			takenIDs[i] = wf.ID
		}
		return q.WorkflowTakeLocked(ctx, m.cfg.ID, takenIDs)
	})
	if err != nil {
		return nil, err
	}
	switch {
	case take:
		// Those it finished were never this master's to drive.
		m.own(taken, nil)
	case ids == nil:
		m.own(wfs, nil)
	}
	m.mu.Lock()
	maps.Copy(m.deadlines, deadlines)
	m.mu.Unlock()
	for _, id := range lost {
		m.cfg.Log.Info().Int64("workflow_instance", id).Msg("no longer the owner, or finished; stopped driving it")
		m.forget(id)
	}
	for i, id := range finishedIDs {
		m.forget(id)
		p := finished[i]
		ev := m.cfg.Log.Info()
		if p.state != dao.WorkflowSucceeded {
			ev = m.cfg.Log.Warn().Str("error", p.err)
		}
		ev.Int64("workflow_instance", id).Str("state", string(p.state)).Msg("workflow instance finished")
	}
	return wfs, nil
}

// spec returns a workflow definition, from the cache when it can.
func (m *Master) spec(ctx context.Context, q *dao.Queries, name string, version int) (*workflow.Spec, error) {
	k := specKey{name, version}
	m.mu.Lock()
	s, ok := m.specs[k]
	m.mu.Unlock()
	if ok {
		return s, nil
	}
	raw, err := q.DefinitionGet(ctx, name, version)
	if err != nil {
		return nil, err
	}
	s = new(workflow.Spec)
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("definition %s version %d: %w", name, version, err)
	}
	m.mu.Lock()
	m.specs[k] = s
	m.mu.Unlock()
	return s, nil
}

// taskRow is the task instance c of the workflow instance wfID (of priority wfPriority) whose
// params are params and whose task instances so far are tasks.
func taskRow(wfID int64, wfPriority int, c planned, params map[string]string, tasks []dao.TaskOutcome) (dao.NewTask, error) {
	raw, err := json.Marshal(workflow.TaskParams{Task: *c.task, Params: params, Upstream: upstream(c.task, tasks)})
	if err != nil {
		return dao.NewTask{}, err
	}
	return dao.NewTask{WorkflowInstanceID: wfID, Name: c.task.Name, Type: c.task.Type, Params: raw,
		State: c.state, Priority: c.task.Priority + wfPriority, Group: c.task.Group, Pool: c.task.Pool,
		MaxRetries: c.task.Retries, RetryInterval: time.Duration(c.task.RetryInterval),
		Timeout: time.Duration(c.task.Timeout)}, nil
}

// upstream returns the outputs of t's dependencies among the workflow instance's tasks,
// which are all finished when t is created: downstream tasks get them in their params.
func upstream(t *workflow.Task, tasks []dao.TaskOutcome) map[string]workflow.Upstream {
	if len(t.DependsOn) == 0 {
		return nil
	}
	out := make(map[string]workflow.Upstream, len(t.DependsOn))
	for _, ti := range tasks {
		if !slices.Contains(t.DependsOn, ti.Name) {
			continue
		}
		var u workflow.Upstream
		if ti.Output != nil {
			u.Output = *ti.Output
		}
		out[ti.Name] = u
	}
	return out
}

// instanceParams are the definition's default parameters overridden by the instance's.
func instanceParams(spec *workflow.Spec, raw json.RawMessage) (map[string]string, error) {
	params := maps.Clone(spec.Params)
	if params == nil {
		params = map[string]string{}
	}
	var given map[string]string
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &given); err != nil {
			return nil, fmt.Errorf("instance params: %w", err)
		}
	}
	maps.Copy(params, given)
	return params, nil
}

func (m *Master) warn(ctx context.Context, err error, what string) {
	if ctx.Err() != nil {
		return
	}
	m.cfg.Log.Warn().Err(err).Msg(what + " failed; retrying")
}
