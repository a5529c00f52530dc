// Package worker claims queued task instances of its groups up to its slots, runs each
// attempt through an executor, streams its log and reports how it ended, every write under
// the attempt's fencing token. On shutdown it stops claiming, lets running attempts finish
// for the shutdown timeout and hands the rest back to the queue.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/alarm"
	"github.com/zksched/zksched/internal/retry"
	"github.com/zksched/zksched/internal/signal"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/tracing"
	"github.com/zksched/zksched/worker/executor"
	"github.com/zksched/zksched/workflow"
)

// Gate says whether the node may take new work: it is registered in ZooKeeper and connected.
type Gate interface {
	Active() bool
	// Changed is closed at the next change of Active.
	Changed() <-chan struct{}
}

// Config configures a Worker.
type Config struct {
	// ID is the node identity, host:port_startMillis; it is the worker_id of the tokens.
	ID     string
	Groups []string
	// Slots is how many attempts run at once. An attempt whose run has ended gives its slot
	// back while its result is recorded (in a batch, see completer), so the next claim does
	// not wait for that write; a worker holds at most 2 × Slots attempts, running or
	// recording, so a slow database stops its claims.
	Slots int
	// PollInterval is how often the worker looks for tasks without a wake-up.
	PollInterval time.Duration
	// ShutdownTimeout is how long running attempts may go on after shutdown begins.
	ShutdownTimeout time.Duration
	// LogLimit is the number of log bytes kept per attempt.
	LogLimit int
	Log      zerolog.Logger
	// Events, if set, is told of claims and results, for the node's metrics.
	Events Events
	// Secrets are values replaced by *** wherever the worker stores what a task printed or
	// returned: its log, output and error, an agent's checkpoints (conf.Config.SecretValues).
	// Values shorter than 6 bytes are not masked (see minSecretLen).
	Secrets []string
	// Peers, if set, lists the other live workers that serve all of Groups (the registry's
	// registry.Peers): while they have free slots, a claim takes no more than this worker's
	// share of a burst of tasks (dao.Share), so that the burst spreads over the idle workers
	// instead of running on the first to look. Nil: the worker claims as if alone.
	Peers Peers
	// SpreadWait is how long the worker leaves its peers their shares (conf's
	// worker.spread-wait): a task that has waited longer is anyone's, and a claim that left
	// tasks behind looks again once that long has passed, to take what nobody came for (its
	// worker died, or the tasks of a peer ended before the last share was reckoned). 0 turns
	// the spread off.
	SpreadWait time.Duration
	// Clock is the time source of the polls, the claim's gathering of freed slots, the
	// tasks' timeouts, the retries of result and checkpoint writes, the log's flushes and
	// the shutdown's waits; nil is the real clock.
	Clock clockwork.Clock
	// Tracer, unless nil (tracing off), gets a span for every attempt of a traced instance,
	// which it ends once the attempt's result is recorded.
	Tracer *tracing.Tracer
	// OutputLimit is the output limit of a task that names no output-limit (conf's
	// worker.output-limit); 0 is workflow.DefaultOutputLimit.
	OutputLimit int
	// OutputLimitMax is the most a task's output-limit may ask for (worker.output-limit-max):
	// a task that asks more fails without running. 0 is workflow.MaxOutputLimit.
	OutputLimitMax int
}

// Peers lists the other live workers that serve all the groups this one serves.
type Peers interface {
	// Slots returns their slots by worker id. The caller does not change the map.
	Slots() map[string]int
}

// Events receives what the worker does, for metrics. Its methods must return quickly.
type Events interface {
	// Claimed is called for each task instance the worker claimed.
	Claimed(t *dao.TaskInstance)
	// Ended is called when an attempt's result was recorded, or refused because the task was
	// taken from the attempt (refused).
	Ended(outcome dao.Outcome, refused bool)
	// AssetsProduced is called with the number of asset events an attempt's recorded success
	// wrote (its task's produces).
	AssetsProduced(n int)
}

