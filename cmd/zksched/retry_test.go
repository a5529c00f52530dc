package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestWaitAndStatusShowRetries: --wait prints a failed attempt's error and when the next
// attempt is due; status lists the attempts with their errors, and the due time while the
// retry waits; a failure not retried ends the task at once, saying why.
func TestWaitAndStatusShowRetries(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	wf := daotest.Submit(t, db, "flaky", map[string]any{"name": "flaky"})
	if _, err := db.WorkflowClaimUnowned(ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := db.TaskCreateMany(ctx, []dao.NewTask{{WorkflowInstanceID: wf, Name: "fetch", Type: "shell",
		State: dao.TaskQueued, Group: "g", MaxRetries: 3}}); err != nil {
		t.Fatal(err)
	}
	fail := func(code int, res dao.AttemptResult) int64 {
		t.Helper()
		got, err := db.TaskClaimQueued(ctx, "w1", []string{"g"}, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("claim = %v, %v", got, err)
		}
		res.Outcome, res.ExitCode = dao.OutcomeFailed, &code
		if err := db.TaskFinishIfRunning(ctx, got[0].Token(), res); err != nil {
			t.Fatal(err)
		}
		return got[0].ID
	}
	id := fail(1, dao.AttemptResult{Next: dao.TaskQueued, Retry: true, RetryWait: 30 * time.Second, Error: "exit status 1"})
	task, err := db.TaskGet(ctx, id)
	if err != nil || task.NotBefore == nil {
		t.Fatalf("task = %+v, %v; want a retry due", task, err)
	}

	// --wait, for a moment: the instance goes on.
	var out bytes.Buffer
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = waitFor(wctx, db, wf, nil, &out)
	cancel()
	var exit exitError
	if !errors.As(err, &exit) || !strings.Contains(exit.msg, "interrupted") {
		t.Errorf("--wait = %v; want it interrupted", err)
	}
	due := task.NotBefore.Local().Format("15:04:05")
	line := regexp.MustCompile(`fetch +attempt 1 failed: exit status 1; attempt 2 at ` + due + ` \(in (29|30)s\)\n`)
	if !line.MatchString(out.String()) || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("--wait printed\n%s\nwant one line matching %s", out.String(), line)
	}

	st, err := (&dbInstances{db: db}).Status(ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	if err := addAttempts(ctx, &dbInstances{db: db}, st); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := writeStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	stamp := func(t *time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }
	atts, err := db.AttemptList(ctx, id)
	if err != nil || len(atts) != 1 {
		t.Fatalf("attempts = %+v, %v", atts, err)
	}
	for _, want := range []string{
		"exit status 1; attempt 2 due " + stamp(task.NotBefore) + "\n",
		fmt.Sprintf("attempts:\n  fetch (task instance %d)\n    #1 failed %s: exit status 1\n    #2 due %s\n", id, stamp(atts[0].EndedAt), stamp(task.NotBefore)),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status printed\n%s\nwant %q in it", out.String(), want)
		}
	}

	// The second attempt fails in a way the task's retry-on does not retry.
	if _, err := db.SQL().ExecContext(ctx, "UPDATE task_instance SET not_before = NULL WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	refused := "exit status 3 (not retried: exit 3 is not in retry-on)"
	fail(3, dao.AttemptResult{Next: dao.TaskFailed, Error: refused})
	// No master runs here to end the instance: --wait is interrupted once it has printed.
	out.Reset()
	wctx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
	_ = waitFor(wctx, db, wf, nil, &out)
	cancel()
	if !strings.Contains(out.String(), "fetch                failed: "+refused+"\n") {
		t.Errorf("--wait printed\n%s\nwant the task failed with %q", out.String(), refused)
	}
	st, err = (&dbInstances{db: db}).Status(ctx, wf)
	if err == nil {
		err = addAttempts(ctx, &dbInstances{db: db}, st)
	}
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := writeStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	if want := "    #2 failed "; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), ": "+refused+"\n") ||
		strings.Contains(out.String(), " due ") {
		t.Errorf("status printed\n%s\nwant both attempts, the second %q, nothing due", out.String(), refused)
	}
}
