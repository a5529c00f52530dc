package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
)

// The attack suite of issue 29, item 7: what a hostile filter, a sibling subdomain planting
// cookies, a cross-origin page and a task's hostile log can do to a real master and CLI.

// TestAttackBadTextFilterIsA400: a NUL byte or bytes that are not UTF-8 in a filter of the
// API or the UI are answered 400 with a clear message, and the master logs nothing at error
// level.
func TestAttackBadTextFilterIsA400(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_TOKEN="+attackToken)
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	c := client(t, "127.0.0.1", nil)
	for _, path := range []string{"/api/v1/task-instances?task=", "/api/v1/task-instances?worker=", "/api/v1/workflow-instances?name=",
		"/api/v1/audit-events?actor=", "/api/v1/audit-events?target=", "/api/v1/definitions?after=", "/tasks?task=", "/workflows?name=",
		"/audit?action=", "/definitions?after="} {
		for what, v := range map[string]string{"NUL byte": "%00", "not UTF-8": "%FF%FE"} {
			r := call(t, c, "GET", base+path+"x"+v, "", bearer(attackToken)...)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, what) {
				t.Errorf("GET %s: status %d, want 400 saying %q\n%.300s", path+"x"+v, r.status, what, r.body)
			}
		}
	}
	if lines := grepLines(m.Log(), `"level":"error"`); lines != "" {
		t.Errorf("the master logged bad filters at error level:\n%s", lines)
	}
}