// Worker runs task attempts.
type Worker struct {
	cfg   Config
	db    *dao.DB
	gate  Gate
	execs executor.Set
	mask  *masker

	mu sync.Mutex
	// running holds every attempt from its claim until its result is recorded, by its token:
	// the same task can be here twice, when this worker claims it again (a retry without an
	// interval, a hand-back) before the earlier attempt's goroutine has ended. recording
	// counts those of them whose run has ended.
	running   map[attemptKey]*attempt
	recording int
	wg        sync.WaitGroup
	freed     chan struct{}
	done      *completer
	// hardStop ends the retries of result reports once shutdown has given up on them.
	hardStop chan struct{}
	// unpooled says the database knew no task pool at the last look, poolsSeen that it knew
	// one (then it always will). leftToPeers says the last claim took less than it asked
	// for beside peers: it may have left tasks for them. All belong to the claim loop's
	// goroutine.
	unpooled, poolsSeen, leftToPeers bool

	// polled is a test signal: the claim loop signals it once it has handled a poll
	// (reconcile included).
	polled signal.Test[struct{}]
}

// attemptKey identifies an attempt of this worker: its task and attempt number (the worker id
// of the token is this worker's).
type attemptKey struct {
	task    int64
	attempt int
}

type attempt struct {
	task   dao.TaskInstance
	cancel context.CancelCauseFunc
	// traceparent is the trace context of the task's instance; "" when it has none or
	// tracing is off.
	traceparent string
	// killing is set once an operator's kill request has stopped the attempt (under Worker.mu).
	killing bool
	// recording is set once the attempt's run has ended and its result is being recorded
	// (under Worker.mu): it holds no slot any more.
	recording bool
}

// New returns a Worker.
func New(cfg Config, db *dao.DB, gate Gate, execs executor.Set) *Worker {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = workflow.DefaultOutputLimit
	}
	if cfg.OutputLimitMax <= 0 {
		cfg.OutputLimitMax = workflow.MaxOutputLimit
	}
	for _, s := range cfg.Secrets {
		if s != "" && len(s) < minSecretLen {
			cfg.Log.Warn().Int("length", len(s)).Int("min_length", minSecretLen).
				Msg("a secret (the database password?) is too short to be masked in what is stored of tasks; use a longer one")
		}
	}
	return &Worker{cfg: cfg, db: db, gate: gate, execs: execs, mask: newMasker(cfg.Secrets), running: map[attemptKey]*attempt{},
		freed: make(chan struct{}, 1), done: newCompleter(db, max(cfg.Slots, 1)), hardStop: make(chan struct{})}
}

// Running returns the number of attempts running now: the slots in use.
func (w *Worker) Running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running) - w.recording
}

// Recording returns the number of attempts whose run has ended and whose result is being
// recorded.
func (w *Worker) Recording() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recording
}

