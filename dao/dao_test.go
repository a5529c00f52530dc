package dao_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testenv"
)

type testBundle struct {
	db  *dao.DB
	ctx context.Context
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db, _ := daotest.New(t)
	return &testBundle{db: db, ctx: context.Background()}
}

// submitWithRoot stores raw (JSON, with a "name") as a definition and submits an instance
// of it, started with its root task "t" queued in group g with maxRetries retries.
func (b *testBundle) submitWithRoot(t *testing.T, raw, g string, maxRetries int) int64 {
	t.Helper()
	var id int64
	err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		var spec struct{ Name string }
		if err := json.Unmarshal([]byte(raw), &spec); err != nil {
			return err
		}
		v, err := q.DefinitionEnsure(b.ctx, spec.Name, []byte(raw), daotest.Facts(t, []byte(raw)))
		if err != nil {
			return err
		}
		id, err = q.WorkflowCreate(b.ctx, dao.Submission{Name: spec.Name, Version: v, Roots: []dao.NewTask{{Name: "t", Type: "noop", State: dao.TaskQueued, Group: g, MaxRetries: maxRetries}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// queue creates a workflow instance owned by "m1" with n queued tasks in group g.
func (b *testBundle) queue(t *testing.T, n int, g string) int64 {
	t.Helper()
	wf := daotest.Submit(t, b.db, "wf", map[string]any{"name": "wf"})
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	tasks := make([]dao.NewTask, n)
	for i := range tasks {
		tasks[i] = dao.NewTask{WorkflowInstanceID: wf, Name: fmt.Sprintf("t%d", i), Type: "noop", State: dao.TaskQueued, Group: g, MaxRetries: 1}
	}
	created, err := b.db.TaskCreateMany(b.ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != n {
		t.Fatalf("created %d tasks, want %d", len(created), n)
	}
	return wf
}

func TestMigrateConcurrentlyIsIdempotent(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	applied := make([][]string, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := dao.Open(context.Background(), pg.DSN, 2, zerolog.Nop())
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			applied[i], errs[i] = db.Migrate(context.Background())
		}()
	}
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrate %d: %v", i, err)
		}
		total += len(applied[i])
	}
	if total == 0 {
		t.Fatal("no migration applied")
	}
	db, err := dao.Open(context.Background(), pg.DSN, 2, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	again, err := db.Migrate(context.Background())
	if err != nil || len(again) != 0 {
		t.Fatalf("second migrate applied %v, %v; want nothing", again, err)
	}
}

func TestClaimUnderConcurrencyClaimsEachTaskOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const tasks, claimers = 500, 8
	b.queue(t, tasks, "g")
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := fmt.Sprintf("w%d", c)
			for {
				got, err := b.db.TaskClaimQueued(b.ctx, w, []string{"g"}, 7)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, ti := range got {
					if prev, dup := seen[ti.ID]; dup {
						t.Errorf("task %d claimed by %s and %s", ti.ID, prev, w)
					}
					seen[ti.ID] = w
					if ti.State != dao.TaskRunning || ti.Attempt != 1 || *ti.WorkerID != w {
						t.Errorf("claimed task = %+v; want running, attempt 1, worker %s", ti, w)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != tasks {
		t.Fatalf("claimed %d distinct tasks, want %d", len(seen), tasks)
	}
	var attempts int
	if err := b.db.SQL().Get(&attempts, "SELECT count(*) FROM task_attempt"); err != nil || attempts != tasks {
		t.Fatalf("task_attempt rows = %d, %v; want %d", attempts, err, tasks)
	}
}

func TestClaimHonoursGroupsAndPriority(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.queue(t, 1, "other")
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{
		{WorkflowInstanceID: wf, Name: "low", Type: "noop", State: dao.TaskQueued, Group: "g", Priority: 1},
		{WorkflowInstanceID: wf, Name: "high", Type: "noop", State: dao.TaskQueued, Group: "g", Priority: 5},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := b.db.TaskClaimQueued(b.ctx, "w", []string{"g"}, 1)
	if err != nil || len(got) != 1 || got[0].Name != "high" {
		t.Fatalf("claim = %+v, %v; want the high-priority task", got, err)
	}
	got, err = b.db.TaskClaimQueued(b.ctx, "w", []string{"g"}, 10)
	if err != nil || len(got) != 1 || got[0].Name != "low" {
		t.Fatalf("second claim = %+v, %v; want only the low-priority task of group g", got, err)
	}
}

func TestFinishRefusesAStaleToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.queue(t, 1, "g")
	first, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 1)
	if err != nil || len(first) != 1 {
		t.Fatalf("claim: %v %v", first, err)
	}
	stale := first[0].Token()
	// The attempt is handed back, and another worker claims the task: attempt 2.
	if err := b.db.TaskFinishIfRunning(b.ctx, stale, dao.AttemptResult{Outcome: dao.OutcomeHandedBack, Next: dao.TaskQueued}); err != nil {
		t.Fatal(err)
	}
	second, err := b.db.TaskClaimQueued(b.ctx, "w2", []string{"g"}, 1)
	if err != nil || len(second) != 1 || second[0].Attempt != 2 {
		t.Fatalf("reclaim = %+v, %v; want attempt 2", second, err)
	}
	out := "late"
	for name, write := range map[string]func() error{
		"finish": func() error {
			return b.db.TaskFinishIfRunning(b.ctx, stale, dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded, Output: &out})
		},
		"log": func() error { return b.db.TaskLogAppendIfRunning(b.ctx, stale, 0, "late output") },
		"wrong worker": func() error {
			tok := second[0].Token()
			tok.WorkerID = "w1"
			return b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded})
		},
	} {
		if err := write(); !errors.Is(err, dao.ErrTokenRefused) {
			t.Errorf("%s with a stale token: err = %v, want ErrTokenRefused", name, err)
		}
	}
	if err := b.db.TaskLogAppendIfRunning(b.ctx, second[0].Token(), 0, "hello\n"); err != nil {
		t.Fatal(err)
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, second[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
		t.Fatal(err)
	}
	// A second finish of the same attempt is refused too: the result is committed once.
	if err := b.db.TaskFinishIfRunning(b.ctx, second[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskFailed}); !errors.Is(err, dao.ErrTokenRefused) {
		t.Fatalf("second finish: err = %v, want ErrTokenRefused", err)
	}
	ti, err := b.db.TaskGet(b.ctx, stale.TaskID)
	if err != nil || ti.State != dao.TaskSucceeded || ti.Output != nil || ti.Attempt != 2 {
		t.Fatalf("task = %+v, %v; want succeeded by attempt 2 with no output", ti, err)
	}
	atts, err := b.db.AttemptList(b.ctx, stale.TaskID)
	if err != nil || len(atts) != 2 || *atts[0].Outcome != dao.OutcomeHandedBack || *atts[1].Outcome != dao.OutcomeSucceeded {
		t.Fatalf("attempts = %+v, %v", atts, err)
	}
	log1, _ := b.db.TaskLogRead(b.ctx, stale.TaskID, 1)
	log2, _ := b.db.TaskLogRead(b.ctx, stale.TaskID, 2)
	if log1 != "" || log2 != "hello\n" {
		t.Fatalf("logs = %q, %q; want the stale attempt's refused", log1, log2)
	}
}

func TestRetryDelaysTheNextClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.queue(t, 1, "g")
	if _, err := b.db.SQL().Exec("UPDATE task_instance SET retry_interval = '1 hour' WHERE workflow_instance_id = $1", wf); err != nil {
		t.Fatal(err)
	}
	got, _ := b.db.TaskClaimQueued(b.ctx, "w", []string{"g"}, 1)
	if err := b.db.TaskFinishIfRunning(b.ctx, got[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskQueued, Retry: true, Error: "exit 1"}); err != nil {
		t.Fatal(err)
	}
	again, err := b.db.TaskClaimQueued(b.ctx, "w", []string{"g"}, 1)
	if err != nil || len(again) != 0 {
		t.Fatalf("claim during the retry interval = %v, %v; want nothing", again, err)
	}
	ti, _ := b.db.TaskGet(b.ctx, got[0].ID)
	if ti.State != dao.TaskQueued || ti.Retries != 1 || ti.NotBefore == nil || time.Until(*ti.NotBefore) < 59*time.Minute {
		t.Fatalf("task = %+v; want queued, 1 retry used, not before an hour from now", ti)
	}
}

func TestInsertManyIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.queue(t, 2, "g")
	created, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{
		{WorkflowInstanceID: wf, Name: "t0", Type: "noop", State: dao.TaskQueued, Group: "g"},
		{WorkflowInstanceID: wf, Name: "t9", Type: "shell", State: dao.TaskSkipped, Group: "g", Timeout: 90 * time.Second, Pool: "p"},
	})
	if err != nil || len(created) != 1 || created[0] != "t9" {
		t.Fatalf("created = %v, %v; want only t9", created, err)
	}
	tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
	if err != nil || len(tasks) != 3 {
		t.Fatalf("tasks = %v, %v", tasks, err)
	}
	t9 := tasks[2]
	if t9.State != dao.TaskSkipped || t9.EndedAt == nil || t9.Timeout() != 90*time.Second || *t9.Pool != "p" {
		t.Fatalf("t9 = %+v", t9)
	}
}