// TestAttackPlantedCSRFCookieRefused: a sibling subdomain that can set cookies for the
// master's host (plain HTTP) plants a CSRF cookie and posts a form carrying its value, as
// the double-submit check used to accept, on behalf of a logged-in operator: refused, since
// the token is an HMAC of the session. The login, the refusals made with the session
// (cross-origin and CSRF) and the logout are in the audit trail under the operator.
func TestAttackPlantedCSRFCookieRefused(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	users := attackUsers(t, e)
	m := e.Master("master", "ZKSCHED_API_TOKEN="+attackToken, "ZKSCHED_API_USERS_FILE="+users)
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	out, code := e.Run("submit", e.file(t, "hold.yaml", "name: hold\ntasks:\n  - {name: wait, type: wait, timeout: 1h}\n"))
	wf, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if code != 0 || err != nil {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	user := client(t, "127.0.0.1", nil)
	session := login(t, user, base, attackOperator)
	home := call(t, user, "GET", fmt.Sprintf("%s/workflows/%d", base, wf), "")
	token := between(home.body, `name="csrf" value="`, `"`)
	if token == "" || token == session.Value {
		t.Fatalf("the page's CSRF token %q: want one that is not the session id", token)
	}

	// The attacker's forms, sent by the victim's browser (no Origin, as an old browser).
	attacker := client(t, "127.0.0.1", nil)
	planted := strings.Repeat("A", 43)
	form := "application/x-www-form-urlencoded"
	stop := fmt.Sprintf("%s/workflows/%d/stop", base, wf)
	for what, tc := range map[string]struct{ cookie, csrf string }{
		"a planted CSRF cookie and its value": {"zksched_session=" + session.Value + "; zksched_csrf=" + planted, planted},
		"the session id as the token":         {"zksched_session=" + session.Value, session.Value},
	} {
		r := call(t, attacker, "POST", stop, url.Values{"csrf": {tc.csrf}}.Encode(), "Content-Type", form, "Cookie", tc.cookie)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "CSRF token mismatch") {
			t.Errorf("%s: status %d, want 403 for a CSRF mismatch", what, r.status)
		}
	}
	if st := e.workflowState(t, wf); st == dao.WorkflowStopped {
		t.Fatalf("the forged form stopped workflow instance %d", wf)
	}
	r := call(t, attacker, "POST", base+"/logout", url.Values{"csrf": {token}}.Encode(), "Content-Type", form,
		"Cookie", "zksched_session="+session.Value, "Sec-Fetch-Site", "cross-site")
	if r.status != http.StatusForbidden {
		t.Errorf("a cross-site logout with the session: status %d, want 403", r.status)
	}
	if r := call(t, user, "POST", base+"/logout", url.Values{"csrf": {token}}.Encode(), "Content-Type", form); r.status != http.StatusSeeOther {
		t.Fatalf("the user's logout: status %d\n%s", r.status, r.body)
	}

	var trail struct {
		Items []dao.AuditEvent `json:"items"`
	}
	r = call(t, client(t, "127.0.0.1", nil), "GET", base+"/api/v1/audit-events?actor=olga", "", bearer(attackToken)...)
	if err := json.Unmarshal([]byte(r.body), &trail); err != nil {
		t.Fatalf("audit events: %d %v\n%s", r.status, err, r.body)
	}
	// The two forged stops are one refusal, folded into one row with its count, or into one
	// row a minute when they straddle the turn of one: rows that differ only by their minute
	// are added up here.
	var got []string
	var rows []string
	var counts []int
	for _, ev := range trail.Items {
		row := fmt.Sprintf("%s %s %s %s %s", ev.Role, ev.Action, ev.Target, ev.Outcome, ev.Client)
		if n := len(rows); n > 0 && rows[n-1] == row {
			counts[n-1] += ev.Count
			continue
		}
		rows, counts = append(rows, row), append(counts, ev.Count)
	}
	for i, row := range rows {
		got = append(got, fmt.Sprintf("%s ×%d", row, counts[i]))
	}
	want := []string{
		"operator session.logout user/olga ok 127.0.0.1 ×1",
		"operator session.cross-origin route/POST /logout refused: forbidden: cross-origin request refused 127.0.0.1 ×1",
		fmt.Sprintf("operator workflow.stop workflow-instance/%d refused: forbidden: CSRF token mismatch: reload the page and try again 127.0.0.1 ×2", wf),
		"operator session.login user/olga ok 127.0.0.1 ×1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("olga's audit trail, newest first:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// workflowState reads a workflow instance's state from the database.
func (e *e2e) workflowState(t *testing.T, id int64) dao.WorkflowState {
	t.Helper()
	var st dao.WorkflowState
	if err := e.db.SQL().Get(&st, `SELECT state FROM workflow_instance WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestAttackLogsEscapeTerminalControls: a task that prints terminal control sequences (clear
// the screen, retitle the window, write the clipboard, hide a line with a carriage return,
// C1 controls) cannot make `zksched logs` send them to the reader's terminal, from the
// database or through the API; --raw prints them as written.
func TestAttackLogsEscapeTerminalControls(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_TOKEN="+attackToken)
	e.Worker("worker")
	wfFile := e.file(t, "ansi.yaml", `
name: ansi
tasks:
  - name: paint
    type: shell
    command: |
      printf 'before\n\033[2J\033[H\033]0;pwned\007\033]52;c;cGF5bG9hZA==\033\\rm -rf /\rsafe\n\302\233 31m\n'
`)
	if out, code := e.Run("submit", "--wait", wfFile); code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	id := strconv.FormatInt(e.tasks(t, 1)["paint"].ID, 10)
	written := "before\n\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]52;c;cGF5bG9hZA==\x1b\\rm -rf /\rsafe\n\u009b 31m\n"
	escaped := `before` + "\n" + `\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]52;c;cGF5bG9hZA==\x1b\rm -rf /\x0dsafe` + "\n" + `\u009b 31m` + "\n"
	api := []string{"ZKSCHED_SERVER=" + fmt.Sprintf("http://127.0.0.1:%d", m.Port), "ZKSCHED_TOKEN=" + attackToken}
	for _, env := range [][]string{nil, api} {
		r := e.cli(t, env, "logs", id)
		if r.code != 0 || r.stdout != escaped {
			t.Errorf("logs (%v): exit %d, printed %q\nwant %q\n%s", env, r.code, r.stdout, escaped, r.stderr)
		}
		r = e.cli(t, env, "logs", "--raw", id)
		if r.code != 0 || r.stdout != written {
			t.Errorf("logs --raw (%v): exit %d, printed %q\nwant %q\n%s", env, r.code, r.stdout, written, r.stderr)
		}
	}
}