// Run claims and runs tasks until ctx is cancelled, then shuts down: no new claims, running
// attempts get ShutdownTimeout to finish, the rest are stopped and handed back. It returns
// when every attempt has been reported.
func (w *Worker) Run(ctx context.Context) error {
	// The completer outlives the claim loop: shutdown returns once every attempt has been
	// reported, and only then does it stop.
	completerCtx, stopCompleter := context.WithCancel(context.WithoutCancel(ctx))
	var completer errgroup.Group
	completer.Go(func() error { return w.done.Run(completerCtx) })
	defer func() { stopCompleter(); completer.Wait() }()
	tasks, kills := w.db.ListenWorker(w.cfg.Log)
	defer tasks.Close()
	defer kills.Close()
	clock := w.cfg.Clock
	tick := clock.NewTicker(w.cfg.PollInterval)
	defer tick.Stop()
	checkKills := false
	// look asks for a claim. backlog says the last one may have left claimable tasks behind
	// (it filled every slot), so a freed slot claims again; after a claim that found fewer
	// than it asked for (the queue's end, or this worker's share of a burst, the rest left to
	// its peers: see relook), a freed slot waits for a wake-up or the poll instead of asking
	// the database again for nothing.
	look, backlog := true, true
	// gather holds back the claim of a freed slot while tasks are waiting (backlog): slots
	// free up in bursts (a claimed batch of short tasks ends nearly at once), and claiming
	// them one by one, a statement each, costs the database several times what one claim of
	// the burst does. The claim goes when half the slots are free, or once no result is
	// waiting to be recorded (the burst's results are written; the worker would otherwise
	// wait for nothing), looking every claimGather, and at the latest claimGatherMax after
	// the first slot was freed (gatherSince). It is armed while a gathering is under way.
	gather := alarm.New(clock)
	defer gather.Stop()
	var gatherSince time.Time
	// relook is armed by a claim that may have left tasks to its peers, for SpreadWait from
	// then: the look it makes (relooking) takes whatever they did not come for, and arms
	// nothing itself, so an idle worker does not look again and again.
	relook := alarm.New(clock)
	defer relook.Stop()
	relooking := false
	w.lookForPools(ctx)
	for ctx.Err() == nil {
		if look && w.gate.Active() {
			backlog = w.claim(ctx)
			if w.leftToPeers && !relooking {
				relook.Set(w.cfg.SpreadWait)
			}
			look, relooking = false, false
			gather.Stop()
		}
		if checkKills {
			w.stopKilled(ctx)
			checkKills = false
		}
		select {
		case <-ctx.Done():
		case <-tasks.C:
			look = true
		case k := <-kills.C:
			checkKills = k.Rescan || k.Payload == w.cfg.ID
		case <-tick.Chan():
			// The poll also covers kill requests whose wake-up was lost.
			look, checkKills = true, true
			w.reconcile(ctx)
			w.lookForPools(ctx)
			w.polled.Signal(struct{}{})
		case <-w.freed:
			switch {
			case !backlog || look:
			case w.halfFree():
				look = true
			case !gather.Armed():
				gather.Set(claimGather)
				gatherSince = clock.Now()
			}
		case <-gather.C():
			gather.Fired()
			if w.halfFree() || w.done.waiting.Load() == 0 || clock.Since(gatherSince) >= claimGatherMax {
				look = true
			} else {
				gather.Set(claimGather)
			}
		case <-relook.C():
			relook.Fired()
			look, relooking = true, true
		case <-w.gate.Changed():
			look = true
		}
	}
	return w.shutdown()
}

// reconcile hands back tasks the database says run here but that this worker never started:
// a claim committed whose reply was lost. Without it they would stay running under a live
// worker's name, where no failover ever looks. It runs in the claim loop's goroutine, so
// every claim it could race with has already registered its attempts.
func (w *Worker) reconcile(ctx context.Context) {
	toks, err := w.db.TaskListRunningOnWorker(ctx, w.cfg.ID)
	if err != nil {
		return // the next tick tries again
	}
	for _, tok := range toks {
		w.mu.Lock()
		_, ok := w.running[attemptKey{tok.TaskID, tok.Attempt}]
		w.mu.Unlock()
		if ok {
			continue
		}
		err := lifecycle.HandBack(ctx, w.db, tok, "claimed by this worker but never started (the claim's reply was lost)")
		if errors.Is(err, dao.ErrTokenRefused) {
			// The attempt ended (and left running) between the listing and the look at
			// w.running: it was one of ours after all, and its result is recorded.
			continue
		}
		w.cfg.Log.Warn().Err(err).Int64("task_instance", tok.TaskID).Int("attempt", tok.Attempt).
			Msg("handed back a task claimed for this worker that it never started")
	}
}

// lookForPools sets w.unpooled while the database knows no task pool, so claims leave the
// pools out (dao.TaskClaimQueuedUnpooled); the poll looks again, so the first task ever to name a
// pool waits a poll interval at most. A failed look claims with pools, which is always right.
func (w *Worker) lookForPools(ctx context.Context) {
	if w.poolsSeen {
		return
	}
	exist, err := w.db.TaskPoolsExist(ctx)
	w.unpooled = err == nil && !exist
	w.poolsSeen = err == nil && exist
}