func TestDefinitionVersions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ensure := func(spec string) int {
		var v int
		err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
			var err error
			v, err = q.DefinitionEnsure(b.ctx, "d", []byte(spec), daotest.Facts(t, []byte(spec)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i, c := range []struct {
		spec string
		want int
	}{{`{"a":1}`, 1}, {`{"a": 1}`, 1}, {`{"a":2}`, 2}, {`{"a":1}`, 3}, {`{"a":1}`, 3}} {
		if got := ensure(c.spec); got != c.want {
			t.Errorf("step %d: ensure(%s) = %d, want %d", i, c.spec, got, c.want)
		}
	}
}

func TestWorkflowOwnership(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := daotest.Submit(t, b.db, "wf", map[string]any{})
	got, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10)
	if err != nil || len(got) != 1 || got[0].ID != id || *got[0].Owner != "m1" || got[0].State != dao.WorkflowRunning {
		t.Fatalf("claim = %+v, %v", got, err)
	}
	if more, _ := b.db.WorkflowClaimUnowned(b.ctx, "m2", 10); len(more) != 0 {
		t.Fatalf("m2 claimed an owned instance: %+v", more)
	}
	err = b.db.Tx(b.ctx, func(q *dao.Queries) error {
		_, err := q.WorkflowLockIfOwned(b.ctx, id, "m2")
		return err
	})
	if !errors.Is(err, dao.ErrNotOwner) {
		t.Fatalf("lock by a non-owner: %v, want ErrNotOwner", err)
	}
	if err := b.db.WorkflowFinishIfOwned(b.ctx, id, "m2", dao.WorkflowSucceeded, ""); !errors.Is(err, dao.ErrNotOwner) {
		t.Fatalf("finish by a non-owner: %v, want ErrNotOwner", err)
	}
	if err := b.db.WorkflowFinishIfOwned(b.ctx, id, "m1", dao.WorkflowSucceeded, ""); err != nil {
		t.Fatal(err)
	}
	if ids, _ := b.db.WorkflowListOwnedActive(b.ctx, "m1"); len(ids) != 0 {
		t.Fatalf("finished instance still listed as active: %v", ids)
	}
}

func TestNotifyWakesListeners(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ml := b.db.ListenMaster(zerolog.Nop())
	defer ml.Close()
	// A worker's two listeners share one connection; each hears its own channel only.
	tl, kl := b.db.ListenWorker(zerolog.Nop())
	defer tl.Close()
	defer kl.Close()
	// Each connection LISTENs in the background, one channel after the other; once the server
	// listens on all of them, each of its listeners is told to look at everything, for what
	// was announced before. Nothing has been announced since.
	deadline := time.After(10 * time.Second)
	for _, c := range []<-chan dao.Wakeup{ml.C, tl.C, kl.C} {
		select {
		case w := <-c:
			if !w.Rescan {
				t.Fatalf("heard %+v first; want a rescan once listening", w)
			}
		case <-deadline:
			t.Fatal("a listener was never told it listens")
		}
	}
	daotest.Submit(t, b.db, "wf", map[string]any{})
	select {
	case <-ml.C:
	case <-deadline:
		t.Fatal("master listener heard no submit")
	}
	b.queue(t, 1, "gpu")
	for heard := false; !heard; {
		select {
		case w := <-tl.C:
			heard = w.Payload == "gpu"
		case w := <-kl.C:
			t.Fatalf("kill listener heard a queued task: %+v", w)
		case <-deadline:
			t.Fatal("task listener heard no queued task")
		}
	}
	got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"gpu"}, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	if _, err := b.db.TaskKillIfQueuedOrRunning(b.ctx, got[0].ID); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case w := <-kl.C:
			if w.Payload == "w1" {
				return
			}
		case w := <-tl.C:
			t.Fatalf("task listener heard a kill request: %+v", w)
		case <-deadline:
			t.Fatal("kill listener heard no kill request")
		}
	}
}

