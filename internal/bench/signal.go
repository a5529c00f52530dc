package bench

// The signal mode: what waiting for people costs and how fast a signal moves a workflow on.
// It starts a cluster of real processes as the memory mode does and submits N workflows of
// three tasks: a noop, then a wait task, then a noop. Once every instance waits it samples the
// nodes' memory and goroutines for the hold time, beside those of the idle cluster before the
// submission: a waiting task holds no slot and no goroutine, so neither figure may grow with
// N. It then signals waiting tasks at a steady rate, each signal a client of its own as the
// API's handler is (lifecycle.Signal), and measures signal → next task started and signal →
// workflow finished, from the signal's call to the database's timestamps.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/workflow"
)

// SignalFigures are what the signal mode adds to a [Summary], under "signal" in its JSON.
type SignalFigures struct {
	// Waiting is how many wait tasks waited at once; FillMs how long from the first submit
	// until they all did.
	Waiting int     `json:"waiting"`
	FillMs  float64 `json:"fill_ms"`
	// Idle are the nodes sampled before the submission; Held those sampled while every
	// instance waited (RSS max over the hold, goroutines at its end).
	Idle []NodeMemory `json:"idle"`
	Held []NodeMemory `json:"held"`
	// MasterRSSMBMax and WorkerRSSMBMax are the largest RSS of any master and any worker
	// while the tasks waited.
	MasterRSSMBMax float64 `json:"master_rss_mb_max"`
	WorkerRSSMBMax float64 `json:"worker_rss_mb_max"`
	// Rate is the signals sent a second, Signals how many were sent.
	Rate    float64 `json:"rate"`
	Signals int     `json:"signals"`
	// Start is signal → the next task started, Queued signal → it was created, Finish
	// signal → the workflow finished.
	Start  dao.Percentiles `json:"start"`
	Queued dao.Percentiles `json:"queued"`
	Finish dao.Percentiles `json:"finish"`
	// ZKRoot and Schema are where the run ran; both are gone when it returns.
	ZKRoot string `json:"zk_root"`
	Schema string `json:"schema"`
}

// signalSpec is the signal mode's workflow: a noop, a wait task, a noop.
func signalSpec() *workflow.Spec {
	return &workflow.Spec{Name: "bench-signal", Tasks: []workflow.Task{
		{Name: "start", Type: "noop", Group: workflow.DefaultGroup},
		{Name: "hold", Type: workflow.TypeWait, Group: workflow.DefaultGroup, DependsOn: []string{"start"},
			Timeout: workflow.Duration(24 * time.Hour)},
		{Name: "next", Type: "noop", Group: workflow.DefaultGroup, DependsOn: []string{"hold"}},
	}}
}

// checkSignalOptions fills the defaults of the signal mode and refuses what cannot run.
func checkSignalOptions(o *Options) error {
	return checkProcOptions(o, "signal", func(check func(bad bool, format string, args ...any)) {
		check(o.N < 1, "-n %d: want at least 1", o.N)
		check(o.Masters < 1, "--masters %d: want at least 1", o.Masters)
		check(o.Workers < 1, "--workers %d: want at least 1", o.Workers)
		check(o.Slots < 1, "--slots %d: want at least 1", o.Slots)
		check(o.Rate <= 0, "--rate %g: want a positive rate", o.Rate)
		check(o.Duration <= 0, "--duration %v: want a positive duration", o.Duration)
		check(o.Hold < 0, "--hold %v: want a duration of 0 or more", o.Hold)
		check(o.Rate*o.Duration.Seconds() > float64(o.N),
			"--rate %g for --duration %v signals more tasks than -n %d makes wait", o.Rate, o.Duration, o.N)
	})
}

// signalFillTimeout bounds how long the signal mode waits for its N tasks to wait.
const signalFillTimeout = 10 * time.Minute

// signalBench runs the signal mode on db, the run's scratch schema.
func signalBench(ctx context.Context, db *dao.DB, o Options) (*Summary, error) {
	return runOnProcesses(ctx, db, o, "signal", signalSpec(), checkSignalOptions,
		func(c *procCluster, spec *workflow.Spec, v int) (*Summary, error) {
			r := &memoryRun{procCluster: c}
			for _, n := range c.nodes {
				r.figures = append(r.figures, NodeMemory{Name: n.name, Role: string(n.role), ID: n.id, PID: n.cmd.Process.Pid})
			}
			return signalRun(ctx, r, spec, v)
		})
}

