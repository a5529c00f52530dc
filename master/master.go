// Package master drives workflow instances. What each step decides and writes is package
// lifecycle's (lifecycle.Driver, whose doc.go draws every state and who may change it); this
// package decides when to take a step: on wake-ups, on polls, and on a full resync after a
// reconnect. It does so in parts, each a Run(ctx) error that the node starts beside the
// others; those that drive instances act only while the gate (failover's "may I work now?")
// is Active:
//
//   - Master (master.go) claims the instances that need a master, advances the ones it owns
//     as their tasks end, admits waiting instances of capped workflows and of concurrency
//     keys, and enforces workflow timeouts. Its listener hears the wake-ups.
//   - Sweep (sweep.go) finds the unowned instances whose last task's wake-up nobody heard, a
//     slice every poll and a whole pass at start, after a reconnect and at every Rescan
//     wake-up the Master's listener passes on; its Master claims and advances them.
//   - WaitTimeouts (waits.go) ends the waiting tasks past their timeout, every poll.
//   - Deadlines (deadlines.go) queues the events of the workflow and task deadlines passed,
//     every poll.
//   - Scheduler (schedule.go) fires the cron schedules, while the gate is Active too;
//     Retention (retention.go) purges old history while the master leads; TraceExport
//     (trace.go) emits the spans of ended work.
//
// A submission (lifecycle.Submit) creates an instance with its root tasks already queued, so
// the first tasks start on the workers' wake-up: the instance runs without an owner until one
// of its tasks ends; that task's wake-up names it, and the master that hears it locks it by
// id, advances it, and finishes it in one update or becomes its owner if it goes on. A
// workflow of one task (without a cap, a concurrency key or a timeout) needs no master: the worker's statement
// that records the task's end ends the instance as well. The claim of unowned instances (on
// announcements and polls) takes only those that need a master whatever their tasks do: new
// ones without roots, and running ones whose workflow has a timeout, which their owner
// enforces. The Sweep takes those whose last task's wake-up nobody heard. Instances
// of workflows with max-active-instances wait for admission, which creates their roots; so do
// those with a concurrency key, admitted key by key in submit order: the end of one wakes the
// masters with its id, and the admission looks at its key alone.
//
// Retries and timeouts of tasks are decided where the attempt ends, by the worker, from the
// policy the master copied onto the task instance (max_retries, retry_interval, timeout). The
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
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/alarm"
	"github.com/zksched/zksched/internal/signal"
	"github.com/zksched/zksched/lifecycle"
)

// Gate says whether the node may act: it is registered in ZooKeeper and connected.
type Gate interface {
	Active() bool
	// Changed is closed at the next change of Active.
	Changed() <-chan struct{}
}

// Config configures a Master and its parts (Sweep, WaitTimeouts, Deadlines).
type Config struct {
	// ID is the node identity, host:port_startMillis; it is the owner of the instances.
	ID string
	// PollInterval is how often the master and its parts look again without a wake-up.
	PollInterval time.Duration
	// SweepSlice is how many unowned running instances a step of the sweep looks at; 0 is
	// sweepSlice.
	SweepSlice int
	Log        zerolog.Logger
	// Clock is the time source of the polls, of the claim of new instances and of the
	// second pass of the sweep; nil is the real clock. The workflow timeouts' deadlines are
	// on the real clock whatever this is (see markDue).
	Clock clockwork.Clock
}

// Master drives the workflow instances it owns.
type Master struct {
	cfg  Config
	db   *dao.DB
	gate Gate

	drive *lifecycle.Driver

	mu    sync.Mutex
	owned map[int64]struct{}
	// deadlines holds when each owned instance with a workflow timeout times out, on this
	// host's clock, from its age by the database's clock at its last advance.
	deadlines map[int64]time.Time

	// rescans passes the listener's Rescan wake-ups on to the Sweep: one not taken yet stands
	// for those after it.
	rescans chan struct{}
	// assets passes the wake-ups of new asset events on to the AssetFirer, as rescans does.
	assets chan struct{}

	// waiting and rescanned are test signals: Run signals waiting each time it has nothing
	// left to do and waits for a wake-up, a poll or a timer, and rescanned each time its
	// listener tells it to look at everything (once listening, and after a reconnection).
	waiting, rescanned signal.Test[struct{}]
}

