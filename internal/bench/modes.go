package bench

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// burnDown inserts N single-task noop workflows first, then starts the cluster and measures
// until every workflow (task and instance) has finished.
func burnDown(ctx context.Context, db *dao.DB, o Options) (*Summary, error) {
	spec := &workflow.Spec{Name: "bench-noop", Tasks: []workflow.Task{{Name: "t", Type: "noop", Group: workflow.DefaultGroup}}}
	o.workflow = spec.Name
	v, err := define(ctx, db, spec)
	if err != nil {
		return nil, err
	}
	after, err := db.WorkflowLastID(ctx)
	if err != nil {
		return nil, err
	}
	loadStart := time.Now()
	for left := o.N; left > 0; left -= 10_000 {
		if err := lifecycle.SubmitMany(ctx, db.Queries, lifecycle.Submission{Spec: spec, Version: v}, min(left, 10_000)); err != nil {
			return nil, err
		}
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "inserted %d workflows in %v; starting %d master(s) and %d worker(s) with %d slots\n",
			o.N, time.Since(loadStart).Round(time.Millisecond), o.Masters, o.Workers, o.Slots)
	}
	// The loader's garbage (the arrays of every submission) is collected and given back to
	// the OS now, not by the GC and the scavenger while the nodes work, where their CPU time
	// would be charged to the run.
	debug.FreeOSMemory()
	// The run is timed by the database's clock, from just before the nodes start to the last
	// instance's ended_at: the progress poll can then be slow (its count of the finished
	// instances is a load of its own) without making the figure coarse.
	var start time.Time
	if err := db.SQL().GetContext(ctx, &start, `SELECT clock_timestamp()`); err != nil {
		return nil, err
	}
	cpu := sampleCPU()
	stop := cluster(db, o)
	defer stop()
	if err := waitFinished(ctx, db, o, after, loadStart, o.N, 500*time.Millisecond); err != nil {
		return nil, err
	}
	cost := cpu.since(o.N)
	var end time.Time
	if err := db.SQL().GetContext(ctx, &end, `SELECT max(ended_at) FROM workflow_instance WHERE workflow_name = $1`, spec.Name); err != nil {
		return nil, err
	}
	s, err := summarize(ctx, db, o, after, end.Sub(start), o.N, o.N)
	if s != nil {
		s.CPU = cost
	}
	return s, err
}

// latency submits single-task workflows at a steady rate to a running cluster and measures
// submit → task start and submit → finish.
func latency(ctx context.Context, db *dao.DB, o Options) (*Summary, error) {
	spec := &workflow.Spec{Name: "bench-latency", Tasks: []workflow.Task{{Name: "t", Type: "noop", Group: workflow.DefaultGroup}}}
	o.workflow = spec.Name
	v, err := define(ctx, db, spec)
	if err != nil {
		return nil, err
	}
	stop := cluster(db, o)
	defer stop()
	time.Sleep(500 * time.Millisecond) // let the nodes start listening
	// Warm up first at the same rate: the first second of a fresh cluster on a fresh schema
	// (connections opening, the planner without statistics) is not the steady state.
	if _, _, err := submitAt(ctx, db, spec, v, o.Rate, warmUp); err != nil {
		return nil, err
	}
	after, err := settle(ctx, db, spec.Name)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	ids, sent, err := submitAt(ctx, db, spec, v, o.Rate, o.Duration)
	if err != nil {
		return nil, err
	}
	n := len(ids)
	if err := waitFinished(ctx, db, o, after, start, n, 100*time.Millisecond); err != nil {
		return nil, err
	}
	took := time.Since(start)
	st, err := db.WorkflowLatencyFrom(ctx, ids, sent)
	if err != nil {
		return nil, err
	}
	return summary(o, took, n, n, st), nil
}

// warmUp is how long the latency mode submits before it measures.
const warmUp = 2 * time.Second

// settle waits until no instance of workflow is unfinished, and returns the newest instance's
// id: the instances submitted next, the measured ones, have greater ids.
func settle(ctx context.Context, db *dao.DB, workflow string) (int64, error) {
	for {
		var left int
		if err := db.SQL().GetContext(ctx, &left, `SELECT count(*) FROM workflow_instance
			WHERE ended_at IS NULL AND workflow_name = $1`, workflow); err != nil {
			return 0, err
		}
		if left == 0 {
			return db.WorkflowLastID(ctx)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// submitAt submits single instances of a workflow at rate for d, and returns their ids and
// when each submission was called (microseconds since the epoch): latency counts from there.
func submitAt(ctx context.Context, db *dao.DB, spec *workflow.Spec, v int, rate float64, d time.Duration) (ids, sent []int64, err error) {
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	// Each submission is a client of its own, sent on its tick whether or not the ones before
	// have returned, so the rate is the one asked for even when a commit takes longer than
	// the interval; at most 64 are in flight.
	var wg sync.WaitGroup
	var mu sync.Mutex
	sem := make(chan struct{}, 64)
	var failed atomic.Pointer[error]
	for next := start; time.Since(start) < d && failed.Load() == nil; next = next.Add(interval) {
		time.Sleep(time.Until(next))
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			called := time.Now().UnixMicro()
			// On the pool, as a node submits what its clients send: submissions of the same
			// moment share a statement and a commit (dao.DB.WorkflowCreateGrouped).
			id, err := lifecycle.SubmitNow(ctx, db, lifecycle.Submission{Spec: spec, Version: v})
			if err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
			mu.Lock()
			ids, sent = append(ids, id), append(sent, called)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return ids, sent, *err
	}
	return ids, sent, nil
}

// dag runs N fan-out/fan-in workflows (1 → 50 → 1 noop tasks) one after another and measures
// each workflow's time from submit to finish: the cost of DAG advancement, since noop tasks
// take no time of their own.
func dag(ctx context.Context, db *dao.DB, o Options) (*Summary, error) {
	spec := &workflow.Spec{Name: "bench-dag"}
	spec.Tasks = append(spec.Tasks, workflow.Task{Name: "in", Type: "noop", Group: workflow.DefaultGroup})
	var mids []string
	for i := range 50 {
		name := fmt.Sprintf("mid-%02d", i)
		mids = append(mids, name)
		spec.Tasks = append(spec.Tasks, workflow.Task{Name: name, Type: "noop", Group: workflow.DefaultGroup, DependsOn: []string{"in"}})
	}
	spec.Tasks = append(spec.Tasks, workflow.Task{Name: "out", Type: "noop", Group: workflow.DefaultGroup, DependsOn: mids})
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	o.workflow = spec.Name
	v, err := define(ctx, db, spec)
	if err != nil {
		return nil, err
	}
	stop := cluster(db, o)
	defer stop()
	time.Sleep(500 * time.Millisecond)
	// Two workflows to warm up (see latency), not measured.
	for range 2 {
		err := db.Tx(ctx, func(q *dao.Queries) error {
			_, err := lifecycle.Submit(ctx, q, lifecycle.Submission{Spec: spec, Version: v})
			return err
		})
		if err != nil {
			return nil, err
		}
		if _, err := settle(ctx, db, spec.Name); err != nil {
			return nil, err
		}
	}
	after, err := db.WorkflowLastID(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for i := range o.N {
		err := db.Tx(ctx, func(q *dao.Queries) error {
			_, err := lifecycle.Submit(ctx, q, lifecycle.Submission{Spec: spec, Version: v})
			return err
		})
		if err != nil {
			return nil, err
		}
		if err := waitFinished(ctx, db, Options{workflow: spec.Name}, after, start, i+1, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	return summarize(ctx, db, o, after, time.Since(start), o.N, o.N*52)
}
