package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

// docsCluster is a cluster as the docs' examples expect: a master and two workers whose
// groups include batch, db-hosts and etl, the provider main (offline here), the pool openai,
// the webhook secret of examples/hooks/deploy.yaml, and what the sensors of
// examples/sensors/wait-for-inputs.yaml read: an upstream status that says done, a warehouse
// (the cluster's own schema) whose loads table has today's row. url is the master's, for the
// docs' http://127.0.0.1:5678.
type docsCluster struct {
	*e2e
	url  string
	port int
}

func newDocsCluster(t *testing.T) *docsCluster {
	t.Helper()
	e := setupE2E(t, nil, "", "ZKSCHED_LLM_PROVIDERS_MAIN_TYPE=offline", "ZKSCHED_POOLS_OPENAI=4",
		"ZKSCHED_WORKER_GROUPS=default,batch,db-hosts,etl", "ZKSCHED_HOOK_SECRET_DEPLOY=docs-deploy-secret")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"state": "done"}`)
	}))
	t.Cleanup(upstream.Close)
	if _, err := e.db.SQL().Exec(`CREATE TABLE loads (day date NOT NULL); INSERT INTO loads VALUES (current_date)`); err != nil {
		t.Fatal(err)
	}
	sensors := []string{"UPSTREAM_STATUS_URL=" + upstream.URL, "WAREHOUSE_DSN=" + envValue(e.Env, "ZKSCHED_DB_DSN"),
		"ZKSCHED_WORKER_TASK_ENV=UPSTREAM_STATUS_URL,WAREHOUSE_DSN", "ZKSCHED_WORKER_HTTP_TOOLS_ALLOW_PRIVATE_TARGETS=true"}
	master := e.Master("master")
	e.Worker("worker-1", sensors...)
	e.Worker("worker-2", sensors...)
	return &docsCluster{e2e: e, url: fmt.Sprintf("http://127.0.0.1:%d", master.Port), port: master.Port}
}

// runsOf returns the ids of name's workflow instances, oldest first.
func (c *docsCluster) runsOf(t *testing.T, name string) []int64 {
	t.Helper()
	var ids []int64
	if err := c.db.SQL().Select(&ids, `SELECT id FROM workflow_instance WHERE workflow_name = $1 ORDER BY id`, name); err != nil {
		t.Fatal(err)
	}
	return ids
}

// docScript runs a command block of the docs as printed, in bash from the repository's root
// with the binary under test as zksched and env added to the environment, and returns its
// standard output and error; the test fails if it fails.
func (e *e2e) docScript(t *testing.T, block string, env ...string) (stdout, stderr string) {
	t.Helper()
	// -x echoes each line before it runs, so the output shows which one failed.
	cmd := exec.Command("bash", "-euxo", "pipefail", "-c", block)
	cmd.Env = append(append(append(os.Environ(), e.Env...), e.cliPath(t)), env...)
	cmd.Dir = repoRoot()
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("the docs' commands: %v\n%s\nstdout:\n%s\nstderr:\n%s", err, block, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// cliPath returns the PATH variable with the binary under test as zksched first.
func (e *e2e) cliPath(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	if err := os.Symlink(e.Bin, filepath.Join(bin, "zksched")); err != nil {
		t.Fatal(err)
	}
	return "PATH=" + bin + ":" + os.Getenv("PATH")
}

// submit submits examples/path with args, waits for it if args has --wait, and returns the
// instance's id; the test fails unless it exits 0.
func (c *docsCluster) submit(t *testing.T, path string, args ...string) int64 {
	t.Helper()
	out, code := c.Run(append([]string{"submit", filepath.Join(repoRoot(), "examples", path)}, args...)...)
	if code != 0 {
		t.Fatalf("zksched submit examples/%s %s: exit %d\n%s", path, strings.Join(args, " "), code, out)
	}
	return firstID(t, out)
}

// firstID is the number on the first line of out: the instance id submit prints.
func firstID(t *testing.T, out string) int64 {
	t.Helper()
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	id, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		t.Fatalf("no instance id first in:\n%s", out)
	}
	return id
}

// outputs returns the outputs of wf's tasks by name.
func (c *docsCluster) outputs(t *testing.T, wf int64) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, task := range c.tasks(t, wf) {
		if task.Output != nil {
			out[name] = *task.Output
		}
	}
	return out
}

// signalWhenWaiting signals task of wf with text once it waits, and waits for wf to end; it
// returns the state wf ended in.
func (c *docsCluster) signalWhenWaiting(t *testing.T, wf int64, task, text string) dao.WorkflowState {
	t.Helper()
	waitUntil(t, 60*time.Second, task+" to wait", func() bool { return c.tasks(t, wf)[task].State == dao.TaskWaiting })
	id := strconv.FormatInt(c.tasks(t, wf)[task].ID, 10)
	if out, code := c.Run("signal", id, "--output", text); code != 0 {
		t.Fatalf("zksched signal %s: exit %d\n%s", id, code, out)
	}
	return c.waitEnded(t, wf)
}

func (c *docsCluster) waitEnded(t *testing.T, wf int64) dao.WorkflowState {
	t.Helper()
	waitUntil(t, 60*time.Second, fmt.Sprintf("workflow instance %d to end", wf), func() bool { return c.workflowState(t, wf).Terminal() })
	return c.workflowState(t, wf)
}

// TestDocsExamples submits every workflow file of examples/ that the docs show, as a user
// would on the quickstart cluster, and checks what each comes to; the command blocks that go
// with them run as printed. (demo.yaml, agent-review.yaml and cli-tour.yaml have tests of
// their own.) examples' TestDocsYAMLIsAnExample checks that the docs show these files.
func TestDocsExamples(t *testing.T) {
	t.Parallel()
	c := newDocsCluster(t)

	t.Run("a first workflow", func(t *testing.T) {
		stdout, stderr := c.docScript(t, testenv.DocBlock(t, "docs/workflows.md", "A first workflow", "sh", 1))
		wf := firstID(t, stdout)
		if !strings.Contains(stderr, fmt.Sprintf("workflow instance %d succeeded", wf)) {
			t.Errorf("submit --wait printed:\n%s", stderr)
		}
		if got := c.outputs(t, wf)["load"]; got != "loaded rows=600 region=us" {
			t.Errorf("load's output = %q, want the rows clean kept for region us", got)
		}
	})

	t.Run("the reference's example", func(t *testing.T) {
		wf := c.submit(t, "nightly-report/full.yaml", "--wait")
		if got := c.outputs(t, wf)["load"]; got != "loaded rows=600 region=eu, enriched from http://lookup.internal" {
			t.Errorf("load's output = %q, want clean's and enrich's", got)
		}
		if w := c.tasks(t, wf)["load"].WorkerGroup; w != "db-hosts" {
			t.Errorf("load ran in group %q, want db-hosts", w)
		}
	})

	t.Run("waiting for a person", func(t *testing.T) {
		wf := c.submit(t, "review/review.yaml")
		if st := c.signalWhenWaiting(t, wf, "review", "ship it"); st != dao.WorkflowSucceeded {
			t.Fatalf("review ended %s, want succeeded", st)
		}
		if got := c.outputs(t, wf)["publish"]; got != "published: ship it" {
			t.Errorf("publish's output = %q, want the reviewer's text", got)
		}
	})

	t.Run("a child workflow", func(t *testing.T) {
		out, code := c.Run("define", filepath.Join(repoRoot(), "examples", "child", "publish-digest.yaml"))
		if code != 0 || !strings.Contains(out, "stored publish-digest version 1") {
			t.Fatalf("zksched define: exit %d\n%s", code, out)
		}
		wf := c.submit(t, "child/digest.yaml")
		if st := c.signalWhenWaiting(t, wf, "review", "the week in one line"); st != dao.WorkflowSucceeded {
			t.Fatalf("weekly-digest ended %s, want succeeded", st)
		}
		if got := c.outputs(t, wf)["publish"]; got != "posted: the week in one line" {
			t.Errorf("publish's output = %q, want the child's", got)
		}
	})

	t.Run("triggers and conditions", func(t *testing.T) {
		wf := c.submit(t, "release/release.yaml", "--wait")
		states := map[string]dao.TaskState{}
		for name, task := range c.tasks(t, wf) {
			states[name] = task.State
		}
		want := map[string]dao.TaskState{"build": dao.TaskSucceeded, "deploy": dao.TaskSkipped, "page-oncall": dao.TaskSkipped, "cleanup": dao.TaskSucceeded}
		if fmt.Sprint(states) != fmt.Sprint(want) {
			t.Errorf("env staging: tasks %v, want %v", states, want)
		}
		wf = c.submit(t, "release/release.yaml", "--param", "env=prod", "--wait")
		if got := c.outputs(t, wf)["deploy"]; got != "deployed app-1.0 to prod" {
			t.Errorf("env prod: deploy's output = %q", got)
		}
	})

	t.Run("for-each", func(t *testing.T) {
		wf := c.submit(t, "for-each/word-count.yaml", "--wait")
		texts, _ := filepath.Glob(filepath.Join(repoRoot(), "examples", "for-each", "texts", "*.txt"))
		words := 0
		for _, f := range texts {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			words += len(strings.Fields(string(b)))
		}
		if got := c.outputs(t, wf)["total"]; len(texts) < 2 || got != strconv.Itoa(words) {
			t.Errorf("total's output = %q, want the %d words of the %d texts", got, words, len(texts))
		}
	})

	t.Run("for-each with an agent", func(t *testing.T) {
		wf := c.submit(t, "for-each/summaries.yaml", "--wait")
		var summaries []string
		if err := json.Unmarshal([]byte(c.outputs(t, wf)["summarise"]), &summaries); err != nil || len(summaries) < 2 {
			t.Errorf("summarise's output = %q (%v), want a summary per text", c.outputs(t, wf)["summarise"], err)
		}
		if got := c.outputs(t, wf)["report"]; !strings.HasPrefix(got, "[offline model]") {
			t.Errorf("report's output = %q, want the model's answer", got)
		}
	})

	t.Run("an agent's digest", func(t *testing.T) {
		wf := c.submit(t, "llm/weekly-digest.yaml", "--wait")
		if got := c.outputs(t, wf)["mail"]; !regexp.MustCompile(`^mailed weekly \(\d+ bytes\) to team$`).MatchString(got) {
			t.Errorf("mail's output = %q", got)
		}
	})

	t.Run("an agent waiting for a person", func(t *testing.T) {
		wf := c.submit(t, "llm/release-note.yaml")
		if st := c.signalWhenWaiting(t, wf, "note", "shorter, and name the version"); st != dao.WorkflowSucceeded {
			t.Fatalf("release-note ended %s, want succeeded", st)
		}
	})

	t.Run("an agent that calls tools", func(t *testing.T) {
		stdout, stderr := c.docScript(t, testenv.DocBlock(t, "docs/llm.md", "The offline model, and a real one", "sh", 1))
		wf := firstID(t, stdout)
		if st := c.workflowState(t, wf); st != dao.WorkflowSucceeded {
			t.Fatalf("agent-tools ended %s\n%s\n%s", st, stdout, stderr)
		}
		triage := c.tasks(t, wf)["triage"]
		if triage.Output == nil || !strings.HasPrefix(*triage.Output, "[offline model]") {
			t.Errorf("triage's output = %q, want the model's final answer", deref(triage.Output))
		}
		_, calls, err := c.db.AgentLoopForTask(context.Background(), triage.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, call := range calls {
			got = append(got, fmt.Sprintf("%s %s %s", call.Tool, call.State, strings.SplitN(deref(call.Result), "\n", 2)[0]))
		}
		want := []string{"job-log ended 02:00:01 extract: 61240 rows from orders", "page-oncall ended paged the on-call person of team data"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("calls %q, want %q", got, want)
		}
	})

	t.Run("anchors", func(t *testing.T) {
		wf := c.submit(t, "anchors/steps.yaml", "--wait")
		for name, task := range c.tasks(t, wf) {
			if task.Output == nil || !strings.HasPrefix(*task.Output, "step "+name+" on ") || task.WorkerGroup != "batch" {
				t.Errorf("task %s: output %v in group %s, want its step in batch", name, task.Output, task.WorkerGroup)
			}
		}
	})

	t.Run("schedules", func(t *testing.T) {
		stdout, stderr := c.docScript(t, testenv.DocBlock(t, "docs/schedules.md", "Schedules", "sh", 1))
		for _, want := range []string{"stored scheduled-report version 1 with schedule", "scheduled-report", "succeeded"} {
			if !strings.Contains(stdout+stderr, want) {
				t.Errorf("the docs' schedule commands printed nothing with %q:\n%s\n%s", want, stdout, stderr)
			}
		}
		// October has 31 fires at 02:30 in Berlin; --to 2026-10-31 includes the 31st's.
		if !strings.Contains(stderr, "31 fire times of scheduled-report between 2026-10-01 and 2026-10-31") {
			t.Errorf("backfill --dry-run said:\n%s", stderr)
		}
		out, code := c.Run("submit", filepath.Join(repoRoot(), "examples", "schedules", "berlin-report.yaml"))
		if code != 0 || !strings.Contains(out, "stored berlin-report version 1") {
			t.Fatalf("submit berlin-report.yaml: exit %d\n%s", code, out)
		}
		if out, code := c.Run("schedule", "trigger", "berlin-report", "--wait"); code != 0 {
			t.Errorf("schedule trigger berlin-report --wait: exit %d\n%s", code, out)
		}
	})

	t.Run("notifications", func(t *testing.T) {
		wf := c.submit(t, "notifications/watched-report.yaml", "--wait")
		if got := c.outputs(t, wf)["report"]; got != "report written" {
			t.Errorf("report's output = %q", got)
		}
	})

	t.Run("typed params", func(t *testing.T) {
		wf := c.submit(t, "params/typed.yaml", "--param", "day=2026-11-28", "--param", "size=+05", "--wait")
		if got := c.outputs(t, wf)["show"]; got != `eu 5 2026-11-28 silver false {"retries":2,"skip":["a"]}` {
			t.Errorf("show's output = %q, want the params as checked", got)
		}
		out, code := c.Run("submit", filepath.Join(repoRoot(), "examples", "params", "typed.yaml"), "--param", "day=2026-11-28", "--param", "regoin=us")
		if code != 2 || !strings.Contains(out, `"regoin" is not a param of workflow typed-params (did you mean "region"?)`) {
			t.Errorf("submit with a misspelt param: exit %d\n%s\nwant exit 2 with a did-you-mean", code, out)
		}
	})

	t.Run("retries that back off", func(t *testing.T) {
		out, code := c.Run("submit", filepath.Join(repoRoot(), "examples", "retries", "backoff.yaml"), "--wait")
		if code != 0 {
			t.Fatalf("submit --wait: exit %d\n%s", code, out)
		}
		if !regexp.MustCompile(`fetch +attempt 1 failed: exit status 75; attempt 2 at \d\d:\d\d:\d\d`).MatchString(out) {
			t.Errorf("submit --wait did not say when fetch's next attempt is due:\n%s", out)
		}
		wf := firstID(t, out)
		if got := c.outputs(t, wf)["fetch"]; got != "fetched 42 records on attempt 2" {
			t.Errorf("fetch's output = %q, want attempt 2's", got)
		}
	})

	t.Run("webhook triggers", func(t *testing.T) {
		waitReady(t, c.port)
		block := testenv.DocBlock(t, "docs/workflows.md", "Webhook triggers", "sh", 1)
		stdout, stderr := c.docScript(t, strings.ReplaceAll(block, "http://127.0.0.1:5678", c.url))
		runs := c.runsOf(t, "deploy")
		if len(runs) != 1 {
			t.Fatalf("three sends of one delivery started runs %v, want one\n%s\n%s", runs, stdout, stderr)
		}
		var got []string
		for _, a := range regexp.MustCompile(`(?m)^HTTP (\d{3})$`).FindAllStringSubmatch(stdout, -1) {
			got = append(got, a[1])
		}
		if strings.Join(got, " ") != "201 200 200" {
			t.Errorf("the deliveries were answered %v, want 201 200 200:\n%s", got, stdout)
		}
		for _, want := range []string{"deploy v1", "/api/v1/hooks/deploy-main", "submitted → workflow instance"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("hooks list printed nothing with %q:\n%s", want, stdout)
			}
		}
		if st := c.waitEnded(t, runs[0]); st != dao.WorkflowSucceeded {
			t.Fatalf("the delivery's run ended %s", st)
		}
		if got := c.outputs(t, runs[0])["deploy"]; got != "deployed 4b825dc642cb6eb9a060e54bf8d69288fbee4904 of refs/heads/main" {
			t.Errorf("deploy's output = %q, want the pushed commit's", got)
		}
	})

	t.Run("assets", func(t *testing.T) {
		c.docScript(t, testenv.DocBlock(t, "docs/workflows.md", "Assets: data-aware runs", "sh", 1))
		var runs []int64
		waitUntil(t, 60*time.Second, "daily-report to be started by its assets", func() bool {
			runs = c.runsOf(t, "daily-report")
			return len(runs) > 0
		})
		if st := c.waitEnded(t, runs[0]); st != dao.WorkflowSucceeded {
			t.Fatalf("daily-report ended %s", st)
		}
		if got := c.outputs(t, runs[0])["report"]; !strings.HasPrefix(got, "[offline model]") {
			t.Errorf("report's output = %q, want the model's answer", got)
		}
		var took []string
		if err := c.db.SQL().Select(&took, `SELECT e.asset || ': ' || e.output FROM asset_consumption c
			JOIN asset_event e ON e.id = c.event_id WHERE c.workflow_instance_id = $1 ORDER BY e.asset`, runs[0]); err != nil {
			t.Fatal(err)
		}
		want := regexp.MustCompile(`^\[customers: 1204 customers, 17 new orders: 61240 orders loaded for \d{4}-\d\d-\d\d\n?\]$`)
		if !want.MatchString(fmt.Sprint(took)) {
			t.Errorf("daily-report's run took the events %q, want the emitted customers and load-orders' orders", took)
		}
		if got := c.runsOf(t, "daily-report"); len(got) != 1 {
			t.Errorf("one pair of events started runs %v, want one", got)
		}
	})

	t.Run("sensors", func(t *testing.T) {
		t.Cleanup(func() { os.RemoveAll("/tmp/zksched-inbox") })
		stdout, stderr := c.docScript(t, testenv.DocBlock(t, "docs/workflows.md", "Waiting for a condition: sensors", "sh", 1))
		wf := firstID(t, stdout)
		if !strings.Contains(stderr, fmt.Sprintf("workflow instance %d succeeded", wf)) {
			t.Fatalf("submit --wait printed:\n%s\n%s", stdout, stderr)
		}
		tasks := c.tasks(t, wf)
		for _, name := range []string{"partner-file", "upstream-done", "loaded", "quiet-period", "report"} {
			if tasks[name].State != dao.TaskSucceeded {
				t.Errorf("%s ended %s, want succeeded", name, tasks[name].State)
			}
		}
		if w := tasks["partner-file"].WorkerGroup; w != "etl" {
			t.Errorf("partner-file was checked in group %q, want etl", w)
		}
		if got := c.outputs(t, wf)["report"]; !strings.HasPrefix(got, "report written") {
			t.Errorf("report's output = %q", got)
		}
	})

	t.Run("cross-workflow waits", func(t *testing.T) {
		stdout, stderr := c.docScript(t, testenv.DocBlock(t, "docs/workflows.md", "Cross-workflow waits", "sh", 1))
		loads := c.runsOf(t, "load-orders")
		reports := c.runsOf(t, "orders-report")
		if len(loads) == 0 || len(reports) != 1 {
			t.Fatalf("runs of load-orders %v, of orders-report %v; want a report\n%s\n%s", loads, reports, stdout, stderr)
		}
		if st := c.workflowState(t, reports[0]); st != dao.WorkflowSucceeded {
			t.Fatalf("orders-report ended %s\n%s\n%s", st, stdout, stderr)
		}
		var found struct {
			ID       int64  `json:"id"`
			State    string `json:"state"`
			Workflow string `json:"workflow"`
		}
		if err := json.Unmarshal([]byte(c.outputs(t, reports[0])["loaded"]), &found); err != nil {
			t.Fatalf("loaded's output: %v", err)
		}
		if !slices.Contains(loads, found.ID) || found.State != "succeeded" || found.Workflow != "load-orders" {
			t.Errorf("loaded found %+v, want one of today's load-orders runs %v", found, loads)
		}
		if got := c.outputs(t, reports[0])["report"]; !strings.Contains(got, fmt.Sprintf(`"id": %d`, found.ID)) &&
			!strings.Contains(got, fmt.Sprintf(`"id":%d`, found.ID)) {
			t.Errorf("report's output = %q, want the run loaded found", got)
		}
	})

	t.Run("one run at a time per key", func(t *testing.T) {
		stdout, _ := c.docScript(t, testenv.DocBlock(t, "docs/schedules.md", "One run at a time per key", "sh", 1))
		ids := strings.Fields(stdout)
		if len(ids) != 3 {
			t.Fatalf("the three submits printed %q, want three ids", stdout)
		}
		for _, id := range ids {
			wf, _ := strconv.ParseInt(id, 10, 64)
			if st := c.waitEnded(t, wf); st != dao.WorkflowSucceeded {
				t.Errorf("thread run %d ended %s", wf, st)
			}
		}
	})
}