func TestWorkflowBatchStatementsRespectOwnership(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []int64
	for range 3 {
		ids = append(ids, daotest.Submit(t, b.db, "wf", map[string]any{}))
	}
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 2); err != nil { // ids[0], ids[1]
		t.Fatal(err)
	}
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m2", 1); err != nil { // ids[2]
		t.Fatal(err)
	}
	err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		wfs, err := q.WorkflowLockManyIfOwned(b.ctx, ids, "m1")
		if err != nil {
			return err
		}
		if len(wfs) != 2 || wfs[0].ID != ids[0] || wfs[1].ID != ids[1] {
			t.Errorf("locked %+v, want m1's two instances", wfs)
		}
		n, err := q.WorkflowFinishManyIfOwnedOrUnowned(b.ctx, "m1", []dao.WorkflowFinish{
			{ID: ids[0], State: dao.WorkflowSucceeded},
			{ID: ids[1], State: dao.WorkflowFailed, Error: "task x failed"},
			{ID: ids[2], State: dao.WorkflowSucceeded}, // m2's: must be left alone
		})
		if err != nil || n != 2 {
			t.Errorf("finished %d, %v; want 2", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []dao.WorkflowState{dao.WorkflowSucceeded, dao.WorkflowFailed, dao.WorkflowRunning} {
		wf, err := b.db.WorkflowGet(b.ctx, ids[i])
		if err != nil || wf.State != want {
			t.Errorf("instance %d is %v (%v), want %s", ids[i], wf.State, err, want)
		}
	}
	if wf, _ := b.db.WorkflowGet(b.ctx, ids[1]); wf.Error == nil || *wf.Error != "task x failed" || wf.EndedAt == nil {
		t.Errorf("failed instance = %+v", wf)
	}
}

// TestFinishManyRecordsEachAttemptByItsOwnToken checks the completer's batch write: in one
// statement, each attempt is recorded only under its own token, a stale one is refused without
// disturbing the others, and the masters get one wake-up naming every workflow instance whose
// tasks ended.
func TestFinishManyRecordsEachAttemptByItsOwnToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ml := b.db.ListenMaster(zerolog.Nop())
	defer ml.Close()
	wfA := b.queue(t, 2, "g")
	wfB := b.queue(t, 1, "g")
	got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("claim = %d tasks, %v; want 3", len(got), err)
	}
	masterListening(t, b, ml)
	stale := got[2].Token()
	stale.Attempt++ // an attempt that does not hold the task
	out := "ok"
	done, err := b.db.TaskFinishManyIfRunning(b.ctx, []dao.Finish{
		{Token: got[0].Token(), Result: dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded, Output: &out}},
		{Token: got[1].Token(), Result: dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskQueued, Retry: true, Error: "boom"}},
		{Token: stale, Result: dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}},
	})
	if err != nil || len(done) != 3 || !done[0].Recorded || !done[1].Recorded || done[2].Recorded {
		t.Fatalf("done = %v, %v; want [true true false]", done, err)
	}
	for i, want := range []dao.TaskState{dao.TaskSucceeded, dao.TaskQueued, dao.TaskRunning} {
		ti, err := b.db.TaskGet(b.ctx, got[i].ID)
		if err != nil || ti.State != want {
			t.Fatalf("task %d: %+v, %v; want %s", i, ti, err, want)
		}
	}
	ti, _ := b.db.TaskGet(b.ctx, got[1].ID)
	if ti.Retries != 1 || ti.Error == nil || *ti.Error != "boom" {
		t.Fatalf("retried task = %+v; want retries 1 and its error", ti)
	}
	atts, err := b.db.AttemptList(b.ctx, got[2].ID)
	if err != nil || len(atts) != 1 || atts[0].Outcome != nil {
		t.Fatalf("attempts of the refused task = %+v, %v; want one, still open", atts, err)
	}
	// got[0] ended (wake its master); got[1] went back to the queue (wakes workers, not masters).
	want := fmt.Sprint(got[0].WorkflowInstanceID)
	select {
	case w := <-ml.C:
		if w.Payload != want {
			t.Fatalf("master wake-up %q, want %q (instances %d and %d)", w.Payload, want, wfA, wfB)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no master wake-up")
	}
	// The refused task and the third instance still finish by themselves.
	if err := b.db.TaskFinishIfRunning(b.ctx, got[2].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
		t.Fatal(err)
	}
}

// TestWakeUpsFollowTheCommit checks the notifier: a transaction's wake-ups are sent once it
// has committed, and never for one that rolled back.
func TestWakeUpsFollowTheCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ml := b.listenMaster(t)
	raw := []byte(`{"name":"wf"}`)
	rolledBack := errors.New("roll back")
	err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(b.ctx, "wf", raw, dao.DefinitionFacts{})
		if err != nil {
			return err
		}
		if _, err := q.WorkflowCreate(b.ctx, dao.Submission{Name: "wf", Version: v}); err != nil {
			return err
		}
		return rolledBack
	})
	if !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	select {
	case w := <-ml.C:
		t.Fatalf("a rolled-back submission woke the masters: %+v", w)
	case <-time.After(500 * time.Millisecond):
	}
	var id int64
	err = b.db.Tx(b.ctx, func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(b.ctx, "wf", raw, dao.DefinitionFacts{})
		if err != nil {
			return err
		}
		id, err = q.WorkflowCreate(b.ctx, dao.Submission{Name: "wf", Version: v})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-ml.C:
		// Woken, the instance must be there to be claimed.
		got, err := b.db.WorkflowClaimUnowned(b.ctx, "m9", 100)
		if err != nil || !slices.ContainsFunc(got, func(wf dao.WorkflowInstance) bool { return wf.ID == id }) {
			t.Fatalf("woken (%+v) but instance %d not claimable: %d claimed, %v", w, id, len(got), err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a committed submission did not wake the masters")
	}
}

// listenMaster listens as a master does until the test ends, and returns once the listener
// hears (see masterListening).
func (b *testBundle) listenMaster(t *testing.T) *dao.Listener {
	t.Helper()
	ml := b.db.ListenMaster(zerolog.Nop())
	t.Cleanup(func() { ml.Close() })
	masterListening(t, b, ml)
	return ml
}

// masterListening waits until ml hears the masters' wake-ups, then drops every wake-up sent
// before it returns, so that the test sees only the wake-ups that follow. It sends marks
// through the notifier: one every 100 ms until one is heard (a mark sent before the listener
// listens is lost); then one, heard once it and every wake-up queued before it have
// committed (in its statement or an earlier one); then a last one, which commits after all of
// them and so is heard after them.
func masterListening(t *testing.T, b *testBundle, ml *dao.Listener) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	mark := func(phase int) string { return fmt.Sprintf("mark-%d-%d", phase, time.Now().UnixNano()) }
	heard := func(w dao.Wakeup, phase int) bool {
		return strings.HasPrefix(w.Payload, fmt.Sprintf("mark-%d-", phase))
	}
	for listening := false; !listening; {
		b.db.WakeMasters(mark(0))
		select {
		case w := <-ml.C:
			listening = heard(w, 0)
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("master listener never heard")
		}
	}
	for phase := 1; phase <= 2; phase++ {
		want := mark(phase)
		b.db.WakeMasters(want)
		for got := false; !got; {
			select {
			case w := <-ml.C:
				got = w.Payload == want
			case <-deadline:
				t.Fatalf("master listener never heard the mark %s", want)
			}
		}
	}
}