// claimBatch is how many instances one claim statement takes. A round of the master's loop
// claims advanceParallel batches at most before it advances what it has: a backlog of new
// instances is worked through in rounds, not claimed whole before the first of them starts.
const claimBatch = 100

// New returns a Master.
func New(cfg Config, db *dao.DB, gate Gate) *Master {
	cfg = withClock(cfg)
	return &Master{cfg: cfg, db: db, gate: gate, drive: lifecycle.NewDriver(db, cfg.ID, cfg.Clock), owned: map[int64]struct{}{},
		deadlines: map[int64]time.Time{}, rescans: make(chan struct{}, 1),
		assets: make(chan struct{}, 1)}
}

// withClock returns cfg with the real clock if it has none.
func withClock(cfg Config) Config {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	return cfg
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
// instance. A wake-up is lost only with the listening connection or to an overflowing
// consumer, and both are followed by a full resync at once (Wakeup.Rescan); the periodic one is
// a backstop that costs a pass over every owned instance, so it is not run at every poll.
const fullResyncEvery = 10

// Run drives workflows until ctx ends. It acts on wake-ups (LISTEN/NOTIFY) and polls as a
// fallback: it claims the instances that need a master, admits the waiting ones of capped
// workflows and of concurrency keys, and advances those whose tasks ended. It passes its
// listener's Rescan wake-ups on to the Sweep.
func (m *Master) Run(ctx context.Context) error {
	wake := m.db.ListenMaster(m.cfg.Log)
	defer wake.Close()
	clock := m.cfg.Clock
	tick := clock.NewTicker(m.cfg.PollInterval)
	defer tick.Stop()
	a := &asked{keyed: map[int64]struct{}{}, dirty: map[int64]struct{}{}, newClaim: alarm.New(clock)}
	defer a.newClaim.Stop()
	a.everything()
	polls := 0
	note := func(w dao.Wakeup) { m.note(a, w) }
	for ctx.Err() == nil {
		busy := m.round(ctx, a)
		if !busy {
			m.waiting.Signal(struct{}{})
		}
		// Idle, the loop waits for the first thing to happen. Busy, it takes only what has
		// already arrived (now is ready at once), so the instances whose tasks just ended
		// are advanced in the next round, not behind the whole backlog.
		var now <-chan struct{}
		if busy {
			now = ready
		}
		select {
		case <-ctx.Done():
		case w := <-wake.C:
			note(w)
		case <-tick.Chan():
			a.claim, a.admit, a.allKeys = true, true, true
			if polls++; polls%fullResyncEvery == 0 {
				a.rescan = true
			}
			m.markDue(a.dirty)
		case <-m.gate.Changed():
			a.everything()
		case <-a.newClaim.C():
			a.newClaim.Fired()
			a.claim = true
		case <-now:
		}
		// Take every wake-up already waiting, so one advance covers them all.
		drain(wake.C, note)
	}
	return nil
}

// asked is what the wake-ups, polls and timers ask of the next round of Run's loop.
type asked struct {
	// rescan asks for a resync of the owned instances, claim for a claim of unowned ones, and
	// admit for a pass over the waiting instances of capped workflows as well as the claim.
	rescan, claim, admit bool
	// keyed holds the instances a wake-up named whose concurrency keys may have an instance to
	// admit; allKeys asks for a pass over every key with one (at polls: it finds what a lost
	// wake-up left waiting).
	keyed   map[int64]struct{}
	allKeys bool
	// dirty holds the instances to advance.
	dirty map[int64]struct{}
	// newClaim fires the claim of new instances, newClaimDelay after the first announced:
	// they started with their root tasks queued, so nothing waits for the master, and the
	// instances submitted meanwhile are claimed in one statement instead of one each.
	newClaim *alarm.Alarm
}

// everything is what the start, a change of the gate and a Rescan wake-up ask for.
func (a *asked) everything() { a.rescan, a.claim, a.admit, a.allKeys = true, true, true, true }

// note adds what wake-up w asks for to a. A Rescan is passed on to the Sweep.
func (m *Master) note(a *asked, w dao.Wakeup) {
	switch {
	case w.Rescan:
		a.everything()
		select {
		case m.rescans <- struct{}{}:
		default:
		}
		m.rescanned.Signal(struct{}{})
	case strings.HasPrefix(w.Payload, dao.WakeupKeys):
		ids, _ := dao.ParseWakeupKeys(w.Payload)
		for _, id := range ids {
			a.keyed[id] = struct{}{}
		}
	case w.Payload == "":
		a.claim, a.admit = true, true
	case w.Payload == dao.WakeupAssets:
		select {
		case m.assets <- struct{}{}:
		default:
		}
	case w.Payload == dao.WakeupNew:
		if !a.newClaim.Armed() && !a.claim {
			a.newClaim.Set(newClaimDelay)
		}
	default:
		// A list of workflow instance ids: a worker's batch of results wakes once.
		for f := range strings.SplitSeq(w.Payload, ",") {
			if id, err := strconv.ParseInt(f, 10, 64); err == nil {
				a.dirty[id] = struct{}{}
			}
		}
	}
}

// round does what a asks, while the gate is Active: resync, claim, admissions, advances. It
// reports whether the master is busy: there is more to do at once.
func (m *Master) round(ctx context.Context, a *asked) (busy bool) {
	if !m.gate.Active() {
		return false
	}
	if a.rescan {
		a.rescan = !m.resync(ctx, a.dirty)
	}
	if a.claim {
		// A failed claim waits for the next wake-up or poll, as a failed round does: with the
		// database away, retrying at once would spin.
		var ok bool
		ok, a.claim = m.claim(ctx, a.dirty, a.admit)
		a.admit = a.admit && !ok
		a.newClaim.Stop()
	}
	if len(a.keyed) > 0 || a.allKeys {
		// A failed admission waits for the next poll's pass, as a failed claim does.
		a.allKeys = m.admitKeys(ctx, a.keyed, a.allKeys, a.dirty)
	}
	advanced := m.advanceRound(ctx, a.dirty)
	return (advanced && len(a.dirty) > 0) || a.claim || len(a.keyed) > 0
}

// ready is a channel a receive from never waits on.
var ready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

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

// everyPoll runs look at start and at every poll while gate is Active, and again at once while
// it reports that more may be due; a look due while the gate is not Active is taken at the
// gate's next change. A failed look reports nothing more due: it waits for the next poll. It
// signals waiting each time it waits, and returns when ctx ends.
func everyPoll(ctx context.Context, cfg Config, gate Gate, look func(context.Context) bool, waiting *signal.Test[struct{}]) {
	tick := cfg.Clock.NewTicker(cfg.PollInterval)
	defer tick.Stop()
	due := true
	for ctx.Err() == nil {
		active := gate.Active()
		if active && due {
			due = look(ctx)
		}
		var now <-chan struct{}
		if active && due {
			now = ready
		} else {
			waiting.Signal(struct{}{})
		}
		select {
		case <-ctx.Done():
		case <-tick.Chan():
			due = true
		case <-gate.Changed():
		case <-now:
		}
	}
}

// markDue marks the owned instances whose workflow timeout has passed, by the deadline their
// last advance computed from the database's clock. Those deadlines are times of the real
// clock (lifecycle.Driver computes them from time.Now), so they are compared with the real
// clock, not with Config.Clock.
func (m *Master) markDue(dirty map[int64]struct{}) {
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, at := range m.deadlines {
		if !now.Before(at) {
			dirty[id] = struct{}{}
		}
	}
}

// resync marks every instance the master owns as dirty, which also picks up changes whose
// wake-up was lost. It reports success.
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
	got, err := m.drive.Admit(ctx, claimBatch)
	m.own(got, dirty)
	if err != nil {
		m.warn(ctx, err, "admit waiting workflow instances")
		return false, more
	}
	return true, more
}

