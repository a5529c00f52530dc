package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// ForEachFigures are the foreach mode's own: one workflow of a for-each task over N noop
// items, run forEachRuns times after a warm-up run, each timed from its submission by the
// database's clock.
type ForEachFigures struct {
	Items int          `json:"items"`
	Runs  []ForEachRun `json:"runs"`
}

// ForEachRun is one measured run of the foreach mode, in milliseconds from its submission.
type ForEachRun struct {
	// FirstStartMs is when the first item started on a worker: the master has rendered the
	// items and created them.
	FirstStartMs float64 `json:"first_start_ms"`
	// ItemsEndedMs is when the last item ended.
	ItemsEndedMs float64 `json:"items_ended_ms"`
	// FinishedMs is when the instance ended, succeeded: its master has ended the parent.
	FinishedMs float64 `json:"finished_ms"`
}

// forEachRuns is how many runs the foreach mode measures.
const forEachRuns = 3

// forEach runs a workflow whose one task is a for-each over N noop items, one run at a time,
// and measures submit → every item created and ended → the instance succeeded: the cost of
// expanding a for-each and of advancing its parent as the items end, since noop items take no
// time of their own.
func forEach(ctx context.Context, db *dao.DB, o Options) (*Summary, error) {
	if o.N < 1 || o.N > workflow.MaxItems {
		return nil, fmt.Errorf("foreach: -n %d items; a for-each has 1 to %d", o.N, workflow.MaxItems)
	}
	spec := &workflow.Spec{Name: "bench-foreach", Tasks: []workflow.Task{{Name: "each", Type: "noop", Group: workflow.DefaultGroup,
		ForEach: fmt.Sprintf("{{ range %d }}{{ . }}\n{{ end }}", o.N)}}}
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
	time.Sleep(500 * time.Millisecond) // let the nodes start listening
	figures := &ForEachFigures{Items: o.N}
	start := time.Now()
	for i := range forEachRuns + 1 {
		var at time.Time
		if err := db.SQL().GetContext(ctx, &at, `SELECT clock_timestamp()`); err != nil {
			return nil, err
		}
		var id int64
		if err := db.Tx(ctx, func(q *dao.Queries) error {
			id, err = lifecycle.Submit(ctx, q, lifecycle.Submission{Spec: spec, Version: v})
			return err
		}); err != nil {
			return nil, err
		}
		run, err := waitForEach(ctx, db, id, at, o.N)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			continue // the warm-up (see latency)
		}
		figures.Runs = append(figures.Runs, run)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "run %d: %d items, submit → finished %.0f ms\n", i, o.N, run.FinishedMs)
		}
	}
	took := time.Since(start)
	finished := make([]float64, len(figures.Runs))
	for i, r := range figures.Runs {
		finished[i] = r.FinishedMs
	}
	slices.Sort(finished)
	s := &Summary{Mode: o.Mode, Tasks: o.N * forEachRuns, Workflows: forEachRuns, Seconds: took.Seconds(),
		TasksPerSec: float64(o.N*forEachRuns) / took.Seconds(), Masters: o.Masters, Workers: o.Workers, Slots: o.Slots,
		P50ms: finished[len(finished)/2], P95ms: finished[len(finished)-1], P99ms: finished[len(finished)-1], ForEach: figures}
	return s, nil
}

// waitForEach waits until the for-each instance id, submitted at at (the database's clock),
// has ended, and returns its run's figures; an instance that did not succeed, or whose item
// count is not n, is an error.
func waitForEach(ctx context.Context, db *dao.DB, id int64, at time.Time, n int) (ForEachRun, error) {
	for {
		wf, err := db.WorkflowGet(ctx, id)
		if err != nil {
			return ForEachRun{}, err
		}
		if wf.State.Terminal() {
			if wf.State != dao.WorkflowSucceeded {
				return ForEachRun{}, fmt.Errorf("foreach: instance %d %s: %s", id, wf.State, deref(wf.Error))
			}
			var r struct {
				Items      int       `db:"items"`
				FirstStart time.Time `db:"first_start"`
				LastEnd    time.Time `db:"last_end"`
			}
			if err := db.SQL().GetContext(ctx, &r, `SELECT count(*) AS items, min(started_at) AS first_start, max(ended_at) AS last_end
				FROM task_instance WHERE workflow_instance_id = $1 AND item_count IS NULL`, id); err != nil {
				return ForEachRun{}, err
			}
			if r.Items != n {
				return ForEachRun{}, fmt.Errorf("foreach: instance %d ran %d items, want %d", id, r.Items, n)
			}
			ms := func(t time.Time) float64 { return float64(t.Sub(at).Microseconds()) / 1000 }
			return ForEachRun{FirstStartMs: ms(r.FirstStart), ItemsEndedMs: ms(r.LastEnd), FinishedMs: ms(*wf.EndedAt)}, nil
		}
		select {
		case <-ctx.Done():
			return ForEachRun{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
