package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// submitThread submits an instance of spec with params {"thread": thread}, as the command line
// does, and returns its id or the submission's error.
func submitThread(ctx context.Context, db *dao.DB, spec *workflow.Spec, thread string) (int64, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	params, _ := json.Marshal(map[string]string{"thread": thread})
	var id int64
	err = db.Tx(ctx, func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(ctx, spec.Name, raw, lifecycle.Facts(spec))
		if err != nil {
			return err
		}
		id, err = lifecycle.Submit(ctx, q, lifecycle.Submission{Spec: spec, Version: v, Params: params})
		return err
	})
	return id, err
}

func mustSubmitThread(ctx context.Context, t *testing.T, db *dao.DB, spec *workflow.Spec, thread string) int64 {
	t.Helper()
	id, err := submitThread(ctx, db, spec, thread)
	if err != nil {
		t.Fatalf("submit %s on %q: %v", spec.Name, thread, err)
	}
	return id
}

// span is one instance's run, as the database recorded it.
type span struct {
	id         int64
	workflow   string
	key        string
	state      dao.WorkflowState
	start, end *time.Time
}

// spans reads every instance with a key, by workflow and key, in id order.
func spans(ctx context.Context, t *testing.T, db *dao.DB) map[string][]span {
	t.Helper()
	rows, err := db.SQL().QueryContext(ctx, `SELECT id, workflow_name, concurrency_key, state, started_at, ended_at
		FROM workflow_instance WHERE concurrency_key IS NOT NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]span{}
	for rows.Next() {
		var s span
		if err := rows.Scan(&s.id, &s.workflow, &s.key, &s.state, &s.start, &s.end); err != nil {
			t.Fatal(err)
		}
		k := s.workflow + "/" + s.key
		out[k] = append(out[k], s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkKeyHistory: within each key, instances started in id order, and at no moment did more
// than max of them run (an instance runs from its start to its end, or to now).
func checkKeyHistory(t *testing.T, byKey map[string][]span, max int) {
	t.Helper()
	for k, ss := range byKey {
		var started []span
		for _, s := range ss {
			if s.start != nil {
				started = append(started, s)
			}
		}
		if !slices.IsSortedFunc(started, func(a, b span) int { return a.start.Compare(*b.start) }) {
			t.Errorf("key %s: instances started out of submit order: %v", k, started)
		}
		for i, s := range started {
			running := 1
			for _, o := range started[:i] {
				if o.end == nil || o.end.After(*s.start) {
					running++
				}
			}
			if running > max {
				t.Errorf("key %s: instance %d started at %v while %d others of its key ran; max %d",
					k, s.id, s.start, running-1, max)
			}
		}
	}
}

// TestKeyAdmissionRacingMastersNeverExceedsMaxNorReorders: masters admitting and finishing
// the instances of a few keys at once never run more than a key's max at a time, never start
// one before another of its key submitted ahead of it, and a key is its workflow's own.
func TestKeyAdmissionRacingMastersNeverExceedsMaxNorReorders(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const max, perKey, masters = 2, 15, 6
	specs := []*workflow.Spec{
		parse(t, "name: chat\nparams: {thread: {}}\nconcurrency: {key: '{{ .params.thread }}', max: 2}\ntasks:\n  - {name: a, type: noop}\n"),
		parse(t, "name: other\nparams: {thread: {}}\nconcurrency: {key: '{{ .params.thread }}', max: 2}\ntasks:\n  - {name: a, type: noop}\n"),
	}
	keys := []string{"t1", "t2", "t3"}
	total := 0
	for range perKey {
		for _, spec := range specs {
			for _, k := range keys {
				mustSubmitThread(ctx, t, db, spec, k)
				total++
			}
		}
	}
	var mu sync.Mutex
	running := map[string]map[int64]bool{} // what the masters believe runs, by key: a subset of what does
	done := 0
	var wg sync.WaitGroup
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	for m := range masters {
		d := lifecycle.NewDriver(db, fmt.Sprintf("m%d", m), clockwork.NewRealClock())
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(m), 1))
			var mine []dao.WorkflowInstance
			for ctx.Err() == nil {
				mu.Lock()
				finished := done == total
				mu.Unlock()
				if finished {
					return
				}
				// A wake-up's look at some keys, or a poll's pass over all of them.
				var ids []int64
				if rng.IntN(2) == 0 {
					ids = []int64{int64(rng.IntN(total) + 1)}
				}
				got, err := d.AdmitKeys(ctx, ids, 100)
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				for _, wf := range got {
					k := wf.WorkflowName + "/" + *wf.ConcurrencyKey
					if running[k] == nil {
						running[k] = map[int64]bool{}
					}
					running[k][wf.ID] = true
					if n := len(running[k]); n > max {
						errs = append(errs, fmt.Errorf("key %s runs %d instances after m%d admitted %d; max %d", k, n, m, wf.ID, max))
					}
				}
				mu.Unlock()
				mine = append(mine, got...)
				// Finish some of what this master runs, forgetting it first.
				rng.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
				n := rng.IntN(len(mine) + 1)
				for _, wf := range mine[:n] {
					mu.Lock()
					delete(running[wf.WorkflowName+"/"+*wf.ConcurrencyKey], wf.ID)
					mu.Unlock()
					if err := db.WorkflowFinishIfOwned(ctx, wf.ID, *wf.Owner, dao.WorkflowSucceeded, ""); err != nil {
						fail(err)
						return
					}
					mu.Lock()
					done++
					mu.Unlock()
				}
				mine = mine[n:]
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if done != total {
		t.Fatalf("finished %d of %d instances", done, total)
	}
	byKey := spans(context.Background(), t, db)
	if len(byKey) != len(specs)*len(keys) {
		t.Errorf("%d keys; want %d: a key is its workflow's own", len(byKey), len(specs)*len(keys))
	}
	checkKeyHistory(t, byKey, max)
}

// TestKeyWithCapHoldsBoth: with max-active-instances as well, neither limit is exceeded, and
// the end of an instance of one key lets the next of another start.
func TestKeyWithCapHoldsBoth(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := parse(t, "name: capped\nparams: {thread: {}}\nmax-active-instances: 2\nconcurrency: {key: '{{ .params.thread }}'}\ntasks:\n  - {name: a, type: noop}\n")
	a1 := mustSubmitThread(ctx, t, db, spec, "a")
	a2 := mustSubmitThread(ctx, t, db, spec, "a")
	b1 := mustSubmitThread(ctx, t, db, spec, "b")
	c1 := mustSubmitThread(ctx, t, db, spec, "c")
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
	ids := func(wfs []dao.WorkflowInstance) []int64 {
		var out []int64
		for _, wf := range wfs {
			out = append(out, wf.ID)
		}
		slices.Sort(out)
		return out
	}
	got, err := d.AdmitKeys(ctx, nil, 100)
	if err != nil || !slices.Equal(ids(got), []int64{a1, b1}) {
		t.Fatalf("admitted %v, %v; want the first of keys a and b (%d, %d): key a runs one, the workflow two", ids(got), err, a1, b1)
	}
	if err := db.WorkflowFinishIfOwned(ctx, a1, "m1", dao.WorkflowSucceeded, ""); err != nil {
		t.Fatal(err)
	}
	// The wake-up of a1's end names a1: its workflow is capped, so every key of it is looked at.
	got, err = d.AdmitKeys(ctx, []int64{a1}, 100)
	if err != nil || len(got) != 1 || (got[0].ID != a2 && got[0].ID != c1) {
		t.Fatalf("admitted %v, %v; want one of %d (key a) or %d (key c): the cap is 2", ids(got), err, a2, c1)
	}
}

// TestKeyWhenFull: skip refuses a submission whose key is full, as a full workflow's is;
// cancel-oldest stops the key's oldest active instance, recorded in the audit trail, so the
// new one can run; a key that renders empty refuses the submission.
func TestKeyWhenFull(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())

	skip := parse(t, "name: skip\nparams: {thread: {}}\nconcurrency: {key: 'k-{{ .params.thread }}', when-full: skip}\ntasks:\n  - {name: a, type: noop}\n")
	first := mustSubmitThread(ctx, t, db, skip, "t1")
	_, err := submitThread(ctx, db, skip, "t1")
	if !errors.Is(err, dao.ErrKeyFull) || !errors.Is(err, dao.ErrWorkflowFull) ||
		!strings.Contains(err.Error(), `concurrency key "k-t1" has 1 active of max 1`) {
		t.Errorf("second submission on a full key: %v; want ErrKeyFull (and ErrWorkflowFull) naming the key", err)
	}
	mustSubmitThread(ctx, t, db, skip, "t2")
	if got, err := d.AdmitKeys(ctx, []int64{first}, 100); err != nil || len(got) != 1 || got[0].ID != first {
		t.Fatalf("admitted %v, %v; want %d", got, err, first)
	}
	if _, err := submitThread(ctx, db, skip, "t1"); !errors.Is(err, dao.ErrKeyFull) {
		t.Errorf("submission while the key's one instance runs: %v; want ErrKeyFull", err)
	}
	if err := db.WorkflowFinishIfOwned(ctx, first, "m1", dao.WorkflowSucceeded, ""); err != nil {
		t.Fatal(err)
	}
	mustSubmitThread(ctx, t, db, skip, "t1")

	// A backfill queues whatever when-full says.
	if err := db.Tx(ctx, func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(ctx, skip.Name, mustJSON(t, skip), lifecycle.Facts(skip))
		if err != nil {
			return err
		}
		_, err = lifecycle.Submit(ctx, q, lifecycle.Submission{Spec: skip, Version: v, Params: json.RawMessage(`{"thread":"t1"}`), Queue: true})
		return err
	}); err != nil {
		t.Errorf("a backfill on a full key: %v; want it queued", err)
	}

	cancelOldest := parse(t, "name: latest\nparams: {thread: {}}\nconcurrency: {key: '{{ .params.thread }}', when-full: cancel-oldest}\ntasks:\n  - {name: a, type: noop}\n")
	old := mustSubmitThread(ctx, t, db, cancelOldest, "t1")
	if got, err := d.AdmitKeys(ctx, []int64{old}, 100); err != nil || len(got) != 1 {
		t.Fatalf("admitted %v, %v; want %d", got, err, old)
	}
	newer := mustSubmitThread(ctx, t, db, cancelOldest, "t1")
	wf, err := db.WorkflowGet(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("stopped: workflow instance %d was submitted with the same concurrency key \"t1\" (when-full: cancel-oldest)", newer)
	if wf.State != dao.WorkflowStopped || wf.Error == nil || *wf.Error != want {
		t.Errorf("oldest instance: %s, %v; want stopped with %q", wf.State, wf.Error, want)
	}
	evs, _, err := db.AuditList(ctx, dao.AuditFilter{Action: dao.AuditWorkflowStop}, 0, 10)
	if err != nil || len(evs) != 1 || evs[0].Target != fmt.Sprintf("workflow-instance/%d", old) ||
		!strings.Contains(string(evs[0].Params), "cancel-oldest") {
		t.Errorf("audit of the stop = %+v, %v; want one workflow.stop of %d saying cancel-oldest", evs, err, old)
	}
	if got, err := d.AdmitKeys(ctx, []int64{old}, 100); err != nil || len(got) != 1 || got[0].ID != newer {
		t.Errorf("admitted %v, %v; want %d at once: the stop freed the slot", got, err, newer)
	}
	// A waiting one is the oldest active too.
	waiting := mustSubmitThread(ctx, t, db, cancelOldest, "t2")
	newest := mustSubmitThread(ctx, t, db, cancelOldest, "t2")
	if wf, _ := db.WorkflowGet(ctx, waiting); wf.State != dao.WorkflowStopped {
		t.Errorf("waiting instance %d is %s after %d took its key; want stopped", waiting, wf.State, newest)
	}

	empty := parse(t, "name: empty\nparams: {thread: {}}\nconcurrency: {key: '{{ .params.thread }}'}\ntasks:\n  - {name: a, type: noop}\n")
	if _, err := submitThread(ctx, db, empty, " "); err == nil || !strings.Contains(err.Error(), "renders empty") {
		t.Errorf("submission with an empty key: %v; want it refused", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestKeyRerunWaitsItsTurn: a rerun of an ended instance with a key is refused while another
// instance of its key waits or its key is full, and reopens it once the key is free.
func TestKeyRerunWaitsItsTurn(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
	spec := parse(t, "name: chat\nparams: {thread: {}}\nconcurrency: {key: '{{ .params.thread }}'}\ntasks:\n  - {name: a, type: noop}\n")
	// run admits the instance, then ends its one task as outcome says, and its instance.
	run := func(id int64, outcome dao.Outcome) {
		t.Helper()
		got, err := d.AdmitKeys(ctx, []int64{id}, 100)
		if err != nil || len(got) != 1 || got[0].ID != id {
			t.Fatalf("admitted %v, %v; want %d", got, err, id)
		}
		if _, err := d.AdvanceOwned(ctx, []int64{id}); err != nil {
			t.Fatal(err)
		}
		tasks, err := lifecycle.Claim(ctx, db, "w1", []string{"default"}, 1, true)
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim = %v, %v", tasks, err)
		}
		next, _ := lifecycle.Next(&tasks[0], outcome)
		if _, err := lifecycle.Finish(ctx, db, []dao.Finish{{Token: tasks[0].Token(),
			Result: dao.AttemptResult{Outcome: outcome, Next: next}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.AdvanceOwned(ctx, []int64{id}); err != nil {
			t.Fatal(err)
		}
	}
	var specs lifecycle.Specs
	failed := mustSubmitThread(ctx, t, db, spec, "t1")
	run(failed, dao.OutcomeFailed)
	if wf, _ := db.WorkflowGet(ctx, failed); wf.State != dao.WorkflowFailed {
		t.Fatalf("instance %d is %s; want failed", failed, wf.State)
	}
	next := mustSubmitThread(ctx, t, db, spec, "t1")
	var conflict *dao.ConflictError
	if _, err := lifecycle.RerunWorkflow(ctx, db, &specs, failed, nil); !errors.As(err, &conflict) ||
		!strings.Contains(err.Error(), `its concurrency key "t1" has 1 instances waiting to start first`) {
		t.Errorf("rerun while %d waits: %v; want a conflict naming the key", next, err)
	}
	got, err := d.AdmitKeys(ctx, []int64{next}, 100)
	if err != nil || len(got) != 1 {
		t.Fatalf("admitted %v, %v", got, err)
	}
	if _, err := lifecycle.RerunWorkflow(ctx, db, &specs, failed, nil); !errors.As(err, &conflict) ||
		!strings.Contains(err.Error(), `cannot rerun workflow instance`) || !strings.Contains(err.Error(), `has 1 running of max 1`) {
		t.Errorf("rerun while %d runs: %v; want a conflict naming the key", next, err)
	}
	if err := db.WorkflowFinishIfOwned(ctx, next, "m1", dao.WorkflowSucceeded, ""); err != nil {
		t.Fatal(err)
	}
	res, err := lifecycle.RerunWorkflow(ctx, db, &specs, failed, nil)
	if err != nil || !res.Reopened {
		t.Fatalf("rerun with the key free = %+v, %v; want it reopened", res, err)
	}
	// Reopened, it holds the key's slot: the next waits for it.
	after := mustSubmitThread(ctx, t, db, spec, "t1")
	if got, err := d.AdmitKeys(ctx, []int64{after}, 100); err != nil || len(got) != 0 {
		t.Errorf("admitted %v, %v while the reopened instance runs; want none", got, err)
	}
}