// claimGather and claimGatherMax bound how long a freed slot waits for others before it
// claims, while tasks wait (see Run).
const (
	claimGather    = 2 * time.Millisecond
	claimGatherMax = 20 * time.Millisecond
)

// free returns how many attempts may be claimed: slots not running one, as long as the worker
// holds no more than 2 × Slots attempts (see Config.Slots).
func (w *Worker) free() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return min(w.cfg.Slots-(len(w.running)-w.recording), 2*w.cfg.Slots-len(w.running))
}

// ran marks a's run as ended: its slot is free while its result is recorded, so a worker's
// claims do not wait for its own writes (a slot stands for an attempt running); the bound of
// 2 × Slots attempts held (see free) still stops the claims when the writes fall behind.
func (w *Worker) ran(a *attempt) {
	w.mu.Lock()
	a.recording = true
	w.recording++
	w.mu.Unlock()
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

// halfFree says whether half the slots or more are free: enough to claim at once in a backlog.
func (w *Worker) halfFree() bool { return 2*w.free() >= w.cfg.Slots }

// claim claims tasks while half the slots or more are free and the queue gives them. It
// reports whether claimable tasks may be left: its last claim got all it asked for.
func (w *Worker) claim(ctx context.Context) (backlog bool) {
	w.leftToPeers = false
	for {
		free := w.free()
		if free <= 0 {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		share := w.share()
		got, err := lifecycle.ClaimShare(ctx, w.db, w.cfg.ID, w.cfg.Groups, min(free, 100), !w.unpooled, share)
		if err != nil {
			if ctx.Err() == nil {
				w.cfg.Log.Warn().Err(err).Msg("claim failed; retrying at the next poll")
			}
			return false
		}
		var unstarted []dao.TaskInstance
		var traces map[int64]string
		if w.cfg.Tracer != nil {
			traces = w.traceparents(ctx, got)
		}
		for i := range got {
			if w.cfg.Events != nil {
				w.cfg.Events.Claimed(&got[i])
			}
			if !w.start(got[i], traces[got[i].WorkflowInstanceID]) {
				unstarted = append(unstarted, got[i])
			}
		}
		if len(unstarted) > 0 {
			// The node stopped being live while the claim was in flight (its deadline passed
			// during a wait on a lock, a slow database, a freeze): the leader may already have
			// given these tasks to others, or is about to. They were never started.
			w.handBack(unstarted)
			return false
		}
		if len(got) < min(free, 100) {
			w.leftToPeers = len(share.Peers) > 0
			return false
		}
		if !w.halfFree() {
			// The slots freed meanwhile are claimed with those that follow (see claimGather).
			return true
		}
	}
}

// share is what a claim needs to take no more than this worker's share of a burst: its peers
// now, its slots, and SpreadWait as the time a task stays part of a burst.
func (w *Worker) share() dao.Share {
	if w.cfg.Peers == nil || w.cfg.SpreadWait <= 0 {
		return dao.Share{}
	}
	return dao.Share{Slots: w.cfg.Slots, Peers: w.cfg.Peers.Slots(), Fresh: w.cfg.SpreadWait}
}

// traceparents returns the trace contexts of the instances of tasks, by instance. A failed
// read runs them untraced: tracing never holds up a task.
func (w *Worker) traceparents(ctx context.Context, tasks []dao.TaskInstance) map[int64]string {
	if len(tasks) == 0 {
		return nil
	}
	ids := make([]int64, len(tasks))
	for i := range tasks {
		ids[i] = tasks[i].WorkflowInstanceID
	}
	tps, err := w.db.WorkflowTraceparentsOf(ctx, ids)
	if err != nil {
		w.cfg.Log.Warn().Err(err).Int("tasks", len(tasks)).Msg("tracing: claimed tasks run without their trace")
	}
	return tps
}

// start runs a claimed attempt of an instance whose trace is traceparent ("" for none),
// unless the node may not take work now (see Gate): it reports whether it started it. The
// gate is asked under w.mu, which Interrupt holds while it stops the running attempts, so an
// attempt is either refused here or stopped by the next Interrupt.
func (w *Worker) start(t dao.TaskInstance, traceparent string) bool {
	// The params are read here, on the claim loop's goroutine, whose stack has grown once for
	// good: read on each attempt's new goroutine, the decoder's depth made the runtime grow
	// (copy) that goroutine's stack at every task.
	var params workflow.TaskParams
	paramsErr := json.Unmarshal(t.Params, &params)
	ctx, cancel := context.WithCancelCause(context.Background())
	a := &attempt{task: t, cancel: cancel, traceparent: traceparent}
	key := attemptKey{t.ID, t.Attempt}
	w.mu.Lock()
	if !w.gate.Active() {
		w.mu.Unlock()
		cancel(nil)
		return false
	}
	w.running[key] = a
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			cancel(nil)
			w.mu.Lock()
			delete(w.running, key)
			if a.recording {
				w.recording--
			}
			w.mu.Unlock()
			select {
			case w.freed <- struct{}{}:
			default:
			}
		}()
		w.execute(ctx, a, &params, paramsErr)
	}()
	return true
}

