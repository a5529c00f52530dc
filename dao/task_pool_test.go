package dao_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// queuePooled creates a workflow instance owned by "m1" with n queued tasks in pool (none
// when pool is ""), in groups g1 and g2 by turns when split is set, else in "default".
func (b *testBundle) queuePooled(t *testing.T, prefix string, n int, pool string, split bool) {
	t.Helper()
	wf := daotest.Submit(t, b.db, "wf", map[string]any{"name": "wf"})
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	tasks := make([]dao.NewTask, n)
	for i := range tasks {
		group := "default"
		if split {
			group = fmt.Sprintf("g%d", i%2+1)
		}
		tasks[i] = dao.NewTask{WorkflowInstanceID: wf, Name: fmt.Sprintf("%s%d", prefix, i), Type: "noop",
			State: dao.TaskQueued, Group: group, Pool: pool}
	}
	if _, err := b.db.TaskCreateMany(b.ctx, tasks); err != nil {
		t.Fatal(err)
	}
}

func (b *testBundle) pools(t *testing.T) map[string]dao.Pool {
	t.Helper()
	ps, err := b.db.PoolList(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dao.Pool{}
	for _, p := range ps {
		out[p.Name] = p
	}
	return out
}

func succeed(t *testing.T, b *testBundle, ti dao.TaskInstance) {
	t.Helper()
	out := "ok"
	if err := b.db.TaskFinishIfRunning(b.ctx, ti.Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded,
		Next: dao.TaskSucceeded, Output: &out}); err != nil {
		t.Fatal(err)
	}
}

func countPools(tasks []dao.TaskInstance) map[string]int {
	n := map[string]int{}
	for _, ti := range tasks {
		p := ""
		if ti.Pool != nil {
			p = *ti.Pool
		}
		n[p]++
	}
	return n
}

func TestClaimKeepsPoolLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.db.PoolSetLimits(b.ctx, map[string]int{"llm": 2, "idle": 5}); err != nil {
		t.Fatal(err)
	}
	b.queuePooled(t, "llm", 6, "llm", false)
	b.queuePooled(t, "plain", 3, "", false)
	b.queuePooled(t, "free", 2, "unlimited", false)

	got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"default"}, 20)
	if err != nil {
		t.Fatal(err)
	}
	if n := countPools(got); n["llm"] != 2 || n[""] != 3 || n["unlimited"] != 2 {
		t.Fatalf("first claim took %v, want 2 of pool llm, 3 without a pool, 2 of the unlimited pool", n)
	}
	// The pool is full: its tasks stay queued, and a claim finds nothing else.
	if again, err := b.db.TaskClaimQueued(b.ctx, "w2", []string{"default"}, 20); err != nil || len(again) != 0 {
		t.Fatalf("claim with a full pool = %d tasks, %v; want none", len(again), err)
	}
	pools := b.pools(t)
	if p := pools["llm"]; p.Running != 2 || p.MaxRunning == nil || *p.MaxRunning != 2 {
		t.Errorf("pool llm = %+v, want 2 of 2 running", p)
	}
	if p := pools["unlimited"]; p.Running != 2 || p.MaxRunning != nil {
		t.Errorf("pool unlimited = %+v, want 2 running and no limit", p)
	}

	// One finishes, one requeued by a failover: two slots free up.
	var llm []dao.TaskInstance
	for _, ti := range got {
		if ti.Pool != nil && *ti.Pool == "llm" {
			llm = append(llm, ti)
		}
	}
	succeed(t, b, llm[0])
	if n, err := b.db.TaskRequeueIfRunningOnWorker(b.ctx, "w1"); err != nil || n != 6 {
		t.Fatalf("requeue w1 = %d, %v; want its 6 running tasks", n, err)
	}
	if p := b.pools(t)["llm"]; p.Running != 0 {
		t.Errorf("after a finish and a failover pool llm runs %d, want 0", p.Running)
	}
	got, err = b.db.TaskClaimQueued(b.ctx, "w2", []string{"default"}, 20)
	if err != nil {
		t.Fatal(err)
	}
	if n := countPools(got); n["llm"] != 2 {
		t.Fatalf("claim after the pool emptied took %v, want 2 of pool llm", n)
	}

	// Lifting the limit (the pool left the config) lets the rest run.
	if err := b.db.PoolSetLimits(b.ctx, map[string]int{"idle": 5}); err != nil {
		t.Fatal(err)
	}
	got, err = b.db.TaskClaimQueued(b.ctx, "w3", []string{"default"}, 20)
	if err != nil {
		t.Fatal(err)
	}
	if n := countPools(got); n["llm"] != 3 {
		t.Fatalf("claim after the limit was lifted took %v, want the 3 left of pool llm", n)
	}
	if p := b.pools(t)["llm"]; p.Running != 5 || p.MaxRunning != nil {
		t.Errorf("pool llm = %+v, want 5 running and no limit", p)
	}
}

