package lifecycle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
)

// define stores the workflow file src as the command line's define does.
func define(ctx context.Context, t *testing.T, db *dao.DB, src string) {
	t.Helper()
	if _, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: parse(t, src), File: []byte(src)}, time.Now()); err != nil {
		t.Fatalf("define: %v", err)
	}
}

// produce runs one attempt of the single task of a new instance of the producer spec to
// outcome, with output out.
func produce(ctx context.Context, t *testing.T, db *dao.DB, src string, outcome dao.Outcome, out string) {
	t.Helper()
	spec := parse(t, src)
	id := submit(ctx, t, db, spec)
	got, err := lifecycle.Claim(ctx, db, "w1", []string{spec.Tasks[0].Group}, 1, true)
	if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != id {
		t.Fatalf("claim = %+v, %v; want the task of instance %d", got, err, id)
	}
	task := got[0]
	res := dao.AttemptResult{Outcome: outcome, Produces: spec.Tasks[0].Produces}
	if outcome == dao.OutcomeSucceeded {
		res.Output = &out
	} else {
		res.Error = "failed"
	}
	res.Next, res.Retry = lifecycle.Next(&task, outcome)
	done, err := lifecycle.Finish(ctx, db, []dao.Finish{{Token: task.Token(), Result: res}})
	if err != nil || len(done) != 1 || !done[0].Recorded {
		t.Fatalf("finish = %+v, %v", done, err)
	}
}

func assetEvents(t *testing.T, db *dao.DB, asset string) []dao.AssetEvent {
	t.Helper()
	var evs []dao.AssetEvent
	if err := db.SQL().Select(&evs, `SELECT id, asset, task_instance_id, workflow_instance_id, output, output_truncated,
		emitted_by, created_at FROM asset_event WHERE asset = $1 ORDER BY id`, asset); err != nil {
		t.Fatal(err)
	}
	return evs
}

func fire(ctx context.Context, t *testing.T, db *dao.DB, name string) []lifecycle.AssetRun {
	t.Helper()
	runs, err := lifecycle.FireAssets(ctx, db, name)
	if err != nil {
		t.Fatalf("fire assets of %s: %v", name, err)
	}
	return runs
}

// TestAssetEventWithSuccess: a task that produces an asset writes its event, with its
// output, in the statement that records its success, and none when it fails.
func TestAssetEventWithSuccess(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := "name: load\ntasks:\n  - {name: only, type: noop, group: g1, produces: [orders, audit.log]}\n"
	produce(ctx, t, db, src, dao.OutcomeFailed, "")
	if evs := assetEvents(t, db, "orders"); len(evs) != 0 {
		t.Fatalf("a failed task wrote events %+v", evs)
	}
	produce(ctx, t, db, src, dao.OutcomeSucceeded, "rows=42")
	for _, a := range []string{"orders", "audit.log"} {
		evs := assetEvents(t, db, a)
		if len(evs) != 1 || evs[0].Output == nil || *evs[0].Output != "rows=42" || evs[0].TaskInstance == nil || evs[0].WorkflowInstance == nil {
			t.Fatalf("events of %s = %+v, want one with the output and its producer", a, evs)
		}
	}
	// A task that produces nothing writes nothing.
	produce(ctx, t, db, "name: other\ntasks:\n  - {name: only, type: noop, group: g2}\n", dao.OutcomeSucceeded, "x")
	var n int
	if err := db.SQL().Get(&n, `SELECT count(*) FROM asset_event`); err != nil || n != 2 {
		t.Fatalf("%d events, %v; want 2", n, err)
	}
}

// TestAssetsAllOf: a consumer of all of two assets starts one run per pair of events, each
// event taken once, in the order they came; events before it was defined start nothing.
func TestAssetsAllOf(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := "name: pa\ntasks:\n  - {name: only, type: noop, group: ga, produces: [a]}\n"
	b := "name: pb\ntasks:\n  - {name: only, type: noop, group: gb, produces: [b]}\n"
	produce(ctx, t, db, a, dao.OutcomeSucceeded, "before")
	define(ctx, t, db, "name: report\non-assets: {all: [a, b]}\ntasks: [{name: r, type: noop}]\n")
	if runs := fire(ctx, t, db, "report"); len(runs) != 0 {
		t.Fatalf("runs before any event = %+v", runs)
	}
	produce(ctx, t, db, a, dao.OutcomeSucceeded, "a1")
	produce(ctx, t, db, a, dao.OutcomeSucceeded, "a2")
	if runs := fire(ctx, t, db, "report"); len(runs) != 0 {
		t.Fatalf("runs on a alone = %+v", runs)
	}
	produce(ctx, t, db, b, dao.OutcomeSucceeded, "b1")
	runs := fire(ctx, t, db, "report")
	if len(runs) != 1 || len(runs[0].Events) != 2 || runs[0].Instance == 0 {
		t.Fatalf("runs = %+v, want one on a pair of events", runs)
	}
	if got := outputs(runs[0].Events); got != "a1 b1" {
		t.Errorf("the run's events = %s, want a1 b1 (the oldest of each)", got)
	}
	linked, err := db.AssetEventsOfRun(ctx, runs[0].Instance)
	if err != nil || outputs(linked) != "a1 b1" {
		t.Errorf("events linked to the run = %+v, %v", linked, err)
	}
	if runs := fire(ctx, t, db, "report"); len(runs) != 0 {
		t.Fatalf("a second fire started %+v", runs)
	}
	produce(ctx, t, db, b, dao.OutcomeSucceeded, "b2")
	produce(ctx, t, db, b, dao.OutcomeSucceeded, "b3")
	runs = fire(ctx, t, db, "report")
	if len(runs) != 1 || outputs(runs[0].Events) != "a2 b2" {
		t.Fatalf("runs = %+v, want one on a2 b2", runs)
	}
	wf, err := db.WorkflowGet(ctx, runs[0].Instance)
	if err != nil || wf.WorkflowName != "report" {
		t.Fatalf("the run = %+v, %v", wf, err)
	}
}

