package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/zksched/zksched/dao"
)

// TestBrowserApprovesAndRejects: a person approves a waiting task on its page with a text,
// which the task below reads and publishes; a rejection fails the task with its reason.
func TestBrowserApprovesAndRejects(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_API_TOKEN="+uiToken)
	master := e.Master("master")
	e.Worker("worker")
	wfFile := e.file(t, "review.yaml", `
name: review
tasks:
  - {name: draft, type: noop}
  - {name: approve, type: wait, depends-on: [draft], timeout: 1h}
  - {name: publish, type: shell, depends-on: [approve], command: 'echo "published: $ZKSCHED_UPSTREAM_approve_OUTPUT"'}
`)
	for range 2 {
		if out, code := e.Run("submit", wfFile); code != 0 {
			t.Fatalf("submit: exit %d\n%s", code, out)
		}
	}
	waitUntil(t, 30*time.Second, "both approvals to wait", func() bool {
		return e.tasks(t, 1)["approve"].State == dao.TaskWaiting && e.tasks(t, 2)["approve"].State == dao.TaskWaiting
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", master.Port)
	b := newBrowser(t)
	b.do(t, "log in", chromedp.Navigate(base+"/login?next=/tasks"), chromedp.WaitVisible(css("#login-form")),
		chromedp.SetValue(css("#token"), uiToken), chromedp.Click(css("#login")), chromedp.WaitVisible(css("#tasks")))

	b.do(t, "open the first approval", chromedp.Navigate(fmt.Sprintf("%s/tasks/%d", base, e.tasks(t, 1)["approve"].ID)),
		chromedp.WaitVisible(css("#signal")))
	b.screenshot(t, "approval")
	b.do(t, "approve it", chromedp.SendKeys(css("#signal-output"), "ship v2"), chromedp.Click(css("#approve")),
		chromedp.WaitVisible(css("#flash")))
	if got := b.text(t, "#flash"); !strings.Contains(got, "Approved") {
		t.Errorf("flash after approving reads %q", got)
	}
	waitUntil(t, 30*time.Second, "the first workflow to succeed", func() bool {
		wf, err := e.db.WorkflowGet(context.Background(), 1)
		return err == nil && wf.State == dao.WorkflowSucceeded
	})
	if o := e.tasks(t, 1)["publish"].Output; o == nil || *o != "published: ship v2" {
		t.Errorf("publish output = %v, want the approval's text", o)
	}

	b.do(t, "open the second approval", chromedp.Navigate(fmt.Sprintf("%s/tasks/%d", base, e.tasks(t, 2)["approve"].ID)),
		chromedp.WaitVisible(css("#signal")))
	b.do(t, "reject it", chromedp.SendKeys(css("#signal-output"), "not this week"), chromedp.Click(css("#reject")),
		chromedp.WaitVisible(css("#flash")))
	if got := b.text(t, "#task-error"); !strings.Contains(got, "not this week") {
		t.Errorf("the rejected task's error reads %q, want the reason", got)
	}
	waitUntil(t, 30*time.Second, "the second workflow to fail", func() bool {
		wf, err := e.db.WorkflowGet(context.Background(), 2)
		return err == nil && wf.State == dao.WorkflowFailed
	})
	if s := e.tasks(t, 2)["publish"].State; s != dao.TaskSkipped {
		t.Errorf("publish below a rejection is %s, want skipped", s)
	}
	// A decided task offers no decision any more.
	if n := get(t, b, "signal forms", chromedp.Evaluate[int](`document.querySelectorAll("#signal").length`)); n != 0 {
		t.Errorf("%v signal forms on a rejected task's page", n)
	}
}
