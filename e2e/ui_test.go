package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/zksched/zksched/dao"
)

// The browser tests drive Debian's chromium (installed by bin/test.sh) through chromedp
// against a real cluster. Each page they visit is kept as a screenshot under
// .run/screenshots/; with ZKSCHED_UPDATE_DOCS=1 the task list and a task page are copied to
// docs/ for docs/http-api.md.

const uiToken = "ui-test-token-0123456789"

// browser is a headless chromium tab.
type browser struct {
	ctx  context.Context
	shot string // screenshot folder
	// dialogs counts JavaScript dialogs (alert, confirm): an injected script would open one.
	dialogs atomic.Int32
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("no chromium on the PATH: bin/test.sh installs it (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root, where chromium's sandbox refuses to start
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	b := &browser{ctx: ctx, shot: filepath.Join(repoRoot(), ".run", "screenshots")}
	if err := os.MkdirAll(b.shot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	dismiss := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		return err
	})
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.dialogs.Add(1)
			go chromedp.Do(ctx, dismiss) // never from the listener itself: it would block the tab
		}
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", b.shot)
	return b
}

// do runs steps, failing the test with what and the page's address.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		t.Fatalf("%s (at %s): %v", what, loc, err)
	}
}

// get runs an action that reads a value.
func get[T any](t *testing.T, b *browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		t.Fatalf("%s (at %s): %v", what, loc, err)
	}
	return v
}

// screenshot saves the whole page as name.png.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	png := get(t, b, "screenshot "+name, chromedp.FullScreenshot(100))
	p := filepath.Join(b.shot, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("ZKSCHED_UPDATE_DOCS") == "1" && (name == "tasks" || name == "task") {
		docs := filepath.Join(repoRoot(), "docs")
		if err := os.MkdirAll(docs, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(docs, "ui-"+name+".png"), png, 0o644)
		}
	}
}

