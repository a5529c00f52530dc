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

// TestBrowserRunsADefinitionAndWorksSchedules: an operator runs a stored definition from its
// page, fills the form drawn from its params with one bad value, reads the problem beside
// its field, fixes it and lands on the new instance, whose task reads the params as typed;
// then, on the Schedules page, disables, enables and triggers a schedule, and triggers it
// with a param through its workflow's run form.
func TestBrowserRunsADefinitionAndWorksSchedules(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_API_TOKEN="+uiToken)
	master := e.Master("master")
	e.Worker("worker")
	run := e.file(t, "run.yaml", `
name: ui-run
params:
  region: {enum: [eu, us], default: eu}
  size: {type: integer, default: 2, description: How many rows.}
  opts: {type: json, default: {}}
  day: {required: true, pattern: '\d{4}-\d{2}-\d{2}', description: The day to load.}
tasks:
  - {name: show, type: shell, command: 'echo "$ZKSCHED_PARAM_region $ZKSCHED_PARAM_size $ZKSCHED_PARAM_opts $ZKSCHED_PARAM_day"'}
`)
	cron := e.file(t, "cron.yaml", "name: ui-cron\nparams: {region: eu}\nschedule: {cron: '@daily'}\n"+
		"tasks:\n  - {name: hello, type: shell, command: 'echo \"hello $ZKSCHED_PARAM_region\"'}\n")
	for _, f := range []string{run, cron} {
		if out, code := e.Run("define", f); code != 0 {
			t.Fatalf("define %s: exit %d\n%s", f, code, out)
		}
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", master.Port)
	b := newBrowser(t)
	b.do(t, "log in", chromedp.Navigate(base+"/login?next=/tasks"), chromedp.WaitVisible(css("#login-form")),
		chromedp.SetValue(css("#token"), uiToken), chromedp.Click(css("#login")), chromedp.WaitVisible(css("#tasks")))

	// From the definitions list to the definition's page and its form.
	b.do(t, "open the definition", chromedp.Navigate(base+"/definitions"), chromedp.Click(css(`a[href="/definitions/ui-run"]`)),
		chromedp.WaitVisible(css("#run-form")))
	value := func(id string) string {
		return get(t, b, "the value of "+id, chromedp.Evaluate[string](`document.getElementById("`+id+`").value`))
	}
	if got := [3]string{value("param-region"), value("param-size"), value("param-opts")}; got != [3]string{"eu", "2", "{}"} {
		t.Errorf("the form's defaults read %q", got)
	}
	b.do(t, "fill the form with a bad json value", chromedp.SetValue(css("#param-region"), "us"),
		chromedp.SetValue(css("#param-size"), "007"), chromedp.SetValue(css("#param-day"), "2026-11-01"),
		chromedp.SetValue(css("#param-opts"), "{bad"), chromedp.Click(css("#run-submit")),
		chromedp.WaitVisible(css("#param-opts-error")))
	b.screenshot(t, "definition-run-refused")
	if got := b.text(t, "#param-opts-error"); got != `params: opts must be JSON, not "{bad"` {
		t.Errorf("the error beside opts reads %q", got)
	}
	if got := b.text(t, "#run-errors"); !strings.Contains(got, "params: opts must be JSON") {
		t.Errorf("the summary reads %q", got)
	}
	if got := [3]string{value("param-region"), value("param-size"), value("param-day")}; got != [3]string{"us", "007", "2026-11-01"} {
		t.Errorf("the refused form kept %q", got)
	}

	b.do(t, "fix it and run", chromedp.SetValue(css("#param-opts"), `{"k": [1, 2]}`), chromedp.Click(css("#run-submit")),
		chromedp.WaitVisible(css("#flash")))
	if loc := get(t, b, "location", chromedp.Location()); loc != base+"/workflows/1?done=submitted" {
		t.Errorf("after the run the browser is at %s", loc)
	}
	if got := b.text(t, "#flash"); !strings.HasPrefix(got, "Submitted:") {
		t.Errorf("the flash reads %q", got)
	}
	b.screenshot(t, "definition-run-submitted")
	waitUntil(t, 30*time.Second, "the run to succeed", func() bool {
		w, err := e.db.WorkflowGet(context.Background(), 1)
		return err == nil && w.State == dao.WorkflowSucceeded
	})
	if o := e.tasks(t, 1)["show"].Output; o == nil || *o != `us 7 {"k":[1,2]} 2026-11-01` {
		t.Errorf("the task read its params as %v", o)
	}

	// The Schedules page: disable, enable, trigger.
	enabled := func() bool {
		s, err := e.db.ScheduleGet(context.Background(), "ui-cron")
		if err != nil {
			t.Fatal(err)
		}
		return s.Enabled
	}
	row := `#schedules tr[data-workflow="ui-cron"] `
	b.do(t, "open the schedules", chromedp.Navigate(base+"/definitions"), chromedp.Click(css(`header nav a[href="/schedules"]`)),
		chromedp.WaitVisible(css(row+"button.disable")))
	if got := b.text(t, row+".next-fires"); !strings.Contains(got, "00:00") {
		t.Errorf("the next fires read %q", got)
	}
	b.screenshot(t, "schedules")
	b.do(t, "disable", chromedp.Click(css(row+"button.disable")), chromedp.WaitVisible(css(row+"button.enable")))
	if got := b.text(t, "#flash"); !strings.HasPrefix(got, "Disabled:") || enabled() {
		t.Errorf("after the disable the flash reads %q and the schedule is enabled: %v", got, enabled())
	}
	if got := b.text(t, row+".schedule-state"); got != "disabled" {
		t.Errorf("the disabled schedule's state reads %q", got)
	}
	b.do(t, "enable", chromedp.Click(css(row+"button.enable")), chromedp.WaitVisible(css(row+"button.disable")))
	if got := b.text(t, "#flash"); !strings.HasPrefix(got, "Enabled:") || !enabled() {
		t.Errorf("after the enable the flash reads %q and the schedule is enabled: %v", got, enabled())
	}
	b.do(t, "trigger", chromedp.Click(css(row+"button.trigger")), chromedp.WaitVisible(css("#triggered")))
	if got := b.text(t, "#flash"); !strings.HasPrefix(got, "Triggered:") {
		t.Errorf("after the trigger the flash reads %q", got)
	}
	b.screenshot(t, "schedules-triggered")
	b.do(t, "open the triggered instance", chromedp.Click(css("#triggered a")), chromedp.WaitVisible(css("#wf-tasks")))
	waitUntil(t, 30*time.Second, "the triggered run to succeed", func() bool {
		w, err := e.db.WorkflowGet(context.Background(), 2)
		return err == nil && w.State == dao.WorkflowSucceeded
	})
	if o := e.tasks(t, 2)["hello"].Output; o == nil || *o != "hello eu" {
		t.Errorf("the triggered task's output is %v", o)
	}
	// Trigger with params: the schedule's "with params…" opens the workflow's run form, which
	// triggers the schedule with them.
	b.do(t, "trigger with params", chromedp.Navigate(base+"/schedules"), chromedp.Click(css(row+"a.trigger-params")),
		chromedp.WaitVisible(css("#run-trigger")), chromedp.SetValue(css("#param-region"), "us"),
		chromedp.Click(css("#run-submit")), chromedp.WaitVisible(css("#flash")))
	if loc := get(t, b, "location", chromedp.Location()); loc != base+"/workflows/3?done=triggered-run" {
		t.Errorf("after the trigger with params the browser is at %s", loc)
	}
	waitUntil(t, 30*time.Second, "the run triggered with params to succeed", func() bool {
		w, err := e.db.WorkflowGet(context.Background(), 3)
		return err == nil && w.State == dao.WorkflowSucceeded
	})
	if o := e.tasks(t, 3)["hello"].Output; o == nil || *o != "hello us" {
		t.Errorf("the task triggered with params output %v", o)
	}
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened: a script ran", n)
	}
}