// admitKeys admits the waiting instances of the concurrency keys of up to claimBatch of the
// instances in keyed (and drops those from it), then, with all, those of every key that has
// one to admit. It reports whether the pass over every key is still to do: a round takes
// claimBatch wake-ups' keys at most, so a burst of them does not hold up the advances. A
// failed admission drops what it was given; the next poll's pass finds it.
func (m *Master) admitKeys(ctx context.Context, keyed map[int64]struct{}, all bool, dirty map[int64]struct{}) bool {
	if len(keyed) > 0 {
		ids := make([]int64, 0, min(len(keyed), claimBatch))
		for id := range keyed {
			if len(ids) == claimBatch {
				break
			}
			ids = append(ids, id)
			delete(keyed, id)
		}
		got, err := m.drive.AdmitKeys(ctx, ids, claimBatch)
		m.own(got, dirty)
		if err != nil {
			m.warn(ctx, err, "admit waiting workflow instances of concurrency keys")
			return false
		}
		if len(keyed) > 0 {
			return all
		}
	}
	if !all {
		return false
	}
	got, err := m.drive.AdmitKeys(ctx, nil, claimBatch)
	m.own(got, dirty)
	// The claim of the same poll has said the database is away; this says it at debug.
	if err != nil && ctx.Err() == nil {
		m.cfg.Log.Debug().Err(err).Msg("could not admit the waiting instances of concurrency keys; trying again at the next poll")
	}
	return false
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
			var st lifecycle.Stepped
			if st, errs[len(batches)] = m.drive.AdvanceUnowned(ctx, unowned); errs[len(batches)] == nil {
				m.record(st, false)
			}
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
	st, err := m.drive.AdvanceOwned(ctx, ids)
	if err != nil {
		return err
	}
	m.record(st, false)
	return nil
}