// handBack returns claimed tasks that were never started to the queue under their own tokens
// (outcome interrupted, not counted as a retry). A task it cannot hand back now stays running
// under this worker's name: reconcile hands it back at a later poll, or the leader fails it
// over with the worker.
func (w *Worker) handBack(tasks []dao.TaskInstance) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range tasks {
		err := lifecycle.HandBack(ctx, w.db, tasks[i].Token(), "claimed as the worker stopped being live (cut off from zookeeper); never started")
		w.cfg.Log.Warn().Err(err).Int64("task_instance", tasks[i].ID).Int("attempt", tasks[i].Attempt).
			Msg("handed back a claimed task without starting it: the worker is not live")
	}
}

// execute runs an attempt with its task's params, or fails it with paramsErr, the error of
// reading them.
func (w *Worker) execute(ctx context.Context, a *attempt, params *workflow.TaskParams, paramsErr error) {
	t := &a.task
	tok := t.Token()
	log := w.cfg.Log.With().Int64("task_instance", t.ID).Int64("workflow_instance", t.WorkflowInstanceID).
		Int("attempt", t.Attempt).Str("task", t.Name).Logger()
	log.Info().Str("type", t.Type).Msg("claimed")
	var span *tracing.Attempt
	var traceparent string // the attempt's own, for a shell task
	if a.traceparent != "" {
		ctx, span = w.cfg.Tracer.StartAttempt(ctx, a.traceparent, tracing.AttemptInfo{WorkflowInstance: t.WorkflowInstanceID,
			Task: t.ID, Name: t.Name, Type: t.Type, Attempt: t.Attempt, Worker: w.cfg.ID}, time.Now())
		traceparent = tracing.Traceparent(ctx)
	}

	var res executor.Result
	exec, err := w.execs.For(t.Type)
	if err == nil && paramsErr != nil {
		err = fmt.Errorf("read task params: %w", paramsErr)
	}
	outputLimit := w.cfg.OutputLimit
	if err == nil && params.Task.OutputLimit > 0 {
		outputLimit = params.Task.OutputLimit
		if outputLimit > w.cfg.OutputLimitMax {
			err = fmt.Errorf("output-limit %s is over this worker's worker.output-limit-max of %s",
				workflow.FormatBytes(outputLimit), workflow.FormatBytes(w.cfg.OutputLimitMax))
		}
	}
	switch {
	case err != nil:
		res.Err = err
	case ctx.Err() != nil:
		// Stopped between its claim and here (an Interrupt, a shutdown): nothing ran.
		res.Stopped = true
	default:
		// A sensor's timeout bounds all its checks, from its first: its executor judges it.
		if d := t.Timeout(); d > 0 && t.Type != workflow.TypeSensor {
			timer := w.cfg.Clock.AfterFunc(d, func() { a.cancel(errTimedOut) })
			defer timer.Stop()
		}
		sink := newLogSink(w.db, tok, w.cfg.LogLimit, w.cfg.Clock, func() { a.cancel(errRefused) })
		logw := w.mask.writer(sink)
		cps := &checkpoints{db: w.db, tok: tok, refused: func() { a.cancel(errRefused) }, hardStop: w.hardStop, mask: w.mask,
			clock: w.cfg.Clock}
		task := executor.Task{ID: t.ID, WorkflowInstanceID: t.WorkflowInstanceID, Attempt: t.Attempt,
			WorkerID: w.cfg.ID, Traceparent: traceparent, Spec: params.Task, Params: params.Params, Upstream: params.Upstream, Item: params.Item, Assets: params.Assets,
			Checkpoints: cps, Loop: loopStore{cps}, Children: toolChildren{cps}, OutputLimit: outputLimit}
		res = executor.LimitOutput(task, exec.Run(ctx, task, logw))
		_ = logw.Close()
		sink.Close()
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, errRefused) {
		log.Warn().Msg("the task was taken from this attempt; its result is not recorded")
		return
	}
	var policy *workflow.RetryPolicy
	if paramsErr == nil {
		policy = params.Task.RetryPolicy()
	}
	r := decide(t, policy, cause, res, rand.Float64)
	if paramsErr == nil {
		r.Produces = params.Task.Produces
	}
	w.mask.result(&r)
	w.ran(a)
	w.report(log, tok, r, span)
}