// TestConcurrentClaimersNeverExceedPool has eight claimers race for the tasks of a pool of
// three while an observer samples the number running; every sample (a consistent snapshot)
// must be within the limit. The claimers serve two groups, so they look at different tasks:
// claimers that see the same queue in the same order would stay within the limit even
// without the pool lock, each finding the tasks the other took.
func TestConcurrentClaimersNeverExceedPool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const limit, tasks, claimers = 3, 200, 8
	if err := b.db.PoolSetLimits(b.ctx, map[string]int{"p": limit}); err != nil {
		t.Fatal(err)
	}
	b.queuePooled(t, "t", tasks, "p", true)

	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, claimers+1)
	for i := range claimers {
		wg.Go(func() {
			worker, group := fmt.Sprintf("w%d", i), fmt.Sprintf("g%d", i%2+1)
			for done.Load() < tasks && ctx.Err() == nil {
				got, err := b.db.TaskClaimQueued(ctx, worker, []string{group}, limit)
				if err != nil {
					errs <- err
					return
				}
				for _, ti := range got {
					time.Sleep(time.Millisecond) // the "work": long enough for claims to overlap
					out := "ok"
					if err := b.db.TaskFinishIfRunning(ctx, ti.Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded,
						Next: dao.TaskSucceeded, Output: &out}); err != nil {
						errs <- err
						return
					}
					done.Add(1)
				}
			}
		})
	}
	high := 0
	var samples int
	observer := make(chan struct{})
	go func() {
		defer close(observer)
		for done.Load() < tasks && ctx.Err() == nil {
			var n int
			if err := b.db.SQL().GetContext(ctx, &n, `SELECT count(*) FROM task_instance WHERE pool = 'p' AND state = 'running'`); err != nil {
				if ctx.Err() == nil {
					errs <- err
				}
				return
			}
			samples++
			high = max(high, n)
		}
	}()
	wg.Wait()
	<-observer
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if done.Load() != tasks {
		t.Fatalf("%d of %d tasks done", done.Load(), tasks)
	}
	t.Logf("high-water mark %d running over %d samples, limit %d", high, samples, limit)
	if high > limit {
		t.Fatalf("%d tasks of pool p ran at once, limit %d", high, limit)
	}
	if high < 2 {
		t.Errorf("at most %d ran at once over %d samples: the claimers never overlapped, the test proves little", high, samples)
	}
	if p := b.pools(t)["p"]; p.Running != 0 {
		t.Errorf("pool p counts %d running after every task finished, want 0", p.Running)
	}
}

func TestCheckpointIsFencedByToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.queue(t, 1, "default")
	got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"default"}, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim = %d, %v", len(got), err)
	}
	old := got[0].Token()
	usage := json.RawMessage(`{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "calls": 1}`)
	if err := b.db.CheckpointSaveIfRunning(b.ctx, old, "one", "first", usage); err != nil {
		t.Fatal(err)
	}
	// Saving the same step again under the same token replaces it.
	if err := b.db.CheckpointSaveIfRunning(b.ctx, old, "one", "first again", usage); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.TaskRequeueIfRunningOnWorker(b.ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if err := b.db.CheckpointSaveIfRunning(b.ctx, old, "two", "late", nil); !errors.Is(err, dao.ErrTokenRefused) {
		t.Fatalf("stale checkpoint error = %v, want ErrTokenRefused", err)
	}
	got, err = b.db.TaskClaimQueued(b.ctx, "w2", []string{"default"}, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("second claim = %d, %v", len(got), err)
	}
	if err := b.db.CheckpointSaveIfRunning(b.ctx, got[0].Token(), "two", "second", nil); err != nil {
		t.Fatal(err)
	}
	cps, err := b.db.CheckpointListForTask(b.ctx, got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 2 || cps[0].Step != "one" || cps[0].Output != "first again" || cps[0].Attempt != 1 ||
		cps[1].Step != "two" || cps[1].Output != "second" || cps[1].Attempt != 2 {
		t.Fatalf("checkpoints = %+v", cps)
	}
	var u map[string]int
	if err := json.Unmarshal(cps[0].Usage, &u); err != nil || u["total_tokens"] != 5 {
		t.Errorf("usage of step one = %s (%v)", cps[0].Usage, err)
	}
}

func TestFinishRecordsUsage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.queue(t, 1, "default")
	got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"default"}, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim = %d, %v", len(got), err)
	}
	out := "answer"
	if err := b.db.TaskFinishIfRunning(b.ctx, got[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded,
		Next: dao.TaskSucceeded, Output: &out, AttemptUsage: json.RawMessage(`{"total_tokens": 7}`),
		TaskUsage: json.RawMessage(`{"total_tokens": 12}`)}); err != nil {
		t.Fatal(err)
	}
	ti, err := b.db.TaskGet(b.ctx, got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	as, err := b.db.AttemptList(b.ctx, got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if ti.Usage == nil || string(*ti.Usage) != `{"total_tokens": 12}` {
		t.Errorf("task usage = %s, want total 12", deref(ti.Usage))
	}
	if len(as) != 1 || as[0].Usage == nil || string(*as[0].Usage) != `{"total_tokens": 7}` {
		t.Errorf("attempts = %d, usage %s; want one with total 7", len(as), deref(as[0].Usage))
	}
}

func deref(raw *json.RawMessage) string {
	if raw == nil {
		return "NULL"
	}
	return string(*raw)
}

// BenchmarkCheckpointSave is the write an agent makes after each step: one INSERT under the
// attempt's token, committed.
func BenchmarkCheckpointSave(b *testing.B) {
	db, _ := daotest.New(b)
	ctx := context.Background()
	wf := daotest.Submit(b, db, "wf", map[string]any{"name": "wf"})
	if _, err := db.WorkflowClaimUnowned(ctx, "m1", 1); err != nil {
		b.Fatal(err)
	}
	if _, err := db.TaskCreateMany(ctx, []dao.NewTask{{WorkflowInstanceID: wf, Name: "a", Type: "agent", State: dao.TaskQueued, Group: "default"}}); err != nil {
		b.Fatal(err)
	}
	got, err := db.TaskClaimQueued(ctx, "w1", []string{"default"}, 1)
	if err != nil || len(got) != 1 {
		b.Fatal(len(got), err)
	}
	tok := got[0].Token()
	usage := json.RawMessage(`{"prompt_tokens": 120, "completion_tokens": 80, "total_tokens": 200, "calls": 1}`)
	output := strings.Repeat("a completion of about a kilobyte ", 32)
	i := 0
	for b.Loop() {
		if err := db.CheckpointSaveIfRunning(ctx, tok, fmt.Sprintf("step%d", i), output, usage); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// TestFinishesOfManyPoolsNeverDeadlock: the pool counts are kept by a row trigger, which
// locks a task's pool row when the task stops running, in whatever order the statement
// changes its tasks. Two workers finishing, at once and over and over, batches with a task
// of each of two pools, one in the order a, b and the other b, a, would deadlock (PostgreSQL
// aborts one after a second) unless each finish locks its pools in name order first. A
// failover's requeue of a third worker's tasks of both pools runs among them.
func TestFinishesOfManyPoolsNeverDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const pairs = 60
	b.queuePooled(t, "t", 4*pairs+40, "", false)
	// Pools by turns, in insertion (and so physical) order: a, b, a, b, ...
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE task_instance SET pool = CASE WHEN id % 2 = 0 THEN 'a' ELSE 'b' END`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.SQL().ExecContext(b.ctx, `INSERT INTO task_pool (name) VALUES ('a'), ('b') ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	claim := func(worker string, n int) []dao.TaskInstance {
		t.Helper()
		got, err := b.db.TaskClaimQueued(b.ctx, worker, []string{"default"}, n)
		if err != nil || len(got) != n {
			t.Fatalf("claim for %s = %d tasks, %v; want %d", worker, len(got), err, n)
		}
		return got
	}
	byPool := func(ts []dao.TaskInstance) (a, b []dao.TaskInstance) {
		for _, ti := range ts {
			if *ti.Pool == "a" {
				a = append(a, ti)
			} else {
				b = append(b, ti)
			}
		}
		return a, b
	}
	a1, b1 := byPool(claim("w1", 2*pairs))
	a2, b2 := byPool(claim("w2", 2*pairs))
	claim("w3", 40)
	ok := dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	// Each finisher says when its first batch is through, so that the requeue starts among
	// the finishes, not before them.
	underway := make(chan struct{}, 2)
	run := func(first, second []dao.TaskInstance) {
		var once sync.Once
		started := func() { once.Do(func() { underway <- struct{}{} }) }
		defer started() // one that failed first must not hold the requeue back
		for i := range min(len(first), len(second)) {
			fins := []dao.Finish{{Token: first[i].Token(), Result: ok}, {Token: second[i].Token(), Result: ok}}
			if _, err := b.db.TaskFinishManyIfRunning(b.ctx, fins); err != nil {
				errs <- err
				return
			}
			started()
		}
	}
	wg.Go(func() { run(a1, b1) })
	wg.Go(func() { run(b2, a2) })
	wg.Go(func() {
		<-underway
		<-underway
		if _, err := b.db.TaskRequeueIfRunningOnWorker(b.ctx, "w3"); err != nil {
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for name, p := range b.pools(t) {
		if p.Running != 0 {
			t.Errorf("pool %s counts %d running, want 0", name, p.Running)
		}
	}
}
