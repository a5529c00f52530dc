package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

// TestNextAttemptShown: a task queued for a retry shows when its next attempt is due, in
// the API's task view (next_attempt_at) and on its page, beside the failed attempt's error;
// a task that is not waiting for a retry has none.
func TestNextAttemptShown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	running, err := b.db.TaskGet(b.ctx, f.byName["t4"])
	if err != nil || running.State != dao.TaskRunning {
		t.Fatalf("t4 = %+v, %v; want it running", running, err)
	}
	before := time.Now()
	if err := b.db.TaskFinishIfRunning(b.ctx, running.Token(), dao.AttemptResult{Outcome: dao.OutcomeFailed,
		Next: dao.TaskQueued, Retry: true, RetryWait: 90 * time.Second, Error: "exit status 1"}); err != nil {
		t.Fatal(err)
	}
	next := func(name string) *time.Time {
		var out struct {
			NextAttemptAt *time.Time `json:"next_attempt_at"`
			Attempts      []struct {
				Error *string `json:"error"`
			} `json:"attempts"`
		}
		b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d", f.byName[name]), "").json(t, &out)
		return out.NextAttemptAt
	}
	// The database's clock stamps the due time: allow for its distance from the test's.
	if at := next("t4"); at == nil || at.Before(before.Add(80*time.Second)) || at.After(time.Now().Add(100*time.Second)) {
		t.Errorf("t4's next_attempt_at = %v; want about 90s after %s", at, before)
	}
	for _, name := range []string{"t2", "t5"} { // failed; queued for its first attempt
		if at := next(name); at != nil {
			t.Errorf("%s's next_attempt_at = %v; want null", name, at)
		}
	}
	page := b.do(t, "GET", fmt.Sprintf("/tasks/%d", f.byName["t4"]), "")
	for _, want := range []string{`<dd id="next-attempt">#2 due `, ` (in 1m`, `<li class="out-queued" id="next-attempt-due"><strong>#2</strong> due `,
		`<div class="dim">exit status 1</div>`} {
		if page.status != 200 || !strings.Contains(page.body, want) {
			t.Errorf("GET /tasks/%d: %d, want %s in the page:\n%s", f.byName["t4"], page.status, want, page.body)
		}
	}
	if page := b.do(t, "GET", fmt.Sprintf("/tasks/%d", f.byName["t2"]), ""); strings.Contains(page.body, "next-attempt") {
		t.Errorf("the page of a failed task shows a next attempt:\n%s", page.body)
	}
}
