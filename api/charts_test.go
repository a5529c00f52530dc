package api_test

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/registry"
)

// svg is the SVG element of id in a page, "" when there is none.
func svg(page, id string) string {
	return between(page, fmt.Sprintf(`id="%s"`, id), "</svg>")
}

var barClass = regexp.MustCompile(`class="bar ([a-z_0-9]+)"`)

// bars counts the bars of an SVG by their kind.
func bars(svg string) map[string]int {
	n := map[string]int{}
	for _, m := range barClass.FindAllStringSubmatch(svg, -1) {
		n[m[1]]++
	}
	return n
}

// finishWorkflow makes workflow instance id end in state at ended, having run for took.
func (b *testBundle) finishWorkflow(t *testing.T, id int64, state string, ended time.Time, took time.Duration) {
	t.Helper()
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE workflow_instance SET state = $2, owner = NULL,
		started_at = $3, ended_at = $4 WHERE id = $1`, id, state, ended.Add(-took), ended); err != nil {
		t.Fatal(err)
	}
}

// TestOverviewDrawsWhatTheDatabaseHolds: the home page's three charts draw the runs of the
// last day by hour and outcome, each worker group's running tasks against its workers' slots
// and its queue, and each workflow's duration percentiles.
func TestOverviewDrawsWhatTheDatabaseHolds(t *testing.T) {
	t.Parallel()
	cl := registry.Cluster{Workers: []registry.NodeEntry{
		{ID: "w1", Info: &registry.NodeInfo{ID: "w1", Groups: []string{"etl"}, Slots: 4}},
		{ID: "w2", Info: &registry.NodeInfo{ID: "w2", Groups: []string{"etl", "idle"}, Slots: 2}},
	}}
	b := setup(t, setupOpts{open: true, cluster: fakeCluster{cl: cl}})
	now := time.Now().UTC()
	for i, state := range []string{"succeeded", "succeeded", "failed", "stopped", "succeeded"} {
		wf := daotest.Submit(t, b.db, "nightly", map[string]any{"name": "nightly"})
		b.finishWorkflow(t, wf, state, now.Add(-time.Duration(i)*time.Hour), time.Duration(i+1)*time.Minute)
	}
	b.finishWorkflow(t, daotest.Submit(t, b.db, "hourly", map[string]any{"name": "hourly"}), "succeeded", now, 3*time.Second)
	wf := daotest.Submit(t, b.db, "load", map[string]any{"name": "load"})
	var tasks []dao.NewTask
	for i := range 5 {
		tasks = append(tasks, dao.NewTask{WorkflowInstanceID: wf, Name: fmt.Sprintf("t%d", i), Type: "noop", State: dao.TaskQueued, Group: "etl"})
	}
	if _, err := b.db.TaskCreateMany(b.ctx, tasks); err != nil {
		t.Fatal(err)
	}
	if claimed, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"etl"}, 3); err != nil || len(claimed) != 3 {
		t.Fatalf("claim: %v %v", claimed, err)
	}

	r := b.do(t, "GET", "/", "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", r.status, r.body)
	}
	if !strings.Contains(r.header.Get("Content-Security-Policy"), "style-src 'self'") || strings.Contains(r.body, "style=") {
		t.Error("the overview needs inline styles, which its Content Security Policy refuses")
	}
	runs := svg(r.body, "chart-runs")
	if got := bars(runs); got["succeeded"] < 2 || got["failed"] != 1 || got["stopped"] != 1 || strings.Contains(runs, "data-empty") {
		t.Errorf("runs chart's bars = %v, want succeeded in 2 hours or more, 1 failed and 1 stopped:\n%s", got, runs)
	}
	if !strings.Contains(runs, "1 failed of 1 run") || !strings.Contains(runs, `class="tick"`) {
		t.Errorf("runs chart lacks its titles or its axis:\n%s", runs)
	}
	groups := svg(r.body, "chart-groups")
	if got := bars(groups); got["slots"] != 2 || got["running"] != 1 || got["queued"] != 1 {
		t.Errorf("groups chart's bars = %v, want the slots of etl and idle, etl's running and queued tasks:\n%s", got, groups)
	}
	for _, want := range []string{"3 of 6 slots in use, 2 queued", "0 of 2 slots in use, 0 queued"} {
		if !strings.Contains(groups, want) {
			t.Errorf("groups chart lacks %q:\n%s", want, groups)
		}
	}
	durations := svg(r.body, "chart-durations")
	if got := bars(durations); got["p50"] != 2 || got["p90"] != 2 || got["p99"] != 2 {
		t.Errorf("durations chart's bars = %v, want p50, p90 and p99 of nightly and hourly:\n%s", got, durations)
	}
	if i, j := strings.Index(durations, ">nightly<"), strings.Index(durations, ">hourly<"); i < 0 || j < i {
		t.Errorf("durations chart does not list nightly (5 runs) before hourly (1):\n%s", durations)
	}
	if !strings.Contains(durations, "p50 3m00s") {
		t.Errorf("durations chart lacks nightly's p50 of 3 minutes:\n%s", durations)
	}
}

// TestOverviewOfNothingSaysSo: with nothing in the database, each chart says there is
// nothing to draw, and draws no bar.
func TestOverviewOfNothingSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	r := b.do(t, "GET", "/", "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", r.status, r.body)
	}
	for id, want := range map[string]string{"chart-runs": "No runs in the last 24 h.", "chart-durations": "No runs in the last 24 h.",
		"chart-groups": "No task is queued or running, and no worker is registered."} {
		c := svg(r.body, id)
		if !strings.Contains(c, want) || !strings.Contains(c, `data-empty="true"`) || len(bars(c)) != 0 {
			t.Errorf("%s with no data: want %q and no bar:\n%s", id, want, c)
		}
	}
}

// TestOverviewWithoutZooKeeper: the overview is shown when ZooKeeper cannot be read, with
// the groups' queues and running tasks and a line saying their workers' slots are unknown.
func TestOverviewWithoutZooKeeper(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true, cluster: fakeCluster{err: errors.New("zk: connection closed")}})
	b.seed(t, 6)
	r := b.do(t, "GET", "/", "")
	groups := svg(r.body, "chart-groups")
	if r.status != http.StatusOK || !strings.Contains(r.body, `id="groups-no-slots"`) || bars(groups)["running"] != 1 || bars(groups)["slots"] != 0 {
		t.Errorf("GET / without ZooKeeper: %d, want the groups without slots and a line saying why:\n%s", r.status, between(r.body, "<main>", "</main>"))
	}
}

// TestWorkflowTimelineOfNoTaskSaysSo: an instance without tasks yet says so where its
// timeline would be.
func TestWorkflowTimelineOfNoTaskSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	wf := daotest.Submit(t, b.db, "empty", map[string]any{"name": "empty"})
	r := b.do(t, "GET", fmt.Sprintf("/workflows/%d", wf), "")
	if r.status != http.StatusOK || !strings.Contains(r.body, `id="timeline-empty"`) || strings.Contains(r.body, `id="timeline"`) {
		t.Errorf("GET /workflows/%d: %d, want no timeline and a line saying why:\n%s", wf, r.status, between(r.body, "<h2", "</html>"))
	}
}

// TestTaskListMovedToTasks: the task list is at /tasks, and its old addresses (the home page
// with a filter) lead there.
func TestTaskListMovedToTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	if r := b.do(t, "GET", "/?state=failed&worker=w1", ""); r.status != http.StatusFound || r.header.Get("Location") != "/tasks?state=failed&worker=w1" {
		t.Errorf("GET /?state=failed&worker=w1: %d to %q, want 302 to the task list", r.status, r.header.Get("Location"))
	}
	r := b.do(t, "GET", "/tasks?state=failed", "")
	if r.status != http.StatusOK || !strings.Contains(r.body, fmt.Sprintf(`href="/tasks/%d"`, f.byName["t2"])) ||
		!strings.Contains(r.body, `data-live="/tasks?partial=rows"`) || !strings.Contains(r.body, `action="/tasks"`) {
		t.Errorf("GET /tasks?state=failed: %d, want the list with t2 that refreshes and filters at /tasks:\n%.2000s", r.status, r.body)
	}
}

// TestWorkflowTimelineDrawsEachAttempt: an instance's page draws a row per task and a bar
// per attempt, coloured by its outcome and naming its worker, with the waits between them; a
// large instance draws its first tasks and says how many more there are.
func TestWorkflowTimelineDrawsEachAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	wf := daotest.Submit(t, b.db, "tl", map[string]any{"name": "tl"})
	tasks := []dao.NewTask{{WorkflowInstanceID: wf, Name: "flaky", Type: "noop", State: dao.TaskQueued, Group: "g", MaxRetries: 2}}
	for i := range 59 {
		tasks = append(tasks, dao.NewTask{WorkflowInstanceID: wf, Name: fmt.Sprintf("later-%02d", i), Type: "noop", State: dao.TaskQueued, Group: "later"})
	}
	if _, err := b.db.TaskCreateMany(b.ctx, tasks); err != nil {
		t.Fatal(err)
	}
	claim := func(worker string) dao.Token {
		t.Helper()
		c, err := b.db.TaskClaimQueued(b.ctx, worker, []string{"g"}, 1)
		if err != nil || len(c) != 1 {
			t.Fatalf("claim by %s: %v %v", worker, c, err)
		}
		return c[0].Token()
	}
	claim("w1")
	if _, err := b.db.TaskRequeueIfRunningOnWorker(b.ctx, "w1"); err != nil { // w1 is lost
		t.Fatal(err)
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, claim("w2"), dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskQueued}); err != nil {
		t.Fatal(err)
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, claim("w3"), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
		t.Fatal(err)
	}

	r := b.do(t, "GET", fmt.Sprintf("/workflows/%d", wf), "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /workflows/%d: %d\n%s", wf, r.status, r.body)
	}
	tl := svg(r.body, "timeline")
	flaky := between(tl, `data-task="flaky"`, "</g>\n  \n")
	got := bars(flaky)
	if got["failed_over"] != 1 || got["failed"] != 1 || got["succeeded"] != 1 || got["queued"] < 2 {
		t.Errorf("flaky's bars = %v, want one failed over, one failed, one succeeded and the waits between them:\n%s", got, flaky)
	}
	for _, want := range []string{`data-worker="w1"`, `data-worker="w2"`, `data-worker="w3"`,
		"flaky: attempt 1 on w1, failed over (its worker was lost)", "flaky: attempt 2 on w2, failed", "flaky: attempt 3 on w3, succeeded"} {
		if !strings.Contains(flaky, want) {
			t.Errorf("flaky's row lacks %q:\n%s", want, flaky)
		}
	}
	if n := strings.Count(tl, `<g class="row"`); n != 50 {
		t.Errorf("the timeline draws %d rows, want the first 50 tasks", n)
	}
	if !strings.Contains(r.body, "The first 50 tasks by start are drawn; 10 more are in the list below.") {
		t.Errorf("the timeline does not say how many tasks it leaves out:\n%s", between(r.body, `id="timeline-head"`, "<svg"))
	}
	if strings.Count(tl, `class="tick"`) < 2 {
		t.Errorf("the timeline has no time axis:\n%s", tl)
	}
	// The tasks never started wait in the queue till now.
	if later := between(tl, `data-task="later-00"`, "</g>\n  \n"); bars(later)["queued"] != 1 {
		t.Errorf("a queued task's row = %s, want one queued bar", later)
	}
}