// text reads the text of the first element that matches a CSS selector.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	b.do(t, "wait for "+sel, chromedp.WaitReady(chromedp.CSS(sel)))
	return get(t, b, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// TestBrowser drives the UI as an operator would, with authentication on: log in, read the
// task list, filter it, open a task and read its log, kill a running task, rerun a failed one,
// look at a workflow's graph and the cluster, and see a hostile task name shown as text.
func TestBrowser(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_API_TOKEN="+uiToken)
	master := e.Master("master")
	worker := e.Worker("worker")
	marker := filepath.Join(e.dir, "flaky-ran-once")
	wfFile := e.file(t, "ui.yaml", `
name: ui-demo
tasks:
  - {name: extract, type: shell, command: 'printf "<b>not bold</b> \033[31mred\033[0m\n"; for i in 1 2 3; do echo "row $i"; done; echo extracted'}
  - {name: transform, type: shell, depends-on: [extract], command: 'echo transformed'}
  - {name: flaky, type: shell, depends-on: [extract], command: 'if [ -e `+marker+` ]; then echo fixed; else touch `+marker+`; echo "no input yet" >&2; exit 3; fi'}
  - {name: load, type: shell, depends-on: [transform, flaky], command: 'echo loaded'}
  - {name: long, type: shell, command: 'echo working; sleep 120'}
  - {name: report, type: noop, depends-on: [load]}
`)
	if out, code := e.Run("submit", wfFile); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	const wf = 1
	waitUntil(t, 30*time.Second, "long running and flaky failed", func() bool {
		ts := e.tasks(t, wf)
		return ts["long"].State == dao.TaskRunning && ts["flaky"].State == dao.TaskFailed && ts["transform"].State == dao.TaskSucceeded
	})
	// A task whose name is a script, in a finished workflow of its own (names like this cannot
	// come from a workflow file, but the UI must not trust the database either).
	if out, code := e.Run("submit", "--wait", e.file(t, "other.yaml", "name: other\ntasks:\n  - {name: only, type: noop}\n")); code != 0 {
		t.Fatalf("submit other: %d %s", code, out)
	}
	var scriptTask int64
	if err := e.db.SQL().Get(&scriptTask, `INSERT INTO task_instance (workflow_instance_id, name, type, state, error, ended_at)
		VALUES (2, '<script>alert(1)</script>', 'shell', 'failed', '<img src=x onerror=alert(2)>', now()) RETURNING id`); err != nil {
		t.Fatal(err)
	}
	tasks := e.tasks(t, wf)
	base := fmt.Sprintf("http://127.0.0.1:%d", master.Port)
	b := newBrowser(t)

	// Log in: the UI sends us to the form first.
	b.do(t, "open the task list", chromedp.Navigate(base+"/tasks"), chromedp.WaitVisible(css("#login-form")))
	if loc := get(t, b, "location", chromedp.Location()); !strings.Contains(loc, "/login?next=") {
		t.Fatalf("without a session the UI is at %s, want the login form", loc)
	}
	b.do(t, "wrong token", chromedp.SendKeys(css("#token"), "wrong-token"), chromedp.Click(css("#login")),
		chromedp.WaitVisible(css("#login-error")))
	b.screenshot(t, "login")
	b.do(t, "log in", chromedp.SetValue(css("#token"), uiToken), chromedp.Click(css("#login")),
		chromedp.WaitVisible(css("#tasks")))

	// The task list, newest first, with the states as badges.
	rowStates := chromedp.Evaluate[[]string](`[...document.querySelectorAll("#tasks tbody tr[data-state]")].map(r => r.dataset.state)`)
	if rows := get(t, b, "rows", rowStates); len(rows) < 7 {
		t.Fatalf("task list shows %v, want all of the task instances", rows)
	}
	b.screenshot(t, "tasks")

	// Filter by state: only failed tasks remain, and the URL keeps the filter.
	b.do(t, "filter by state", chromedp.SetValue(css("#f-state"), "failed"), chromedp.Click(css("#apply")),
		chromedp.WaitVisible(css("#clear")))
	loc := get(t, b, "location", chromedp.Location())
	states := get(t, b, "rows", rowStates)
	if !strings.Contains(loc, "state=failed") || len(states) != 2 || states[0] != "failed" || states[1] != "failed" {
		t.Fatalf("after filtering at %s the rows are %v, want the two failed tasks", loc, states)
	}
	// The live refresh replaces the rows and keeps the filter.
	before := b.text(t, "#refreshed")
	waitUntil(t, 10*time.Second, "a live refresh", func() bool {
		now, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.getElementById("refreshed").textContent`))
		return err == nil && now != before
	})
	if states := get(t, b, "rows", rowStates); len(states) != 2 {
		t.Fatalf("after a live refresh the rows are %v", states)
	}
	b.screenshot(t, "tasks-failed")

	// The script-named task is text, and no script ran.
	if name := b.text(t, fmt.Sprintf(`a.task-name[href="/tasks/%d"]`, scriptTask)); name != "<script>alert(1)</script>" {
		t.Errorf("the hostile name reads %q", name)
	}
	b.do(t, "open the hostile task", chromedp.Navigate(fmt.Sprintf("%s/tasks/%d", base, scriptTask)), chromedp.WaitVisible(css("#task-name")))
	if got := b.text(t, "#task-name"); got != "<script>alert(1)</script>" {
		t.Errorf("task page title reads %q", got)
	}
	if got := b.text(t, "#task-error"); got != "<img src=x onerror=alert(2)>" {
		t.Errorf("task error reads %q", got)
	}
	b.screenshot(t, "task-hostile-name")

	// Open a task from the list and read its log: HTML and ANSI escapes are text.
	b.do(t, "open extract from the list", chromedp.Navigate(base+"/tasks?task=extract"),
		chromedp.Click(`//a[@class="task-name" and text()="extract"]`), chromedp.WaitVisible(css("#log-text")))
	if log := b.text(t, "#log-text"); !strings.Contains(log, "<b>not bold</b> ␛[31mred␛[0m") || !strings.Contains(log, "row 3\nextracted") {
		t.Errorf("extract log reads %q", log)
	}
	if n := get(t, b, "markup in the log", chromedp.Evaluate[int](`document.querySelectorAll("#log-text b").length`)); n != 0 {
		t.Error("the log's <b> became markup")
	}
	b.screenshot(t, "task")

	// Kill the running task: confirm, and the worker stops it.
	b.do(t, "kill long", chromedp.Navigate(fmt.Sprintf("%s/tasks/%d", base, tasks["long"].ID)),
		chromedp.Click(css("#kill summary")), chromedp.WaitVisible(css("#kill-confirm")))
	b.screenshot(t, "task-kill-confirm")
	b.do(t, "confirm the kill", chromedp.Click(css("#kill-confirm")), chromedp.WaitVisible(css("#flash")))
	if f := b.text(t, "#flash"); !strings.Contains(f, "Kill requested") {
		t.Errorf("flash after the kill: %q", f)
	}
	waitUntil(t, 15*time.Second, "long to be killed", func() bool { return e.tasks(t, wf)["long"].State == dao.TaskKilled })
	b.do(t, "reload", chromedp.Reload(), chromedp.WaitVisible(css("#attempts")))
	if got := b.text(t, "h1 .badge"); got != "killed" {
		t.Errorf("long's badge reads %q after the kill", got)
	}
	if o := e.outcomes(t, tasks["long"].ID); !strings.HasPrefix(o, "killed@") {
		t.Errorf("long attempts = %s", o)
	}

	// Rerun the failed task: it runs again, its skipped downstream follow, the workflow goes on.
	b.do(t, "rerun flaky", chromedp.Navigate(fmt.Sprintf("%s/tasks/%d", base, tasks["flaky"].ID)),
		chromedp.Click(css("#rerun summary")), chromedp.WaitVisible(css("#rerun-confirm")), chromedp.Click(css("#rerun-confirm")),
		chromedp.WaitVisible(css("#flash")))
	waitUntil(t, 30*time.Second, "the rerun to carry the workflow through", func() bool {
		ts := e.tasks(t, wf)
		return ts["flaky"].State == dao.TaskSucceeded && ts["report"].State == dao.TaskSucceeded
	})
	b.do(t, "reload", chromedp.Reload(), chromedp.WaitVisible(css("#attempts")))
	if got := b.text(t, "h1 .badge"); got != "succeeded" {
		t.Errorf("flaky's badge reads %q after the rerun", got)
	}
	if got := b.text(t, "#output"); got != "fixed" {
		t.Errorf("flaky's output reads %q", got)
	}
	b.screenshot(t, "task-rerun")

	// The workflow's graph, coloured by state (long was killed: the workflow failed).
	waitUntil(t, 15*time.Second, "the workflow to finish", func() bool {
		w, err := e.db.WorkflowGet(context.Background(), wf)
		return err == nil && w.State.Terminal()
	})
	b.do(t, "workflow graph", chromedp.Navigate(fmt.Sprintf("%s/workflows/%d", base, wf)), chromedp.WaitVisible(css("#dag")))
	nodes := get(t, b, "graph nodes", chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll("#dag g.node")].map(g => [g.dataset.task, g.getAttribute("class")]))`))
	if nodes["long"] != "node st-killed" || nodes["report"] != "node st-succeeded" || len(nodes) != 6 {
		t.Errorf("graph nodes = %v", nodes)
	}
	b.screenshot(t, "workflow")

	// The cluster: the master is the leader, the worker shows its slots.
	b.do(t, "cluster", chromedp.Navigate(base+"/cluster"), chromedp.WaitVisible(css("#workers")))
	if got := b.text(t, "#masters"); !strings.Contains(got, "leader") || !strings.Contains(got, master.ID(t, time.Second)) {
		t.Errorf("masters table reads %q", got)
	}
	if got := b.text(t, "#workers"); !strings.Contains(got, worker.ID(t, time.Second)) || !strings.Contains(got, "/ 16") {
		t.Errorf("workers table reads %q", got)
	}
	b.screenshot(t, "cluster")

	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened: a script ran", n)
	}

	// The metrics of both nodes, as Prometheus scrapes them (no token needed).
	for _, tc := range []struct {
		port int
		want []string
	}{
		{master.Port, []string{`zksched_zookeeper_session_state{state="connected"} 1`, "zksched_leader 1", "zksched_queue_depth",
			`zksched_failovers_total{role="worker"} 0`, `zksched_node_info{node="` + master.ID(t, time.Second) + `",role="master"`}},
		{worker.Port, []string{`zksched_task_claims_total{group="default"}`, "zksched_task_dispatch_seconds_bucket",
			`zksched_task_attempts_total{outcome="killed"} 1`, `zksched_task_attempts_total{outcome="failed"} 1`,
			`zksched_zookeeper_session_state{state="connected"} 1`, "zksched_tasks_running 0"}},
	} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", tc.port))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, w := range tc.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("metrics of port %d lack %q", tc.port, w)
			}
		}
	}
	// The master's log carries the action with its fields.
	line := master.WaitLog(t, 5*time.Second, "asked the worker to kill a running task instance")
	for _, f := range []string{`"node":"`, `"task_instance":`, `"workflow_instance":1`, `"attempt":1`, `"request_id":"`} {
		if !strings.Contains(line, f) {
			t.Errorf("kill log line lacks %s: %s", f, line)
		}
	}
}