// report writes an attempt's result, retrying while the database is unreachable: a result is
// never dropped while the worker lives. A refused token ends it: the task is someone else's,
// unless an earlier try failed without knowing whether it committed (a connection lost
// mid-commit, a PostgreSQL switchover) and the attempt's row shows that try's outcome: then the
// result was recorded once, by that try. The attempt's span, unless nil, ends once the result
// is recorded; a refused one is closed by whoever took the task, who emits its span (the
// leader's failover).
func (w *Worker) report(log zerolog.Logger, tok dao.Token, r dao.AttemptResult, span *tracing.Attempt) {
	backoff := dbRetry.Backoff()
	uncertain, lostAnswer := false, false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		wf, err := w.done.finish(ctx, tok, r)
		if errors.Is(err, dao.ErrTokenRefused) && uncertain {
			o, rerr := w.db.AttemptOutcome(ctx, tok)
			switch {
			case rerr != nil:
				// Unknown again: try the finish once more; it is refused again, or applied.
				err = rerr
			case o != nil && *o == r.Outcome:
				err, lostAnswer = nil, true
			}
		}
		cancel()
		if err != nil && !errors.Is(err, dao.ErrTokenRefused) {
			uncertain = true
		}
		if w.cfg.Events != nil && (err == nil || errors.Is(err, dao.ErrTokenRefused)) {
			w.cfg.Events.Ended(r.Outcome, err != nil)
			if err == nil && r.Next == dao.TaskSucceeded && len(r.Produces) > 0 {
				w.cfg.Events.AssetsProduced(len(r.Produces))
			}
		}
		if err == nil || lostAnswer {
			w.resumeIfChildEnded(tok, r, log)
		}
		if lostAnswer {
			span.End(string(r.Outcome), r.ExitCode, r.Error, time.Now())
			log.Info().Str("outcome", string(r.Outcome)).Str("next", string(r.Next)).
				Msg("attempt ended: its result was recorded by a try whose answer was lost")
			return
		}
		switch {
		case err == nil:
			span.End(string(r.Outcome), r.ExitCode, r.Error, time.Now())
			ev := log.Info()
			switch r.Outcome {
			case dao.OutcomeSucceeded:
			case dao.OutcomePaused:
				ev = ev.Str("paused_step", r.PausedStep)
			default:
				ev = log.Warn().Str("error", r.Error)
			}
			ev.Str("outcome", string(r.Outcome)).Str("next", string(r.Next)).Msg("attempt ended")
			if wf != "" {
				// Its only task: the statement that recorded the end ended the instance too.
				ev := log.Info()
				if wf != dao.WorkflowSucceeded {
					ev = log.Warn()
				}
				ev.Str("state", string(wf)).Msg("workflow instance finished with its only task")
			}
			return
		case errors.Is(err, dao.ErrTokenRefused):
			log.Warn().Str("outcome", string(r.Outcome)).Msg("result refused: the task was taken from this attempt")
			return
		}
		wait := backoff.Next()
		log.Warn().Err(err).Dur("retry_in", wait).Msg("could not record the attempt's result; retrying")
		if retry.Sleep(context.Background(), w.cfg.Clock, wait, w.hardStop) != nil {
			log.Error().Err(err).Msg("giving up on recording the result at exit; the task will be failed over")
			return
		}
	}
}