func signalRun(ctx context.Context, r *memoryRun, spec *workflow.Spec, v int) (*Summary, error) {
	o := r.o
	start, fill, waiting, idle, err := r.fill(ctx, spec, v, "signal", "tasks waiting", "waiting", `SELECT count(*) FROM task_instance WHERE state = 'waiting'`)
	if err != nil {
		return nil, err
	}
	r.print(start, fmt.Sprintf("all %d waiting; holding for %v", waiting, o.Hold))
	if err := r.hold(ctx); err != nil {
		return nil, err
	}
	r.finish(ctx)
	heldFigures := append([]NodeMemory(nil), r.figures...)

	n := int(o.Rate * o.Duration.Seconds())
	var targets []int64
	if err := r.db.SQL().SelectContext(ctx, &targets, `SELECT id FROM task_instance WHERE state = 'waiting'
		ORDER BY random() LIMIT $1`, n); err != nil {
		return nil, fmt.Errorf("signal: pick the waiting tasks: %w", err)
	}
	r.print(start, fmt.Sprintf("signalling %d tasks at %g/s", len(targets), o.Rate))
	signalled := time.Now()
	tasks, sent, err := signalAt(ctx, r.db, targets, o.Rate)
	if err != nil {
		return nil, err
	}
	if err := waitSignalled(ctx, r, tasks); err != nil {
		return nil, err
	}
	took := time.Since(signalled)
	st, err := r.db.SignalLatencyFrom(ctx, tasks, sent)
	if err != nil {
		return nil, err
	}
	f := &SignalFigures{Waiting: waiting, FillMs: ms(fill), Idle: idle, Held: heldFigures, Rate: o.Rate,
		Signals: len(tasks), Start: st.Start, Queued: st.Queued, Finish: st.Finish, ZKRoot: r.root, Schema: r.schema}
	for _, nm := range heldFigures {
		switch registry.Role(nm.Role) {
		case registry.RoleMaster:
			f.MasterRSSMBMax = max(f.MasterRSSMBMax, nm.RSSMBMax)
		case registry.RoleWorker:
			f.WorkerRSSMBMax = max(f.WorkerRSSMBMax, nm.RSSMBMax)
		}
	}
	return &Summary{Mode: "signal", Tasks: len(tasks), Workflows: len(tasks), Seconds: took.Seconds(),
		TasksPerSec: float64(len(tasks)) / took.Seconds(), P50ms: st.Start.P50, P95ms: st.Start.P95, P99ms: st.Start.P99,
		Latency: st, Masters: o.Masters, Workers: o.Workers, Slots: o.Slots, Signal: f}, nil
}

// signalAt signals the waiting tasks at rate, each signal sent on its tick whether or not
// the ones before have returned (at most 64 in flight), and returns the tasks signalled and
// when each signal was called, in microseconds since the epoch.
func signalAt(ctx context.Context, db *dao.DB, targets []int64, rate float64) (tasks, sent []int64, err error) {
	interval := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	var mu sync.Mutex
	sem := make(chan struct{}, 64)
	var failed atomic.Pointer[error]
	next := time.Now()
	for _, id := range targets {
		if failed.Load() != nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			called := time.Now().UnixMicro()
			if _, err := lifecycle.Signal(ctx, db, id, "approved", false, nil); err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
			mu.Lock()
			tasks, sent = append(tasks, id), append(sent, called)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return tasks, sent, fmt.Errorf("signal: %w", *err)
	}
	return tasks, sent, ctx.Err()
}

// waitSignalled waits until the workflow instances of the signalled tasks have all finished.
func waitSignalled(ctx context.Context, r *memoryRun, tasks []int64) error {
	deadline := time.Now().Add(time.Minute)
	for {
		left, err := r.db.SignalledUnfinished(ctx, tasks)
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		if err := r.checkAlive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("signal: %d signalled workflow instances unfinished a minute after the last signal", left)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fill samples the nodes idle, submits o.N instances of spec at version v, and samples them
// until query (a count) reaches o.N, printing progress as "N label"; mode names the benchmark
// in errors and what what the count is. It returns when the count was reached, how long it
// took, the count, and the idle figures.
func (r *memoryRun) fill(ctx context.Context, spec *workflow.Spec, v int, mode, what, label, query string) (start time.Time, took time.Duration, n int, idle []NodeMemory, err error) {
	o := r.o
	if err := r.sample(ctx); err != nil {
		return start, 0, 0, nil, err
	}
	r.finish(ctx)
	idle = append([]NodeMemory(nil), r.figures...)

	start = time.Now()
	r.lastPrint = start
	if err := r.submit(ctx, spec, v); err != nil {
		return start, 0, 0, nil, fmt.Errorf("%s: submit: %w", mode, err)
	}
	tick := time.NewTicker(memorySampleEvery)
	defer tick.Stop()
	for n < o.N {
		if err := r.checkAlive(); err != nil {
			return start, 0, n, nil, err
		}
		if err := r.sample(ctx); err != nil {
			return start, 0, n, nil, err
		}
		if err := r.db.SQL().GetContext(ctx, &n, query); err != nil {
			return start, 0, n, nil, fmt.Errorf("%s: count the %s: %w", mode, what, err)
		}
		if time.Since(start) > signalFillTimeout {
			return start, 0, n, nil, fmt.Errorf("%s: %d of %d %s after %v", mode, n, o.N, what, signalFillTimeout)
		}
		if time.Since(r.lastPrint) >= 2*time.Second {
			r.print(start, fmt.Sprintf("%d %s", n, label))
		}
		select {
		case <-ctx.Done():
			return start, 0, n, nil, ctx.Err()
		case <-tick.C:
		}
	}
	return start, time.Since(start), n, idle, nil
}

// hold samples the nodes for o.Hold, as long as they live.
func (r *memoryRun) hold(ctx context.Context) error {
	tick := time.NewTicker(memorySampleEvery)
	defer tick.Stop()
	for began := time.Now(); time.Since(began) < r.o.Hold; {
		if err := r.checkAlive(); err != nil {
			return err
		}
		if err := r.sample(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