// claimAndAdvance claims up to claimBatch unowned instances and advances them in the same
// transaction, which the claim's row locks already protect: a new instance's first tasks are
// queued by the statement after the one that claimed it. It returns how many it claimed.
func (m *Master) claimAndAdvance(ctx context.Context) (int, error) {
	st, err := m.drive.ClaimAndAdvance(ctx, claimBatch)
	if err != nil {
		return 0, err
	}
	m.record(st, true)
	return len(st.Locked), nil
}

// record notes what a committed step did: the instances it claimed (claimed) or took are
// this master's to drive now, those it finished or lost are not.
func (m *Master) record(st lifecycle.Stepped, claimed bool) {
	switch {
	case st.Taken != nil:
		// Those it finished were never this master's to drive.
		m.own(st.Taken, nil)
	case claimed:
		m.own(st.Locked, nil)
	}
	m.mu.Lock()
	maps.Copy(m.deadlines, st.Deadlines)
	m.mu.Unlock()
	for _, id := range st.Lost {
		m.cfg.Log.Info().Int64("workflow_instance", id).Msg("no longer the owner, or finished; stopped driving it")
		m.forget(id)
	}
	for _, id := range st.Released {
		m.cfg.Log.Debug().Int64("workflow_instance", id).Msg("only waiting; released until a wait ends")
		m.forget(id)
	}
	if st.RunWaitErr != nil {
		m.cfg.Log.Warn().Err(st.RunWaitErr).Msg("could not look whether the runs new workflow sensors wait for ended; the next poll looks")
	}
	for _, e := range st.Ended {
		m.forget(e.ID)
		ev := m.cfg.Log.Info()
		if e.State != dao.WorkflowSucceeded {
			ev = m.cfg.Log.Warn().Str("error", e.Error)
		}
		ev.Int64("workflow_instance", e.ID).Str("state", string(e.State)).Msg("workflow instance finished")
	}
}

func (m *Master) warn(ctx context.Context, err error, what string) {
	if ctx.Err() != nil {
		return
	}
	m.cfg.Log.Warn().Err(err).Msg(what + " failed; retrying")
}