// TestWorkflowCreateWakeups checks the submission's one statement: a missing definition is an
// error that creates nothing; an uncapped instance wakes the masters with WakeupNew (claim
// only) and a capped one with "" (claim and admit waiting instances); a claim says which
// instances never started (and so have no task instances to list).
func TestWorkflowCreateWakeups(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ml := b.listenMaster(t)

	_, err := b.db.WorkflowCreate(b.ctx, dao.Submission{Name: "never-defined", Version: 1})
	if err == nil || !strings.Contains(err.Error(), "no such definition") {
		t.Fatalf("create without a definition: %v", err)
	}
	var n int
	if err := b.db.SQL().GetContext(b.ctx, &n, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'never-defined'`); err != nil || n != 0 {
		t.Fatalf("instances after a failed create: %d, %v", n, err)
	}

	next := func() string {
		t.Helper()
		select {
		case w := <-ml.C:
			return w.Payload
		case <-time.After(5 * time.Second):
			t.Fatal("no wake-up")
			return ""
		}
	}
	create := func(name, raw string) int64 {
		t.Helper()
		var id int64
		err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
			v, err := q.DefinitionEnsure(b.ctx, name, []byte(raw), daotest.Facts(t, []byte(raw)))
			if err != nil {
				return err
			}
			id, err = q.WorkflowCreate(b.ctx, dao.Submission{Name: name, Version: v})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	free := create("free", `{"name":"free"}`)
	if p := next(); p != dao.WakeupNew {
		t.Fatalf("uncapped instance woke the masters with %q, want %q", p, dao.WakeupNew)
	}
	create("capped", `{"name":"capped","max-active-instances":1}`)
	if p := next(); p != "" {
		t.Fatalf("capped instance woke the masters with %q, want \"\"", p)
	}

	claimed := func(owner string, claim func(ctx context.Context, owner string, limit int) ([]dao.WorkflowInstance, error)) *dao.WorkflowInstance {
		t.Helper()
		got, err := claim(b.ctx, owner, 100)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i].ID == free {
				return &got[i]
			}
		}
		return nil
	}
	if wf := claimed("m1", b.db.WorkflowClaimUnowned); wf == nil || !wf.Fresh {
		t.Fatalf("a new instance claimed as %+v, want fresh", wf)
	}
	// Released by a failover after it started, with no task running (none was ever
	// created), it is claimed again as not fresh, by the sweep: a running instance without a
	// timeout waits for a task of it to end otherwise. (A failover comes a session timeout
	// at least after its master's last contact; the sweep leaves instances younger than
	// dao.StrandedAfter alone.)
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE workflow_instance SET owner = NULL,
		started_at = now() - interval '1 minute' WHERE id = $1`, free); err != nil {
		t.Fatal(err)
	}
	if wf := claimed("m2", b.db.WorkflowClaimUnowned); wf != nil {
		t.Fatalf("the claim of new instances took a released running one: %+v", wf)
	}
	if wf := claimed("m2", sweep(b)); wf == nil || wf.Fresh {
		t.Fatalf("the sweep claimed the released instance as %+v, want not fresh", wf)
	}
}