// TestAssetsAnyOf: a consumer of any of two assets starts one run per event.
func TestAssetsAnyOf(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	define(ctx, t, db, "name: refresh\non-assets: {any: [a, b]}\ntasks: [{name: r, type: noop}]\n")
	for _, e := range []struct{ asset, out string }{{"a", "1"}, {"b", "2"}, {"a", "3"}} {
		if _, err := db.AssetEmit(ctx, e.asset, &e.out, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	runs := fire(ctx, t, db, "refresh")
	if len(runs) != 3 {
		t.Fatalf("runs = %+v, want 3", runs)
	}
	for i, want := range []string{"1", "2", "3"} {
		if got := outputs(runs[i].Events); got != want {
			t.Errorf("run %d started on %s, want %s", i, got, want)
		}
	}
}

// TestAssetsFireRace: many masters firing one consumer at once start one run per event,
// never two.
func TestAssetsFireRace(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	define(ctx, t, db, "name: race\non-assets: {all: [a]}\ntasks: [{name: r, type: noop}]\n")
	const events = 20
	for range events {
		if _, err := db.AssetEmit(ctx, "a", nil, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	started := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				runs, err := lifecycle.FireAssets(ctx, db, "race")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				started += len(runs)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if started != events {
		t.Errorf("the fires reported %d runs, want %d", started, events)
	}
	var n int
	if err := db.SQL().Get(&n, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'race'`); err != nil || n != events {
		t.Errorf("%d runs, %v; want %d", n, err, events)
	}
}

// TestAssetsRollback: a fire whose transaction does not commit (a master killed before the
// commit) leaves the events queued and no run; the next fire starts it.
func TestAssetsRollback(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	define(ctx, t, db, "name: atomic\non-assets: {any: [a]}\ntasks: [{name: r, type: noop}]\n")
	if _, err := db.AssetEmit(ctx, "a", nil, "alice"); err != nil {
		t.Fatal(err)
	}
	// The fire's own steps in a transaction that rolls back, as a kill before the commit does.
	if err := db.Tx(ctx, func(q *dao.Queries) error {
		c, err := q.AssetConsumerLock(ctx, "atomic")
		if err != nil || c == nil {
			t.Fatalf("lock = %+v, %v", c, err)
		}
		evs, err := q.AssetTake(ctx, c)
		if err != nil || len(evs) != 1 {
			t.Fatalf("take = %+v, %v", evs, err)
		}
		return context.Canceled
	}); err != context.Canceled {
		t.Fatal(err)
	}
	runs := fire(ctx, t, db, "atomic")
	if len(runs) != 1 {
		t.Fatalf("runs after the rollback = %+v, want 1", runs)
	}
}

// TestAssetConsumerRedefined: a definition without on-assets stops the consumer and drops its
// queue; one with other assets drops the events of those it no longer names.
func TestAssetConsumerRedefined(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	define(ctx, t, db, "name: c\non-assets: {any: [a, b]}\ntasks: [{name: r, type: noop}]\n")
	for _, a := range []string{"a", "b"} {
		if _, err := db.AssetEmit(ctx, a, nil, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	define(ctx, t, db, "name: c\non-assets: {any: [b]}\ntasks: [{name: r, type: noop}]\n")
	if runs := fire(ctx, t, db, "c"); len(runs) != 1 || runs[0].Events[0].Asset != "b" {
		t.Fatalf("runs = %+v, want one on b", runs)
	}
	if _, err := db.AssetEmit(ctx, "b", nil, "alice"); err != nil {
		t.Fatal(err)
	}
	define(ctx, t, db, "name: c\ntasks: [{name: r, type: noop}]\n")
	if runs := fire(ctx, t, db, "c"); len(runs) != 0 {
		t.Fatalf("runs of a workflow no longer a consumer = %+v", runs)
	}
}

func outputs(evs []dao.AssetEvent) string {
	s := ""
	for i, e := range evs {
		if i > 0 {
			s += " "
		}
		if e.Output != nil {
			s += *e.Output
		}
	}
	return s
}
