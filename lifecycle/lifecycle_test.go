package lifecycle_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// TestSingleTaskEndMatchesDecide: the worker's statement that ends a single-task workflow in
// its task's end gives the workflow the end Decide gives it, for every way the task can end,
// a requested kill of a task whose attempt would requeue it included.
func TestSingleTaskEndMatchesDecide(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := parse(t, "name: single\ntasks:\n  - {name: only, type: noop}\n")
	for _, tc := range []struct {
		name      string
		outcome   dao.Outcome
		kill      bool
		wantState dao.TaskState
	}{
		{"succeeded", dao.OutcomeSucceeded, false, dao.TaskSucceeded},
		{"failed", dao.OutcomeFailed, false, dao.TaskFailed},
		{"timed out", dao.OutcomeTimedOut, false, dao.TaskFailed},
		{"killed", dao.OutcomeKilled, false, dao.TaskKilled},
		{"handed back after a kill request", dao.OutcomeHandedBack, true, dao.TaskKilled},
	} {
		id := submit(ctx, t, db, spec)
		got, err := lifecycle.Claim(ctx, db, "w1", []string{"default"}, 1, true)
		if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != id {
			t.Fatalf("%s: claim = %+v, %v; want the task of instance %d", tc.name, got, err, id)
		}
		task := got[0]
		if tc.kill {
			if _, err := lifecycle.Kill(ctx, db, task.ID, nil); err != nil {
				t.Fatalf("%s: kill: %v", tc.name, err)
			}
		}
		res := dao.AttemptResult{Outcome: tc.outcome, Error: "the attempt's error"}
		if tc.outcome == dao.OutcomeSucceeded {
			out := "out"
			res.Output, res.Error = &out, ""
		}
		res.Next, res.Retry = lifecycle.Next(&task, tc.outcome)
		done, err := lifecycle.Finish(ctx, db, []dao.Finish{{Token: task.Token(), Result: res}})
		if err != nil || len(done) != 1 || !done[0].Recorded {
			t.Fatalf("%s: finish = %+v, %v", tc.name, done, err)
		}
		ended, err := db.TaskGet(ctx, task.ID)
		if err != nil || ended.State != tc.wantState {
			t.Fatalf("%s: task = %+v, %v; want it %s", tc.name, ended, err, tc.wantState)
		}
		wf, err := db.WorkflowGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := lifecycle.Decide(spec, map[string]dao.TaskState{"only": tc.wantState}, nil, nil)
		if !want.Done || wf.State != want.State || deref(wf.Error) != want.Error || done[0].Workflow != want.State {
			t.Errorf("%s: the task's end ended the workflow %s %q (reported %q); Decide says %s %q",
				tc.name, wf.State, deref(wf.Error), done[0].Workflow, want.State, want.Error)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestNext: the rule of an attempt's end.
func TestNext(t *testing.T) {
	t.Parallel()
	withRetries := &dao.TaskInstance{Retries: 1, MaxRetries: 2}
	spent := &dao.TaskInstance{Retries: 2, MaxRetries: 2}
	for _, tc := range []struct {
		task  *dao.TaskInstance
		o     dao.Outcome
		next  dao.TaskState
		retry bool
	}{
		{spent, dao.OutcomeSucceeded, dao.TaskSucceeded, false},
		{withRetries, dao.OutcomeFailed, dao.TaskQueued, true},
		{spent, dao.OutcomeFailed, dao.TaskFailed, false},
		{withRetries, dao.OutcomeTimedOut, dao.TaskQueued, true},
		{spent, dao.OutcomeTimedOut, dao.TaskFailed, false},
		{withRetries, dao.OutcomeKilled, dao.TaskKilled, false},
		{spent, dao.OutcomeHandedBack, dao.TaskQueued, false},
		{spent, dao.OutcomeInterrupted, dao.TaskQueued, false},
		{spent, dao.OutcomeFailedOver, dao.TaskQueued, false},
		{withRetries, dao.OutcomePaused, dao.TaskWaiting, false},
	} {
		next, retry := lifecycle.Next(tc.task, tc.o)
		if next != tc.next || retry != tc.retry {
			t.Errorf("Next(%d of %d retries, %s) = %s, %v; want %s, %v", tc.task.Retries, tc.task.MaxRetries, tc.o, next, retry, tc.next, tc.retry)
		}
	}
}

// parse parses the workflow file src.
func parse(t *testing.T, src string) *workflow.Spec {
	t.Helper()
	spec, err := workflow.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// submit stores spec and submits an instance of it, as the command line does.
func submit(ctx context.Context, t *testing.T, db *dao.DB, spec *workflow.Spec) int64 {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := db.Tx(ctx, func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(ctx, spec.Name, raw, lifecycle.Facts(spec))
		if err != nil {
			return err
		}
		id, err = lifecycle.Submit(ctx, q, lifecycle.Submission{Spec: spec, Version: v})
		return err
	}); err != nil {
		t.Fatalf("submit %s: %v", spec.Name, err)
	}
	return id
}