// TestSubmitSharesStatements checks DB.WorkflowCreateGrouped: concurrent submissions each get their own
// instance, started with its own root task instances and woken workers; a missing definition
// and a malformed params document fail alone, without losing the submissions batched with
// them; a capped definition's instance waits for admission without roots, and at a full
// when-full: skip workflow nothing is created.
func TestSubmitSharesStatements(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tasks, kills := b.db.ListenWorker(zerolog.Nop())
	defer tasks.Close()
	defer kills.Close()
	define := func(name, raw string) int {
		t.Helper()
		v, err := b.db.DefinitionEnsure(b.ctx, name, []byte(raw), daotest.Facts(t, []byte(raw)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := define("sub", `{"name":"sub"}`)
	roots := func(k int) []dao.NewTask {
		return []dao.NewTask{
			{Name: "a", Type: "noop", State: dao.TaskQueued, Group: "ga", Priority: k, Params: json.RawMessage(fmt.Sprintf(`{"k":%d}`, k))},
			{Name: "b", Type: "noop", State: dao.TaskQueued, Group: "gb", Priority: k, Pool: "p", MaxRetries: 2,
				RetryInterval: 1500 * time.Millisecond, Timeout: time.Minute},
		}
	}
	// A listener that hears a wake-up of each group has heard them all; without one, the
	// workers of a root's group would wait for their poll.
	woken := map[string]bool{}
	listen := func() {
		t.Helper()
		for deadline := time.After(10 * time.Second); !woken["ga"] || !woken["gb"]; {
			select {
			case w := <-tasks.C:
				woken[w.Payload] = true
			case <-deadline:
				t.Fatalf("workers woken for %v, want ga and gb", woken)
			}
		}
	}

	const n = 60
	ids := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() {
			sub := dao.Submission{Name: "sub", Version: v, Priority: k, Params: json.RawMessage(fmt.Sprintf(`{"k":"%d"}`, k)), Roots: roots(k)}
			switch k {
			case 7:
				sub.Name = "never-defined"
			case 8:
				sub.Params = json.RawMessage(`{"k":`)
			}
			ids[k], errs[k] = b.db.WorkflowCreateGrouped(b.ctx, sub)
		})
	}
	wg.Wait()
	listen()
	seen := map[int64]bool{}
	for k := range n {
		switch {
		case k == 7:
			if errs[k] == nil || !strings.Contains(errs[k].Error(), "no such definition") {
				t.Errorf("submission of a missing definition: %v", errs[k])
			}
			continue
		case k == 8:
			if errs[k] == nil || !strings.Contains(errs[k].Error(), "json") {
				t.Errorf("submission with malformed params: %v", errs[k])
			}
			continue
		case errs[k] != nil:
			t.Fatalf("submission %d: %v", k, errs[k])
		case seen[ids[k]]:
			t.Fatalf("submission %d got instance %d twice", k, ids[k])
		}
		seen[ids[k]] = true
		var wf struct {
			State    string  `db:"state"`
			Owner    *string `db:"owner"`
			Started  bool    `db:"started"`
			Priority int     `db:"priority"`
			K        string  `db:"k"`
		}
		if err := b.db.SQL().GetContext(b.ctx, &wf, `SELECT state, owner, started_at IS NOT NULL AS started, priority,
			params->>'k' AS k FROM workflow_instance WHERE id = $1`, ids[k]); err != nil {
			t.Fatal(err)
		}
		if wf.State != "running" || wf.Owner != nil || !wf.Started || wf.Priority != k || wf.K != fmt.Sprint(k) {
			t.Errorf("instance of submission %d = %+v, want running, no owner, started, priority and params its own", k, wf)
		}
		var ts []struct {
			Name      string  `db:"name"`
			State     string  `db:"state"`
			Group     string  `db:"worker_group"`
			Priority  int     `db:"priority"`
			Pool      *string `db:"pool"`
			Retries   int     `db:"max_retries"`
			RetryMs   int64   `db:"retry_ms"`
			TimeoutMs *int64  `db:"timeout_ms"`
			Params    string  `db:"params"`
		}
		if err := b.db.SQL().SelectContext(b.ctx, &ts, `SELECT name, state, worker_group, priority, pool, max_retries,
			(extract(epoch FROM retry_interval) * 1000)::bigint AS retry_ms, (extract(epoch FROM timeout) * 1000)::bigint AS timeout_ms,
			params::text AS params FROM task_instance WHERE workflow_instance_id = $1 ORDER BY name`, ids[k]); err != nil {
			t.Fatal(err)
		}
		if len(ts) != 2 || ts[0].Name != "a" || ts[0].State != "queued" || ts[0].Group != "ga" || ts[0].Priority != k ||
			ts[0].Params != fmt.Sprintf(`{"k": %d}`, k) || ts[0].Pool != nil || ts[0].TimeoutMs != nil ||
			ts[1].Name != "b" || ts[1].Group != "gb" || ts[1].Pool == nil || *ts[1].Pool != "p" || ts[1].Retries != 2 ||
			ts[1].RetryMs != 1500 || ts[1].TimeoutMs == nil || *ts[1].TimeoutMs != 60000 {
			t.Errorf("roots of submission %d = %+v", k, ts)
		}
	}
	var total int
	if err := b.db.SQL().GetContext(b.ctx, &total, `SELECT count(*) FROM workflow_instance`); err != nil || total != n-2 {
		t.Errorf("%d instances, %v; want %d", total, err, n-2)
	}

	// Capped: no roots until a master admits it; full with when-full: skip: nothing created.
	vc := define("capped-sub", `{"name":"capped-sub","max-active-instances":1,"when-full":"skip"}`)
	sub := dao.Submission{Name: "capped-sub", Version: vc, Roots: roots(0)}
	id, err := b.db.WorkflowCreateGrouped(b.ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	var st string
	var nt int
	if err := b.db.SQL().QueryRowContext(b.ctx, `SELECT state, (SELECT count(*) FROM task_instance WHERE workflow_instance_id = $1)
		FROM workflow_instance WHERE id = $1`, id).Scan(&st, &nt); err != nil || st != "submitted" || nt != 0 {
		t.Errorf("capped instance: %s with %d tasks, %v; want submitted with none", st, nt, err)
	}
	if _, err := b.db.WorkflowCreateGrouped(b.ctx, sub); !errors.Is(err, dao.ErrWorkflowFull) {
		t.Errorf("submission to a full skip workflow: %v, want ErrWorkflowFull", err)
	}
	if err := b.db.SQL().GetContext(b.ctx, &nt, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'capped-sub'`); err != nil || nt != 1 {
		t.Errorf("%d capped instances, %v; want 1", nt, err)
	}
}

// TestSubmitAfterCloseOrCancel: a submission whose context has ended, or to a closed DB,
// returns an error at once and creates nothing.
func TestSubmitAfterCloseOrCancel(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	db, err := dao.Open(context.Background(), pg.DSN, 4, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v, err := db.DefinitionEnsure(ctx, "late", []byte(`{"name":"late"}`), dao.DefinitionFacts{})
	if err != nil {
		t.Fatal(err)
	}
	sub := dao.Submission{Name: "late", Version: v, Roots: []dao.NewTask{{Name: "a", Type: "noop", State: dao.TaskQueued, Group: "g"}}}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.WorkflowCreateGrouped(cancelled, sub); !errors.Is(err, context.Canceled) {
		t.Errorf("submit with an ended context: %v, want context.Canceled", err)
	}
	var n int
	if err := db.SQL().GetContext(ctx, &n, `SELECT count(*) FROM workflow_instance`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := db.WorkflowCreateGrouped(ctx, sub); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("submit to a closed DB: %v", err)
	}
	if n != 0 {
		t.Errorf("%d instances after a cancelled submission, want 0", n)
	}
}

// TestClaimLeavesStartedInstancesToTheirTasks checks which unowned instances the masters'
// claims take. An instance that started with its root task queued is left to that task (its
// end wakes a master, which locks the instance by id) unless its workflow has a timeout,
// which an owner must enforce even if the task hangs; the sweep takes it once no task of it
// is queued or running. Locked by id, it is finished in one update that names the master.
func TestClaimLeavesStartedInstancesToTheirTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	submit := func(raw string) int64 { return b.submitWithRoot(t, raw, "lazy", 0) }
	plain := submit(`{"name":"plain"}`)
	timed := submit(`{"name":"timed","timeout":"1m0s"}`)
	ids := func(wfs []dao.WorkflowInstance, err error) []int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, wf := range wfs {
			out = append(out, wf.ID)
		}
		return out
	}
	if got := ids(b.db.WorkflowClaimUnowned(b.ctx, "m1", 100)); !slices.Equal(got, []int64{timed}) {
		t.Fatalf("claim took %v, want only the timed instance %d", got, timed)
	}
	if got := ids(sweep(b)(b.ctx, "m1", 100)); len(got) != 0 {
		t.Fatalf("the sweep took %v, whose task is queued", got)
	}

	// Its task ends while no master listens: the sweep takes it.
	tasks, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"lazy"}, 1)
	if err != nil || len(tasks) != 1 || tasks[0].WorkflowInstanceID != plain {
		t.Fatalf("task claim = %+v, %v", tasks, err)
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, tasks[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
		t.Fatal(err)
	}
	if got := ids(sweep(b)(b.ctx, "m2", 100)); len(got) != 0 {
		t.Fatalf("the sweep took %v, whose task just ended (its wake-up may be on its way)", got)
	}
	backdate(t, b, plain)
	err = b.db.Tx(b.ctx, func(q *dao.Queries) error {
		upto, n, err := q.WorkflowSweepRange(b.ctx, 0, 2)
		if err != nil || n != 1 || upto != plain {
			return fmt.Errorf("sweep range = %d, %d, %v; want the one unowned instance, %d", upto, n, err, plain)
		}
		if got := ids(q.WorkflowClaimStranded(b.ctx, "m2", 0, upto)); !slices.Equal(got, []int64{plain}) {
			return fmt.Errorf("the sweep took %v, want %d", got, plain)
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatal(err)
	}

	// Locked by id and finished: one update, owned by the master that finished it. An
	// instance another master owns is not locked.
	err = b.db.Tx(b.ctx, func(q *dao.Queries) error {
		if got := ids(q.WorkflowLockUnowned(b.ctx, []int64{plain, timed})); !slices.Equal(got, []int64{plain}) {
			return fmt.Errorf("lock by id took %v, want %d", got, plain)
		}
		n, err := q.WorkflowFinishManyIfOwnedOrUnowned(b.ctx, "m3", []dao.WorkflowFinish{{ID: plain, State: dao.WorkflowSucceeded}})
		if err != nil || n != 1 {
			return fmt.Errorf("finish = %d, %v", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := b.db.WorkflowGet(b.ctx, plain)
	if err != nil || wf.State != dao.WorkflowSucceeded || wf.Owner == nil || *wf.Owner != "m3" || wf.EndedAt == nil {
		t.Fatalf("finished instance = %+v, %v", wf, err)
	}
	if got := ids(sweep(b)(b.ctx, "m2", 100)); len(got) != 0 {
		t.Fatalf("the sweep took %v after the finish", got)
	}
	// The slice after the last instance is empty: the sweep starts over.
	if upto, n, err := b.db.WorkflowSweepRange(b.ctx, timed, 100); err != nil || n != 0 || upto != 0 {
		t.Fatalf("sweep range past the end = %d, %d, %v", upto, n, err)
	}
}

// TestFinishEndsAWorkflowOfOneTask: the statement that records a task's end also ends its
// workflow instance when that task is the whole workflow and no master has a say (no owner,
// no cap, no timeout): succeeded or failed as a master would, and without a master wake-up.
// Every other instance is left running and its masters are woken with its id; one whose row
// somebody holds is skipped at once, never waited for.
func TestFinishEndsAWorkflowOfOneTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ml := b.listenMaster(t)
	submit := func(spec string) int64 { return b.submitWithRoot(t, spec, "end", 1) }
	const one = `{"name":"one","tasks":[{"name":"t","type":"noop"}]}`
	succeeds, fails, retries := submit(one), submit(one), submit(one)
	owned, held := submit(one), submit(one)
	timed := submit(`{"name":"timed","timeout":"1h0m0s","tasks":[{"name":"t","type":"noop"}]}`)
	two := submit(`{"name":"two","tasks":[{"name":"t","type":"noop"},{"name":"u","type":"noop","depends-on":["t"]}]}`)
	err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		if _, err := q.WorkflowLockUnowned(b.ctx, []int64{owned}); err != nil {
			return err
		}
		return q.WorkflowTakeIfUnowned(b.ctx, "m1", []int64{owned})
	})
	if err != nil {
		t.Fatal(err)
	}
	// A capped instance, admitted and started by a master that was then lost: ending it frees
	// a slot of its workflow, which only a master can give to the next instance.
	capped := submit(`{"name":"capped","max-active-instances":1,"tasks":[{"name":"t","type":"noop"}]}`)
	if got, err := b.db.WorkflowAdmitIfUnderCap(b.ctx, "m2", 10); err != nil || len(got) != 1 || got[0].ID != capped {
		t.Fatalf("admission = %+v, %v; want instance %d", got, err, capped)
	}
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{{WorkflowInstanceID: capped, Name: "t", Type: "noop",
		State: dao.TaskQueued, Group: "end"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.db.WorkflowReleaseIfOwnedBy(b.ctx, "m2"); err != nil || n != 1 {
		t.Fatalf("release = %d, %v", n, err)
	}
	for deadline := time.After(5 * time.Second); ; {
		select {
		case w := <-ml.C:
			if w.Payload != fmt.Sprint(capped) {
				continue
			}
		case <-deadline:
			t.Fatalf("no wake-up for the released instance %d", capped)
		}
		break
	}
	tasks, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"end"}, 10)
	if err != nil || len(tasks) != 8 {
		t.Fatalf("claim = %d tasks, %v; want 8", len(tasks), err)
	}
	// Somebody (a stop, a master) holds one instance's row and waits for nothing of ours.
	holder, err := b.db.SQL().BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(b.ctx, `SELECT 1 FROM workflow_instance WHERE id = $1 FOR UPDATE`, held); err != nil {
		t.Fatal(err)
	}
	succeeded := dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}
	results := map[int64]dao.AttemptResult{
		succeeds: succeeded, owned: succeeded, held: succeeded, timed: succeeded, two: succeeded, capped: succeeded,
		fails:   {Outcome: dao.OutcomeFailed, Next: dao.TaskFailed, Error: "exit 1"},
		retries: {Outcome: dao.OutcomeFailed, Next: dao.TaskQueued, Retry: true, Error: "exit 1"},
	}
	var fins []dao.Finish
	for _, ti := range tasks {
		fins = append(fins, dao.Finish{Token: ti.Token(), Result: results[ti.WorkflowInstanceID]})
	}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	out, err := b.db.TaskFinishManyIfRunning(ctx, fins)
	cancel()
	if err != nil {
		t.Fatalf("finish (one instance's row held elsewhere): %v", err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	ended := map[int64]dao.WorkflowState{}
	for i, f := range out {
		if !f.Recorded {
			t.Fatalf("finish %d not recorded", i)
		}
		if f.Workflow != "" {
			ended[tasks[i].WorkflowInstanceID] = f.Workflow
		}
	}
	if want := map[int64]dao.WorkflowState{succeeds: dao.WorkflowSucceeded, fails: dao.WorkflowFailed}; !maps.Equal(ended, want) {
		t.Fatalf("ended instances %v, want %v", ended, want)
	}
	for id, want := range map[int64]dao.WorkflowState{succeeds: dao.WorkflowSucceeded, fails: dao.WorkflowFailed,
		retries: dao.WorkflowRunning, owned: dao.WorkflowRunning, held: dao.WorkflowRunning,
		timed: dao.WorkflowRunning, two: dao.WorkflowRunning, capped: dao.WorkflowRunning} {
		wf, err := b.db.WorkflowGet(b.ctx, id)
		if err != nil || wf.State != want {
			t.Fatalf("instance %d = %+v, %v; want %s", id, wf, err, want)
		}
		if want == dao.WorkflowRunning {
			continue
		}
		if wf.Owner != nil || wf.EndedAt == nil {
			t.Errorf("ended instance %d: owner %v, ended_at %v; want no owner and an end", id, wf.Owner, wf.EndedAt)
		}
	}
	if wf, _ := b.db.WorkflowGet(b.ctx, fails); wf.Error == nil || *wf.Error != "tasks did not succeed: t failed" {
		t.Errorf("failed instance's error = %v", wf.Error)
	}
	// The masters hear of every instance whose task ended and that is still theirs to end.
	woken := map[int64]bool{}
	for deadline := time.After(5 * time.Second); len(woken) < 5; {
		select {
		case w := <-ml.C:
			for _, f := range strings.Split(w.Payload, ",") {
				var id int64
				if _, err := fmt.Sscan(f, &id); err == nil {
					woken[id] = true
				}
			}
		case <-deadline:
			t.Fatalf("masters woken for %v, want %d, %d, %d, %d and %d", woken, owned, held, timed, two, capped)
		}
	}
	select {
	case w := <-ml.C:
		t.Fatalf("a further wake-up %q", w.Payload)
	case <-time.After(200 * time.Millisecond):
	}
	if want := map[int64]bool{owned: true, held: true, timed: true, two: true, capped: true}; !maps.Equal(woken, want) {
		t.Fatalf("masters woken for %v, want %v", woken, want)
	}
}

// TestCappedInstanceKeepsItsTimeout: an instance of a capped workflow with when-full: skip
// (created under the admission lock, not by the bulk statement) knows its workflow has a
// timeout, so once a failover releases it a master claims it at once to enforce it.
func TestCappedInstanceKeepsItsTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := daotest.Submit(t, b.db, "capped-timed", map[string]any{"name": "capped-timed", "max-active-instances": 1,
		"when-full": "skip", "timeout": "1h0m0s", "tasks": []map[string]any{{"name": "t", "type": "noop"}}})
	if got, err := b.db.WorkflowAdmitIfUnderCap(b.ctx, "m1", 10); err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("admission = %+v, %v; want instance %d", got, err, id)
	}
	if n, err := b.db.WorkflowReleaseIfOwnedBy(b.ctx, "m1"); err != nil || n != 1 {
		t.Fatalf("release = %d, %v", n, err)
	}
	got, err := b.db.WorkflowClaimUnowned(b.ctx, "m2", 10)
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("claim after the release = %+v, %v; want instance %d (its timeout needs an owner)", got, err, id)
	}
}

// backdate makes the tasks of an instance look ended a minute ago, as when no master has
// been up since, and the instance started before them.
func backdate(t *testing.T, b *testBundle, wf int64) {
	t.Helper()
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE task_instance SET ended_at = now() - interval '1 minute'
		WHERE workflow_instance_id = $1 AND ended_at IS NOT NULL`, wf); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE workflow_instance SET started_at = now() - interval '2 minutes'
		WHERE id = $1`, wf); err != nil {
		t.Fatal(err)
	}
}

// sweep returns a claim of the stranded instances among the first limit unowned running ones.
func sweep(b *testBundle) func(ctx context.Context, owner string, limit int) ([]dao.WorkflowInstance, error) {
	return func(ctx context.Context, owner string, limit int) ([]dao.WorkflowInstance, error) {
		upto, _, err := b.db.WorkflowSweepRange(ctx, 0, limit)
		if err != nil {
			return nil, err
		}
		return b.db.WorkflowClaimStranded(ctx, owner, 0, upto)
	}
}

// TestSweepLeavesWaitingInstances: an unowned running instance whose one task waits for a
// signal is not stranded — the signal wakes a master — so the sweep leaves it, however long
// it waits; once the task has ended and StrandedAfter passed with no wake-up heard, it is.
func TestSweepLeavesWaitingInstances(t *testing.T) {
	t.Parallel()
	b := setup(t)
	raw := `{"name":"held"}`
	var wf int64
	err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(b.ctx, "held", []byte(raw), daotest.Facts(t, []byte(raw)))
		if err != nil {
			return err
		}
		wf, err = q.WorkflowCreate(b.ctx, dao.Submission{Name: "held", Version: v, Roots: []dao.NewTask{{Name: "approve", Type: "wait", State: dao.TaskWaiting, Group: "default"}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	backdate(t, b, wf)
	if got, err := sweep(b)(b.ctx, "m1", 100); err != nil || len(got) != 0 {
		t.Fatalf("the sweep took %+v (%v), whose task is waiting", got, err)
	}
	var task int64
	if err := b.db.SQL().GetContext(b.ctx, &task, `SELECT id FROM task_instance WHERE workflow_instance_id = $1`, wf); err != nil {
		t.Fatal(err)
	}
	out := "yes"
	if _, err := b.db.TaskEndIfWaiting(b.ctx, task, dao.TaskSucceeded, &out, nil, "", nil); err != nil {
		t.Fatal(err)
	}
	backdate(t, b, wf)
	if got, err := sweep(b)(b.ctx, "m1", 100); err != nil || len(got) != 1 || got[0].ID != wf {
		t.Fatalf("the sweep took %+v (%v), want %d, whose signal no master heard", got, err, wf)
	}
}

// TestSweepTakesAForEachWithoutLiveItems: a for-each task's parent waits for its items, not
// for a signal: an unowned instance whose parent has a queued item is live, but once its
// items have ended, and StrandedAfter passed with no wake-up heard, the sweep takes it, for a
// master to create the next items or end the parent.
func TestSweepTakesAForEachWithoutLiveItems(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := daotest.Submit(t, b.db, "each", map[string]any{"name": "each"})
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{
		{WorkflowInstanceID: wf, Name: "sum", Type: "noop", State: dao.TaskWaiting, Group: "default", Items: []string{"a", "b"}},
		{WorkflowInstanceID: wf, Name: "sum[0]", Type: "noop", State: dao.TaskQueued, Group: "default"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE workflow_instance SET state = 'running' WHERE id = $1`, wf); err != nil {
		t.Fatal(err)
	}
	backdate(t, b, wf)
	if got, err := sweep(b)(b.ctx, "m1", 100); err != nil || len(got) != 0 {
		t.Fatalf("the sweep took %+v (%v), whose item is queued", got, err)
	}
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE task_instance SET state = 'succeeded', ended_at = now()
		WHERE workflow_instance_id = $1 AND name = 'sum[0]'`, wf); err != nil {
		t.Fatal(err)
	}
	backdate(t, b, wf)
	if got, err := sweep(b)(b.ctx, "m1", 100); err != nil || len(got) != 1 || got[0].ID != wf {
		t.Fatalf("the sweep took %+v (%v), want %d, whose parent waits on no live item", got, err, wf)
	}
}

// TestReleaseWakesMastersWithTheIDs: a failover's release of a lost master's instances wakes
// the masters with the released ids, as the end of a task of theirs would, so a master locks
// and advances them at once (the claim of new instances no longer takes running ones).
func TestReleaseWakesMastersWithTheIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for range 3 {
		ids = append(ids, fmt.Sprint(daotest.Submit(t, b.db, "wf", map[string]any{"name": "wf"})))
	}
	if got, err := b.db.WorkflowClaimUnowned(b.ctx, "lost", 10); err != nil || len(got) != 3 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	ml := b.listenMaster(t)
	var n int
	err := b.db.Tx(b.ctx, func(q *dao.Queries) (err error) {
		n, err = q.WorkflowReleaseIfOwnedBy(b.ctx, "lost")
		return err
	})
	if err != nil || n != 3 {
		t.Fatalf("release = %d, %v", n, err)
	}
	select {
	case w := <-ml.C:
		if w.Payload != strings.Join(ids, ",") {
			t.Fatalf("wake-up %q, want %q", w.Payload, strings.Join(ids, ","))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up")
	}
}

// TestAttemptsGoWithTheirTask: attempt rows have no foreign key to their task (migration
// 00009), yet deleting a task instance, directly or through its workflow instance, deletes its
// attempts and no others.
func TestAttemptsGoWithTheirTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gone, kept := b.queue(t, 2, "att"), b.queue(t, 1, "att")
	got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"att"}, 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("claim = %d tasks, %v; want 3", len(got), err)
	}
	count := func(wf int64) int {
		t.Helper()
		var n int
		if err := b.db.SQL().GetContext(b.ctx, &n, `SELECT count(*) FROM task_attempt a
			JOIN task_instance t ON t.id = a.task_instance_id WHERE t.workflow_instance_id = $1`, wf); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count(gone) != 2 || count(kept) != 1 {
		t.Fatalf("attempts before = %d and %d, want 2 and 1", count(gone), count(kept))
	}
	if _, err := b.db.SQL().ExecContext(b.ctx, `DELETE FROM workflow_instance WHERE id = $1`, gone); err != nil {
		t.Fatal(err)
	}
	var orphans, all int
	if err := b.db.SQL().GetContext(b.ctx, &orphans, `SELECT count(*) FROM task_attempt a
		WHERE NOT EXISTS (SELECT 1 FROM task_instance t WHERE t.id = a.task_instance_id)`); err != nil {
		t.Fatal(err)
	}
	if err := b.db.SQL().GetContext(b.ctx, &all, `SELECT count(*) FROM task_attempt`); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 || all != 1 || count(kept) != 1 {
		t.Fatalf("after deleting instance %d: %d orphan attempts, %d in all (want 0 and the other instance's 1)", gone, orphans, all)
	}
}

// TestClaimRowsReadByHandAsBySqlx: the claims read their rows by hand (queryTasks); they must
// read what sqlx reads from the same columns, with every column set and with every nullable
// one NULL.
func TestClaimRowsReadByHandAsBySqlx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.queue(t, 2, "g")
	if _, err := b.db.SQL().Exec(`UPDATE task_instance SET pool = 'p', worker_id = 'w1', attempt = 3, retries = 1,
		max_retries = 4, retry_interval = interval '1.5 seconds', timeout = interval '2 minutes',
		not_before = now() + interval '1 hour', failover_count = 2, kill_requested = true, output = 'out',
		error = 'err', exit_code = 7, started_at = now(), ended_at = now(), usage = '{"input_tokens": 5}',
		params = '{"task": {"name": "x"}}'
		WHERE id = (SELECT min(id) FROM task_instance WHERE workflow_instance_id = $1)`, wf); err != nil {
		t.Fatal(err)
	}
	want, err := b.db.TaskListByWorkflow(b.ctx, wf)
	if err != nil || len(want) != 2 {
		t.Fatalf("list = %v, %v", want, err)
	}
	got, err := dao.QueryTasks(b.ctx, b.db.Queries, dao.TaskListByWorkflowSQL, wf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read by hand:\n%+v\nby sqlx:\n%+v", got, want)
	}
	if want[0].Pool == nil || want[0].Usage == nil || want[0].TimeoutMs == nil || want[1].WorkerID != nil || want[1].Usage != nil {
		t.Fatalf("the rows do not cover set and NULL columns: %+v", want)
	}
}
