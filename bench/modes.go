package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zksched/zksched/dao"
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
	loadStart := time.Now()
	for left := o.N; left > 0; left -= 10_000 {
		if err := db.WorkflowCreateMany(ctx, spec.Name, v, nil, min(left, 10_000)); err != nil {
			return nil, err
		}
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "inserted %d workflows in %v; starting %d master(s) and %d worker(s) with %d slots\n",
			o.N, time.Since(loadStart).Round(time.Millisecond), o.Masters, o.Workers, o.Slots)
	}
	start := time.Now()
	stop := cluster(db, o)
	defer stop()
	if err := waitFinished(ctx, db, o, loadStart, o.N); err != nil {
		return nil, err
	}
	return summarize(ctx, db, o, loadStart, time.Since(start), o.N, o.N)
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
	if _, err := submitAt(ctx, db, spec.Name, v, o.Rate, warmUp); err != nil {
		return nil, err
	}
	if err := settle(ctx, db, spec.Name); err != nil {
		return nil, err
	}
	start := time.Now()
	n, err := submitAt(ctx, db, spec.Name, v, o.Rate, o.Duration)
	if err != nil {
		return nil, err
	}
	if err := waitFinished(ctx, db, o, start, n); err != nil {
		return nil, err
	}
	return summarize(ctx, db, o, start, time.Since(start), n, n)
}

// warmUp is how long the latency mode submits before it measures.
const warmUp = 2 * time.Second

// settle waits until no instance of workflow is unfinished, then for the second that keeps
// the warm-up's instances out of the measured ones (measures look one second back, for clocks).
func settle(ctx context.Context, db *dao.DB, workflow string) error {
	for {
		var left int
		if err := db.SQL().GetContext(ctx, &left, `SELECT count(*) FROM workflow_instance
			WHERE ended_at IS NULL AND workflow_name = $1`, workflow); err != nil {
			return err
		}
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(1100 * time.Millisecond):
	}
	return nil
}

// submitAt submits single instances of a workflow at rate for d and returns how many.
func submitAt(ctx context.Context, db *dao.DB, name string, v int, rate float64, d time.Duration) (int, error) {
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	// Each submission is a client of its own, sent on its tick whether or not the ones before
	// have returned, so the rate is the one asked for even when a commit takes longer than
	// the interval; at most 64 are in flight.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var failed atomic.Pointer[error]
	n := 0
	for next := start; time.Since(start) < d && failed.Load() == nil; next = next.Add(interval) {
		time.Sleep(time.Until(next))
		sem <- struct{}{}
		n++
		wg.Go(func() {
			defer func() { <-sem }()
			// One statement, committed on its own: a client that has stored its definition
			// (define did) submits with one round trip, and the scheduler is what is measured.
			if _, err := db.WorkflowCreate(ctx, name, v, nil, 0); err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return n, *err
	}
	return n, nil
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
			_, err := q.WorkflowCreate(ctx, spec.Name, v, nil, 0)
			return err
		})
		if err != nil {
			return nil, err
		}
		if err := settle(ctx, db, spec.Name); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	for i := range o.N {
		err := db.Tx(ctx, func(q *dao.Queries) error {
			_, err := q.WorkflowCreate(ctx, spec.Name, v, nil, 0)
			return err
		})
		if err != nil {
			return nil, err
		}
		if err := waitFinished(ctx, db, Options{workflow: spec.Name}, start, i+1); err != nil {
			return nil, err
		}
	}
	return summarize(ctx, db, o, start, time.Since(start), o.N, o.N*52)
}
