package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// forEachSpec is a workflow of a list, a for-each over it with max-parallel and a task after
// it that runs only if the for-each had no items or all five gave their index as output.
const forEachSpec = `
name: each
tasks:
  - {name: list, type: noop}
  - {name: sum, type: noop, depends-on: [list], for-each: "{{ .upstream.list.output }}", max-parallel: %d}
  - name: after
    type: noop
    depends-on: [sum]
    when: '{{ or (eq .upstream.sum.output "[]") (eq .upstream.sum.output "[\"0\",\"1\",\"2\",\"3\",\"4\"]") }}'

`

// bundle is a database, a driver and the instance of forEachSpec a test runs.
type bundle struct {
	ctx  context.Context
	db   *dao.DB
	d    *lifecycle.Driver
	spec *workflow.Spec
	wf   int64
}

// setupForEach submits forEachSpec with maxParallel and runs its list, whose output is
// listOutput, to its end; the instance then waits for a master, unowned.
func setupForEach(t *testing.T, maxParallel int, listOutput string) *bundle {
	t.Helper()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	spec, err := workflow.Parse(fmt.Appendf(nil, forEachSpec, maxParallel))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	b := &bundle{ctx: ctx, db: db, d: lifecycle.NewDriver(db, "m1", clockwork.NewRealClock()), spec: spec}
	if err := db.Tx(ctx, func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(ctx, spec.Name, raw, lifecycle.Facts(spec))
		if err != nil {
			return err
		}
		b.wf, err = lifecycle.Submit(ctx, q, lifecycle.Submission{Spec: spec, Version: v})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b.run(t, "list", listOutput, dao.OutcomeSucceeded)
	return b
}

// run claims the next queued task instance, which must be name, and ends its attempt with
// outcome and output.
func (b *bundle) run(t *testing.T, name, output string, o dao.Outcome) {
	t.Helper()
	got, err := lifecycle.Claim(b.ctx, b.db, "w1", []string{workflow.DefaultGroup}, 1, true)
	if err != nil || len(got) != 1 || got[0].Name != name {
		t.Fatalf("claim = %+v, %v; want %s", got, err, name)
	}
	res := dao.AttemptResult{Outcome: o, Output: &output}
	res.Next, res.Retry = lifecycle.Next(&got[0], o)
	if done, err := lifecycle.Finish(b.ctx, b.db, []dao.Finish{{Token: got[0].Token(), Result: res}}); err != nil || !done[0].Recorded {
		t.Fatalf("finish %s: %+v, %v", name, done, err)
	}
}

// advance takes the instance a step, unowned or owned.
func (b *bundle) advance(t *testing.T) {
	t.Helper()
	if _, err := b.d.AdvanceUnowned(b.ctx, []int64{b.wf}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.d.AdvanceOwned(b.ctx, []int64{b.wf}); err != nil {
		t.Fatal(err)
	}
}

// tasks returns the instance's task instances by name.
func (b *bundle) tasks(t *testing.T) map[string]dao.TaskInstance {
	t.Helper()
	list, err := b.db.TaskListByWorkflow(b.ctx, b.wf)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dao.TaskInstance{}
	for _, ti := range list {
		if _, dup := out[ti.Name]; dup {
			t.Fatalf("task instance %s twice", ti.Name)
		}
		out[ti.Name] = ti
	}
	return out
}

// items returns the names of the item instances in state, sorted by index.
func items(tasks map[string]dao.TaskInstance, state dao.TaskState) []string {
	var out []string
	for name, ti := range tasks {
		if _, _, ok := workflow.ParseItemName(name); ok && ti.State == state {
			out = append(out, name)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		_, i, _ := workflow.ParseItemName(a)
		_, j, _ := workflow.ParseItemName(b)
		return i - j
	})
	return out
}

// TestForEachRunsItsItems: the advance after the list creates the parent, waiting, with its
// first max-parallel items; each later advance creates the next in index order, never more
// than max-parallel unended; once all succeeded the parent succeeds with their outputs as a
// JSON array, which the task after it sees, and the instance succeeds.
func TestForEachRunsItsItems(t *testing.T) {
	t.Parallel()
	b := setupForEach(t, 2, `["a", "b", "c", "d", "e"]`)
	b.advance(t)
	tasks := b.tasks(t)
	parent := tasks["sum"]
	if parent.State != dao.TaskWaiting || parent.ItemCount == nil || *parent.ItemCount != 5 || parent.WorkerID != nil {
		t.Fatalf("parent = %+v; want waiting, 5 items", parent)
	}
	var p workflow.TaskParams
	if err := json.Unmarshal(tasks["sum[1]"].Params, &p); err != nil || p.Item == nil || *p.Item != (workflow.Item{Value: "b", Index: 1}) {
		t.Fatalf("sum[1] params item = %+v, %v; want b at 1", p.Item, err)
	}
	ran := 0
	for ran < 5 {
		queued := items(tasks, dao.TaskQueued)
		if live := len(queued) + len(items(tasks, dao.TaskRunning)); live > 2 || live == 0 {
			t.Fatalf("after %d ran: %d items live (%v); want 1 or 2", ran, live, queued)
		}
		if want := workflow.ItemName("sum", ran); queued[0] != want {
			t.Fatalf("queued %v; want %s next", queued, want)
		}
		b.run(t, queued[0], fmt.Sprint(ran), dao.OutcomeSucceeded)
		ran++
		b.advance(t)
		tasks = b.tasks(t)
	}
	if parent := tasks["sum"]; parent.State != dao.TaskSucceeded || deref(parent.Output) != `["0","1","2","3","4"]` {
		t.Fatalf("parent = %s %q; want succeeded with the outputs", parent.State, deref(parent.Output))
	}
	// after's condition holds only over that output.
	b.run(t, "after", "", dao.OutcomeSucceeded)
	b.advance(t)
	if wf, err := b.db.WorkflowGet(b.ctx, b.wf); err != nil || wf.State != dao.WorkflowSucceeded {
		t.Fatalf("instance = %+v, %v; want succeeded", wf, err)
	}
}

// TestForEachEnds: without items the task succeeds with "[]" and the task after it is
// decided in the same step; when the items cannot be had (not JSON, too many, a render
// error) it fails with the reason and what needs it is skipped; a failed item fails the
// parent, naming it, and so the instance.
func TestForEachEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, list, parent, after string
	}{
		{"none", "[]", "succeeded:[]", "queued"},
		{"blank lines", "\n \n", "succeeded:[]", "queued"},
		{"not an array", "[1, 2", `failed:task "sum": for-each rendered text starting with '[' that is not a JSON array`, "skipped"},
		{"too many", "[" + strings.Repeat("0,", workflow.MaxItems) + "0]",
			fmt.Sprintf(`failed:task "sum": for-each rendered %d items; the limit is %d`, workflow.MaxItems+1, workflow.MaxItems), "skipped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupForEach(t, 0, tc.list)
			b.advance(t)
			tasks := b.tasks(t)
			got := string(tasks["sum"].State) + ":" + deref(tasks["sum"].Output) + deref(tasks["sum"].Error)
			if !strings.HasPrefix(got, tc.parent) || string(tasks["after"].State) != tc.after || len(tasks) != 3 {
				t.Fatalf("sum = %s, after = %s, %d task instances; want %s…, %s, 3", got, tasks["after"].State, len(tasks), tc.parent, tc.after)
			}
		})
	}
	t.Run("a failed item", func(t *testing.T) {
		t.Parallel()
		b := setupForEach(t, 0, "x\ny\n")
		b.advance(t)
		b.run(t, "sum[0]", "", dao.OutcomeFailed)
		b.run(t, "sum[1]", "", dao.OutcomeSucceeded)
		b.advance(t)
		tasks := b.tasks(t)
		if s := tasks["sum"]; s.State != dao.TaskFailed || deref(s.Error) != "items did not succeed: sum[0] failed" || tasks["after"].State != dao.TaskSkipped {
			t.Fatalf("sum = %s %q, after %s; want failed naming sum[0], after skipped", s.State, deref(s.Error), tasks["after"].State)
		}
		wf, err := b.db.WorkflowGet(b.ctx, b.wf)
		if err != nil || wf.State != dao.WorkflowFailed || deref(wf.Error) != "tasks did not succeed: sum failed" {
			t.Fatalf("instance = %+v, %v; want failed, naming sum alone", wf, err)
		}

		// A rerun of the instance queues the failed item alone; the parent waits again and,
		// once it has run, succeeds with both outputs.
		var specs lifecycle.Specs
		rr, err := lifecycle.RerunWorkflow(b.ctx, b.db, &specs, b.wf, nil)
		if err != nil || !rr.Reopened || len(rr.Requeued) != 2 || rr.Deleted != 1 {
			t.Fatalf("rerun = %+v, %v; want the parent and sum[0] back, after deleted, reopened", rr, err)
		}
		if got := b.tasks(t); got["sum"].State != dao.TaskWaiting || got["sum[1]"].State != dao.TaskSucceeded || got["sum[1]"].Attempt != 1 {
			t.Fatalf("after the rerun: sum %s, sum[1] %s attempt %d; want waiting, and sum[1] kept", got["sum"].State, got["sum[1]"].State, got["sum[1]"].Attempt)
		}
		b.run(t, "sum[0]", "", dao.OutcomeSucceeded)
		b.advance(t)
		if s := b.tasks(t)["sum"]; s.State != dao.TaskSucceeded || deref(s.Output) != `["",""]` {
			t.Fatalf("sum after the rerun = %s %q; want succeeded with both outputs", s.State, deref(s.Output))
		}
	})
}

