package e2e

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestAttackUIRedirectAndHiddenActions drives chromium against a master with users: a login
// reached through a hostile next parameter lands on the site, and a viewer's task and
// workflow pages show no kill, rerun or stop while an operator's do.
func TestAttackUIRedirectAndHiddenActions(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_USERS_FILE="+attackUsers(t, e))
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	// No worker: the tasks stay queued (killable) and the workflow running (stoppable); one
	// more task, failed, makes the rerun actions appear.
	if out, code := e.Run("submit", e.file(t, "wf.yaml", "name: wf\ntasks:\n  - {name: a, type: shell, command: 'true'}\n")); code != 0 {
		t.Fatalf("submit: %d %s", code, out)
	}
	queued := e.tasks(t, 1)["a"].ID
	var failed int64
	if err := e.db.SQL().Get(&failed, `INSERT INTO task_instance (workflow_instance_id, name, type, state, error, ended_at)
		VALUES (1, 'b', 'shell', 'failed', 'exit status 1', now()) RETURNING id`); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	present := func(sel string) bool {
		return get(t, b, "look for "+sel, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q) !== null`, sel)))
	}
	loginAs := func(token, next string) {
		t.Helper()
		b.do(t, "open the login", chromedp.Navigate(base+"/login?next="+next), chromedp.WaitVisible(css("#login-form")))
		b.do(t, "log in", chromedp.SetValue(css("#token"), token), chromedp.Click(css("#login")), chromedp.WaitVisible(css("#who")))
	}

	// The hostile redirects: after the login the browser is on the site's home page.
	for i, next := range []string{"/%09/evil.example/", "/%5C/evil.example/", "%2F%2Fevil.example", "/%252F%252Fevil.example"} {
		loginAs(attackViewer, next)
		loc := get(t, b, "location", chromedp.Location())
		if u, err := url.Parse(loc); err != nil || u.Host != fmt.Sprintf("127.0.0.1:%d", m.Port) || u.Path != "/" {
			t.Errorf("login with next=%s landed on %s, want %s/", next, loc, base)
		}
		if i == 0 {
			b.screenshot(t, "attack-login-redirect")
		}
		b.do(t, "log out", chromedp.Click(css(".logout button")), chromedp.WaitVisible(css("#login-form")))
	}

	pages := []struct{ path, action string }{
		{fmt.Sprintf("/tasks/%d", queued), "#kill"},
		{fmt.Sprintf("/tasks/%d", failed), "#rerun"},
		{"/workflows/1", "#stop"},
		{"/workflows/1", "#rerun"},
		{"/definitions/wf", "#run-form"},
	}
	for _, u := range []struct {
		token, name, role string
		actions           bool
	}{
		{attackViewer, "vic", "viewer", false},
		{attackOperator, "olga", "operator", true},
	} {
		loginAs(u.token, "/")
		if who := b.text(t, "#who"); !strings.Contains(who, u.name) || !strings.Contains(who, u.role) {
			t.Errorf("the layout shows %q, want %s and %s", who, u.name, u.role)
		}
		for _, p := range pages {
			b.do(t, "open "+p.path, chromedp.Navigate(base+p.path), chromedp.WaitVisible(css("h1")))
			if got := present(p.action); got != u.actions {
				t.Errorf("%s (%s) on %s: %s shown = %v, want %v", u.name, u.role, p.path, p.action, got, u.actions)
			}
		}
		b.do(t, "back to the workflow", chromedp.Navigate(base+"/workflows/1"), chromedp.WaitVisible(css("h1")))
		b.screenshot(t, "attack-workflow-"+u.role)
		b.do(t, "log out", chromedp.Click(css(".logout button")), chromedp.WaitVisible(css("#login-form")))
	}
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}