// resumeIfChildEnded queues the task of attempt tok again if r paused it for the child of a
// workflow tool's call and that child ended meanwhile: its end, written while the task still
// ran, found no waiting task to resume. A look that fails is left to the masters' next poll.
func (w *Worker) resumeIfChildEnded(tok dao.Token, r dao.AttemptResult, log zerolog.Logger) {
	if r.Outcome != dao.OutcomePaused || !strings.HasPrefix(r.PausedStep, "tool-child:") {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := w.db.TaskResumeIfToolChildEnded(ctx, tok.TaskID, 1)
	switch {
	case err != nil:
		log.Warn().Err(err).Msg("could not look whether the tool's child ended while the task paused; the masters will")
	case n > 0:
		log.Info().Msg("the tool's child ended while the task paused: queued again")
	}
}

// stopKilled stops the running attempts an operator asked to kill (kill_requested): each ends
// with outcome killed and its task in state killed, without a retry.
func (w *Worker) stopKilled(ctx context.Context) {
	if w.Running() == 0 {
		return
	}
	toks, err := w.db.TaskListKillRequested(ctx, w.cfg.ID)
	if err != nil {
		if ctx.Err() == nil {
			w.cfg.Log.Warn().Err(err).Msg("reading kill requests failed; retrying at the next poll")
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, tok := range toks {
		if a, ok := w.running[attemptKey{tok.TaskID, tok.Attempt}]; ok && !a.killing {
			a.killing = true
			w.cfg.Log.Info().Int64("task_instance", tok.TaskID).Int64("workflow_instance", a.task.WorkflowInstanceID).
				Int("attempt", tok.Attempt).Msg("kill requested: stopping the attempt")
			a.cancel(errKilled)
		}
	}
}

// Interrupt stops every running attempt at once and hands its task back to the queue under
// the attempt's own token (outcome interrupted, not counted as a retry). The node guard calls
// it when the worker has been cut off from ZooKeeper for the session timeout: by the time the
// leader may fail the worker over, its tasks have stopped.
func (w *Worker) Interrupt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.running {
		a.cancel(errInterrupted)
	}
}

func (w *Worker) shutdown() error {
	n := w.Running()
	w.cfg.Log.Info().Int("running", n).Dur("shutdown_timeout", w.cfg.ShutdownTimeout).
		Msg("shutting down: no new claims; running tasks may finish")
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	grace := w.cfg.Clock.NewTimer(w.cfg.ShutdownTimeout)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.Chan():
	}
	w.mu.Lock()
	for _, a := range w.running {
		a.cancel(errHandBack)
	}
	w.mu.Unlock()
	w.cfg.Log.Info().Msg("shutdown timeout over: stopping the remaining tasks and handing them back")
	last := w.cfg.Clock.NewTimer(30 * time.Second)
	defer last.Stop()
	select {
	case <-done:
	case <-last.Chan():
		close(w.hardStop)
		<-done
	}
	return nil
}