// TestForEachCreatedOnceWhateverTheAdvance: an advance that dies after creating the items,
// before its commit, leaves none of them, and the next creates each once; advances of the
// instance racing each other never create an item twice nor more than max-parallel at once.
func TestForEachCreatedOnceWhateverTheAdvance(t *testing.T) {
	t.Parallel()
	b := setupForEach(t, 3, "a\nb\nc\nd\ne\nf\ng\n")
	died := errors.New("the master died")
	lifecycle.SetMadeItems(b.d, func() error { return died })
	if _, err := b.d.AdvanceUnowned(b.ctx, []int64{b.wf}); !errors.Is(err, died) {
		t.Fatalf("advance = %v; want it aborted", err)
	}
	if tasks := b.tasks(t); len(tasks) != 1 {
		t.Fatalf("task instances after the aborted advance: %v; want the list alone", slices.Collect(mapKeys(tasks)))
	}
	if wf, err := b.db.WorkflowGet(b.ctx, b.wf); err != nil || wf.Owner != nil || wf.State != dao.WorkflowRunning {
		t.Fatalf("instance = %+v, %v; want it running, unowned, as before", wf, err)
	}
	lifecycle.SetMadeItems(b.d, nil)
	// Three masters at once, each advancing twice, for every item's end.
	drivers := []*lifecycle.Driver{lifecycle.NewDriver(b.db, "m1", clockwork.NewRealClock()), lifecycle.NewDriver(b.db, "m2", clockwork.NewRealClock()),
		lifecycle.NewDriver(b.db, "m3", clockwork.NewRealClock())}
	race := func() {
		var wg sync.WaitGroup
		for _, d := range drivers {
			wg.Go(func() {
				for range 2 {
					if _, err := d.AdvanceUnowned(b.ctx, []int64{b.wf}); err != nil {
						t.Error(err)
					}
					if _, err := d.AdvanceOwned(b.ctx, []int64{b.wf}); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
	}
	race()
	for ran := 0; ran < 7; ran++ {
		tasks := b.tasks(t) // fails on a name twice
		queued := items(tasks, dao.TaskQueued)
		if live := len(queued) + len(items(tasks, dao.TaskRunning)); live > 3 || live == 0 {
			t.Fatalf("after %d ran: %d items live; want 1 to 3", ran, live)
		}
		b.run(t, queued[0], queued[0], dao.OutcomeSucceeded)
		race()
	}
	tasks := b.tasks(t)
	if len(items(tasks, dao.TaskSucceeded)) != 7 || tasks["sum"].State != dao.TaskSucceeded {
		t.Fatalf("items succeeded %v, parent %s; want 7 and succeeded", items(tasks, dao.TaskSucceeded), tasks["sum"].State)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestForEachKillAndRerun: a kill of the parent kills its queued items at once, asks the
// worker of its running one to stop it and creates no further item; once that one has ended
// the parent ends killed. A rerun reruns its killed items only, the succeeded one keeping its
// output, and the parent waits again until the items never created have run too.
func TestForEachKillAndRerun(t *testing.T) {
	t.Parallel()
	b := setupForEach(t, 3, `["0", "1", "2", "3", "4"]`)
	b.advance(t)
	b.run(t, "sum[0]", "0", dao.OutcomeSucceeded)
	b.advance(t) // sum[3] created
	claimed, err := lifecycle.Claim(b.ctx, b.db, "w1", []string{workflow.DefaultGroup}, 1, true)
	if err != nil || len(claimed) != 1 || claimed[0].Name != "sum[1]" {
		t.Fatalf("claim = %+v, %v; want sum[1]", claimed, err)
	}
	tasks := b.tasks(t)
	res, err := lifecycle.Kill(b.ctx, b.db, tasks["sum"].ID, nil)
	if err != nil || res.State != dao.TaskWaiting {
		t.Fatalf("kill = %+v, %v; want the parent waiting for its items", res, err)
	}
	if _, err := b.db.TaskEndIfWaiting(b.ctx, tasks["sum"].ID, dao.TaskSucceeded, nil, nil, "", nil); err == nil {
		t.Fatal("a signal ended the parent of a for-each")
	}
	b.advance(t)
	tasks = b.tasks(t)
	if got := fmt.Sprintf("%v %v %s %d", items(tasks, dao.TaskKilled), items(tasks, dao.TaskRunning), tasks["sum"].State, len(tasks)); got != "[sum[2] sum[3]] [sum[1]] waiting 6" {
		t.Fatalf("killed, running, parent, task instances = %s; want [sum[2] sum[3]] [sum[1]] waiting 6", got)
	}
	if !tasks["sum[1]"].KillRequested {
		t.Fatal("sum[1] runs without a kill request")
	}
	res1 := dao.AttemptResult{Outcome: dao.OutcomeKilled, Next: dao.TaskKilled, Error: "killed"}
	if done, err := lifecycle.Finish(b.ctx, b.db, []dao.Finish{{Token: claimed[0].Token(), Result: res1}}); err != nil || !done[0].Recorded {
		t.Fatalf("finish sum[1]: %v, %v", done, err)
	}
	b.advance(t)
	tasks = b.tasks(t)
	if s := tasks["sum"]; s.State != dao.TaskKilled || !strings.HasPrefix(deref(s.Error), "killed by an operator: 4 of 5 items created") ||
		tasks["after"].State != dao.TaskSkipped {
		t.Fatalf("sum = %s %q, after %s; want killed, after skipped", s.State, deref(s.Error), tasks["after"].State)
	}
	if wf, _ := b.db.WorkflowGet(b.ctx, b.wf); wf.State != dao.WorkflowFailed {
		t.Fatalf("instance %s; want failed", wf.State)
	}

	var specs lifecycle.Specs
	rr, _, err := lifecycle.RerunTask(b.ctx, b.db, &specs, tasks["sum[2]"].ID, nil)
	if err != nil || !rr.Reopened || len(rr.Requeued) != 4 || rr.Deleted != 1 {
		t.Fatalf("rerun = %+v, %v; want the parent and its three killed items back, after deleted, reopened", rr, err)
	}
	tasks = b.tasks(t)
	if s := tasks["sum"]; s.State != dao.TaskWaiting || s.KillRequested || tasks["sum[0]"].State != dao.TaskSucceeded ||
		deref(tasks["sum[0]"].Output) != "0" {
		t.Fatalf("after the rerun: sum %s (kill requested %v), sum[0] %s; want waiting, sum[0] kept", s.State, s.KillRequested, tasks["sum[0]"].State)
	}
	for ran := 1; ran < 5; ran++ {
		b.advance(t)
		b.run(t, workflow.ItemName("sum", ran), fmt.Sprint(ran), dao.OutcomeSucceeded)
	}
	b.advance(t)
	b.run(t, "after", "", dao.OutcomeSucceeded)
	b.advance(t)
	tasks = b.tasks(t)
	if deref(tasks["sum"].Output) != `["0","1","2","3","4"]` || tasks["sum[1]"].Attempt != 2 || tasks["sum[0]"].Attempt != 1 {
		t.Fatalf("sum output %q, attempts of sum[0] %d and sum[1] %d; want every output, sum[0] run once, sum[1] twice",
			deref(tasks["sum"].Output), tasks["sum[0]"].Attempt, tasks["sum[1]"].Attempt)
	}
	if wf, _ := b.db.WorkflowGet(b.ctx, b.wf); wf.State != dao.WorkflowSucceeded {
		t.Fatalf("instance %s; want succeeded", wf.State)
	}
}

// TestForEachKillRacingAnAdvance: a kill of the parent that comes while an advance is
// creating its next items (after their insert, before the commit) waits for that advance
// and kills what it created; the advance after it creates nothing more.
func TestForEachKillRacingAnAdvance(t *testing.T) {
	t.Parallel()
	b := setupForEach(t, 2, "a\nb\nc\nd\ne\n")
	b.advance(t)
	parent := b.tasks(t)["sum"].ID
	b.run(t, "sum[0]", "0", dao.OutcomeSucceeded)
	killed := make(chan error, 1)
	lifecycle.SetMadeItems(b.d, func() error {
		go func() {
			_, err := lifecycle.Kill(b.ctx, b.db, parent, nil)
			killed <- err
		}()
		// Until the kill waits for this transaction: the statement that marks the parent. (The
		// advance runs on the test's goroutine, so the wait may fail the test.)
		testenv.WaitFor(t, 10*time.Second, 10*time.Millisecond, "the kill to wait for the advance", func() bool {
			var waiting int
			if err := b.db.SQL().GetContext(b.ctx, &waiting, `SELECT count(*) FROM pg_stat_activity
				WHERE wait_event_type = 'Lock' AND query LIKE '%item_count IS NULL) THEN ''killed''%'`); err != nil {
				t.Fatal(err)
			}
			return waiting > 0
		})
		return nil
	})
	b.advance(t) // creates sum[2], racing the kill
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	lifecycle.SetMadeItems(b.d, nil)
	b.advance(t)
	tasks := b.tasks(t)
	if got := fmt.Sprintf("%v %d %v", items(tasks, dao.TaskKilled), len(tasks), tasks["sum"].KillRequested); got != "[sum[1] sum[2]] 6 true" {
		t.Fatalf("killed items, task instances, parent's kill requested = %s; want [sum[1] sum[2]] 6 true", got)
	}
	if s := tasks["sum"]; s.State != dao.TaskKilled {
		t.Fatalf("parent %s; want killed once its items ended", s.State)
	}
}
