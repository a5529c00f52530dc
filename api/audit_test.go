package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

type auditJSON struct {
	Items []struct {
		ID      int64          `json:"id"`
		Actor   string         `json:"actor"`
		Role    string         `json:"role"`
		Action  string         `json:"action"`
		Target  string         `json:"target"`
		Params  map[string]any `json:"params"`
		Client  string         `json:"client"`
		Outcome string         `json:"outcome"`
	} `json:"items"`
	Next int64 `json:"next"`
}

// audit lists the trail through the API.
func (b *testBundle) audit(t *testing.T, query string) auditJSON {
	t.Helper()
	r := b.do(t, "GET", "/api/v1/audit-events?"+query, "")
	if r.status != http.StatusOK {
		t.Fatalf("audit events: %d %s", r.status, r.body)
	}
	var out auditJSON
	r.json(t, &out)
	return out
}

// TestEveryChangeLeavesItsAuditRow: each change through the API and the UI leaves one row
// naming the principal, its role, the client and the target; each refused attempt leaves a
// refused row; a request without identity (401) leaves nothing.
func TestEveryChangeLeavesItsAuditRow(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-audit-token"
	b := setup(t, setupOpts{token: token})
	f := b.seed(t, 6)
	file := "name: nightly\nparams: {region: {}}\ntasks:\n  - {name: a, type: shell, command: secret-command}\n"
	sched := "name: cron\nparams: {k: {}}\nschedule: {cron: '30 2 * * *'}\ntasks:\n  - {name: t, type: noop}\n"
	yaml := []string{"Content-Type", "application/yaml"}
	js := []string{"Content-Type", "application/json"}
	steps := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		// action and target of the row; "" target: checked by check alone.
		action, target string
		outcome        string // "ok" or a prefix of the refusal
		check          func(t *testing.T, params map[string]any)
	}{
		{"store a definition", "POST", "/api/v1/definitions", file, yaml, 200, dao.AuditDefinitionStore, "definition/nightly", "ok",
			func(t *testing.T, p map[string]any) {
				sum := sha256.Sum256([]byte(file))
				if p["name"] != "nightly" || p["version"] != 1.0 || p["sha256"] != hex.EncodeToString(sum[:]) || len(p) != 3 {
					t.Errorf("params %v: want name, version and the file's sha256 only", p)
				}
			}},
		{"submit", "POST", "/api/v1/workflow-instances", `{"name": "nightly", "params": {"region": "eu"}}`, js, 201,
			dao.AuditWorkflowSubmit, "", "ok", func(t *testing.T, p map[string]any) {
				if p["name"] != "nightly" || p["version"] != 1.0 || fmt.Sprint(p["params"]) != "map[region:eu]" {
					t.Errorf("params %v", p)
				}
			}},
		{"kill", "POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t5"]), "", nil, 200,
			dao.AuditTaskKill, fmt.Sprintf("task-instance/%d", f.byName["t5"]), "ok", nil},
		{"rerun a task", "POST", fmt.Sprintf("/api/v1/task-instances/%d/rerun", f.byName["t2"]), "", nil, 200,
			dao.AuditTaskRerun, fmt.Sprintf("task-instance/%d", f.byName["t2"]), "ok", nil},
		{"stop", "POST", fmt.Sprintf("/api/v1/workflow-instances/%d/stop", f.wf), "", nil, 200,
			dao.AuditWorkflowStop, fmt.Sprintf("workflow-instance/%d", f.wf), "ok", nil},
		{"rerun a workflow", "POST", fmt.Sprintf("/api/v1/workflow-instances/%d/rerun", f.wf), "", nil, 200,
			dao.AuditWorkflowRerun, fmt.Sprintf("workflow-instance/%d", f.wf), "ok", nil},
		{"store a scheduled definition", "POST", "/api/v1/definitions", sched, yaml, 200, dao.AuditDefinitionStore, "definition/cron", "ok", nil},
		{"disable", "POST", "/api/v1/schedules/cron/disable", "", nil, 200, dao.AuditScheduleDisable, "schedule/cron", "ok", nil},
		{"enable", "POST", "/api/v1/schedules/cron/enable", "", nil, 200, dao.AuditScheduleEnable, "schedule/cron", "ok", nil},
		{"trigger", "POST", "/api/v1/schedules/cron/trigger", `{"params": {"k": "v"}}`, js, 201, dao.AuditScheduleTrigger, "schedule/cron", "ok",
			func(t *testing.T, p map[string]any) {
				if fmt.Sprint(p["params"]) != "map[k:v]" {
					t.Errorf("params %v", p)
				}
			}},
		// Refused: each leaves a row of its own.
		{"kill a finished task", "POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t0"]), "", nil, 409,
			dao.AuditTaskKill, fmt.Sprintf("task-instance/%d", f.byName["t0"]), "refused: conflict: cannot kill", nil},
		{"rerun a missing task", "POST", "/api/v1/task-instances/987654/rerun", "", nil, 404,
			dao.AuditTaskRerun, "task-instance/987654", "refused: not found", nil},
		{"stop a missing workflow", "POST", fmt.Sprintf("/api/v1/workflow-instances/%d/stop", f.other+1000), "", nil, 404,
			dao.AuditWorkflowStop, fmt.Sprintf("workflow-instance/%d", f.other+1000), "refused: not found", nil},
		{"store a broken file", "POST", "/api/v1/definitions", "name: [", yaml, 400, dao.AuditDefinitionStore, "", "refused: bad request",
			func(t *testing.T, p map[string]any) {
				if len(p) != 0 {
					t.Errorf("params %v of a refused file: want none", p)
				}
			}},
		{"submit an unknown workflow", "POST", "/api/v1/workflow-instances", `{"name": "nope"}`, js, 404,
			dao.AuditWorkflowSubmit, "definition/nope", "refused: not found", nil},
		{"trigger without a schedule", "POST", "/api/v1/schedules/nightly/trigger", "", nil, 404,
			dao.AuditScheduleTrigger, "schedule/nightly", "refused: not found", nil},
	}
	for _, s := range steps {
		before := b.audit(t, "limit=1")
		r := b.do(t, s.method, s.path, s.body, s.headers...)
		if r.status != s.status {
			t.Fatalf("%s: status %d, want %d: %s", s.name, r.status, s.status, r.body)
		}
		got := b.audit(t, "limit=10")
		var n int
		for _, e := range got.Items {
			if len(before.Items) == 0 || e.ID > before.Items[0].ID {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s: %d new audit rows, want 1: %+v", s.name, n, got.Items)
		}
		e := got.Items[0]
		if e.Actor != "admin" || e.Role != "admin" || e.Client != "127.0.0.1" || e.Action != s.action ||
			(s.target != "" && e.Target != s.target) || !strings.HasPrefix(e.Outcome, s.outcome) ||
			(s.outcome == "ok" && e.Outcome != "ok") {
			t.Errorf("%s: row %+v; want actor admin, role admin, client 127.0.0.1, %s on %q, outcome %q", s.name, e, s.action, s.target, s.outcome)
		}
		if s.check != nil {
			s.check(t, e.Params)
		}
		if s.action == dao.AuditWorkflowSubmit && s.status == 201 {
			var created struct {
				ID int64 `json:"id"`
			}
			r.json(t, &created)
			if e.Target != fmt.Sprintf("workflow-instance/%d", created.ID) {
				t.Errorf("submit's target %q, want the new instance %d", e.Target, created.ID)
			}
		}
	}
	// No identity, no row.
	before := b.audit(t, "")
	b.token = ""
	if r := b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t4"]), ""); r.status != http.StatusUnauthorized {
		t.Fatalf("kill without a token: %d", r.status)
	}
	b.token = token
	if after := b.audit(t, ""); len(after.Items) != len(before.Items) {
		t.Errorf("a 401 left %d rows", len(after.Items)-len(before.Items))
	}

	// The UI's forms: a kill with the CSRF token is recorded, one without is refused (403)
	// and recorded as refused, under the session's principal.
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	page := func(path string) string {
		resp, err := client.Get(b.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	post := func(path string, form url.Values) int {
		resp, err := client.PostForm(b.srv.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	csrf := between(page("/login"), `name="csrf" value="`, `"`)
	if st := post("/login", url.Values{"csrf": {csrf}, "token": {token}}); st != http.StatusSeeOther {
		t.Fatalf("login: %d", st)
	}
	t4 := fmt.Sprintf("/tasks/%d", f.byName["t4"])
	// The task's page, opened with the session, carries the session's CSRF token.
	csrf = between(page(t4), `name="csrf" value="`, `"`)
	if st := post(t4+"/kill", url.Values{"csrf": {"forged-forged-forged-forged-forged-forged"}}); st != http.StatusForbidden {
		t.Fatalf("form without the CSRF token: %d", st)
	}
	if st := post(t4+"/kill", url.Values{"csrf": {csrf}}); st != http.StatusSeeOther {
		t.Fatalf("form kill: %d", st)
	}
	got := b.audit(t, "limit=2&target="+url.QueryEscape(fmt.Sprintf("task-instance/%d", f.byName["t4"])))
	if len(got.Items) != 2 || got.Items[0].Outcome != "ok" || !strings.HasPrefix(got.Items[1].Outcome, "refused: forbidden: CSRF") ||
		got.Items[0].Action != dao.AuditTaskKill || got.Items[0].Actor != "admin" {
		t.Errorf("rows of the form kills: %+v", got.Items)
	}
}

// TestChangeWithoutItsRecordDoesNotCommit: with audit_event refusing inserts, every change
// through the API fails and leaves nothing changed.
func TestChangeWithoutItsRecordDoesNotCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	if r := b.do(t, "POST", "/api/v1/definitions", "name: cron\nschedule: {cron: '30 2 * * *'}\ntasks:\n  - {name: t, type: noop}\n",
		"Content-Type", "application/yaml"); r.status != 200 {
		t.Fatalf("store: %d %s", r.status, r.body)
	}
	daotest.RefuseAudit(t, b.db)
	countOf := func(table string) int {
		var n int
		if err := b.db.SQL().Get(&n, "SELECT count(*) FROM "+table); err != nil {
			t.Fatal(err)
		}
		return n
	}
	defs, instances, fires := countOf("workflow_definition"), countOf("workflow_instance"), countOf("schedule_fire")
	for _, c := range []struct{ path, body string }{
		{"/api/v1/definitions", "name: other2\ntasks:\n  - {name: t, type: noop}\n"},
		{"/api/v1/workflow-instances", `{"name": "wf"}`},
		{fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t5"]), ""},
		{fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t3"]), ""},
		{fmt.Sprintf("/api/v1/task-instances/%d/rerun", f.byName["t2"]), ""},
		{fmt.Sprintf("/api/v1/workflow-instances/%d/stop", f.wf), ""},
		{"/api/v1/schedules/cron/disable", ""},
		{"/api/v1/schedules/cron/trigger", ""},
	} {
		ct := "application/json"
		if strings.HasSuffix(c.path, "/definitions") {
			ct = "application/yaml"
		}
		if r := b.do(t, "POST", c.path, c.body, "Content-Type", ct); r.status != http.StatusInternalServerError {
			t.Errorf("%s with its record refused: %d %s, want 500", c.path, r.status, r.body)
		}
	}
	if got := []int{countOf("workflow_definition"), countOf("workflow_instance"), countOf("schedule_fire")}; got[0] != defs ||
		got[1] != instances || got[2] != fires {
		t.Errorf("definitions, instances, fires %v; want %v unchanged", got, []int{defs, instances, fires})
	}
	tasks, _ := b.db.TaskListByWorkflow(b.ctx, f.wf)
	for _, ti := range tasks {
		if ti.KillRequested || ti.State == dao.TaskKilled || (ti.Name == "t2" && ti.State != dao.TaskFailed) {
			t.Errorf("task %s: %s kill requested %v after refused changes", ti.Name, ti.State, ti.KillRequested)
		}
	}
	if w, _ := b.db.WorkflowGet(b.ctx, f.wf); w.State != dao.WorkflowRunning {
		t.Errorf("workflow %s after a refused stop", w.State)
	}
	if s, _ := b.db.ScheduleGet(b.ctx, "cron"); !s.Enabled {
		t.Error("schedule disabled without its record")
	}
}

// TestAuditListAndPage: the API's filters and cursor, its refusals of bad filters, the Audit
// page, and no route that writes or deletes a row.
func TestAuditListAndPage(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	for i := range 7 {
		ev := dao.AuditEvent{Actor: []string{"alice", "bob"}[i%2], Role: "operator", Action: dao.AuditTaskKill,
			Target: fmt.Sprintf("task-instance/%d", 10+i), Client: "10.0.0.1"}
		if i == 6 {
			ev.Action, ev.Target, ev.Actor = dao.AuditWorkflowStop, "workflow-instance/3", "<script>alert(1)</script>"
			ev.Outcome = dao.AuditRefused("conflict: it is stopped")
		}
		if err := b.db.AuditInsert(b.ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	var seen []int64
	q := "limit=3"
	for range 10 {
		page := b.audit(t, q)
		for _, e := range page.Items {
			seen = append(seen, e.ID)
		}
		if page.Next == 0 {
			break
		}
		q = fmt.Sprintf("limit=3&before=%d", page.Next)
	}
	if fmt.Sprint(seen) != "[7 6 5 4 3 2 1]" {
		t.Errorf("pages of 3: %v", seen)
	}
	if got := b.audit(t, "actor=bob"); len(got.Items) != 3 {
		t.Errorf("actor=bob: %+v", got.Items)
	}
	if got := b.audit(t, "action=workflow.stop&target=workflow-"); len(got.Items) != 1 || got.Items[0].ID != 7 {
		t.Errorf("action and target: %+v", got.Items)
	}
	if got := b.audit(t, "since=2000-01-01&until=2000-01-02"); len(got.Items) != 0 {
		t.Errorf("a window in 2000: %+v", got.Items)
	}
	for _, bad := range []string{"limit=501", "limit=0", "before=x", "since=yesterday", "actorr=a", "actor=a&actor=b"} {
		if r := b.do(t, "GET", "/api/v1/audit-events?"+bad, ""); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, r.status)
		}
	}
	// The trail has no door for writing.
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		for _, p := range []string{"/api/v1/audit-events", "/api/v1/audit-events/1", "/audit"} {
			if r := b.do(t, m, p, `{"actor": "x"}`, "Content-Type", "application/json"); r.status != http.StatusMethodNotAllowed &&
				r.status != http.StatusNotFound {
				t.Errorf("%s %s: %d, want 404 or 405", m, p, r.status)
			}
		}
	}
	if got := b.audit(t, ""); len(got.Items) != 7 {
		t.Errorf("%d rows after the write attempts, want 7", len(got.Items))
	}

	page := b.do(t, "GET", "/audit?limit=2", "")
	if page.status != http.StatusOK || strings.Count(page.body, `<td class="num">`) != 2 || !strings.Contains(page.body, `href="/audit?before=6&amp;limit=2"`) ||
		!strings.Contains(page.body, `href="/workflows/3"`) || strings.Contains(page.body, "<script>alert") ||
		!strings.Contains(page.body, `refused</span> conflict: it is stopped`) ||
		!strings.Contains(page.body, `href="/audit" class="on"`) {
		t.Errorf("audit page: %d\n%s", page.status, page.body)
	}
	if page := b.do(t, "GET", "/audit?action=task.kill&actor=alice", ""); strings.Count(page.body, `<td class="num">`) != 3 {
		t.Errorf("filtered audit page has %d rows, want 3", strings.Count(page.body, `<td class="num">`))
	}
	if page := b.do(t, "GET", "/audit?limit=nope", ""); page.status != http.StatusBadRequest || !strings.Contains(page.body, `id="error-message"`) {
		t.Errorf("bad filter on the page: %d", page.status)
	}
}

// TestPathNamesAreCheckedFirst: a name in a path that breaks the name rule is answered 400
// before the role is looked at, naming the rule without echoing the name; the refused change
// leaves a clipped row, and refusals of many names or ids fold into one row with their count.
func TestPathNamesAreCheckedFirst(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-path-token"
	b := setup(t, setupOpts{token: token})
	long := strings.Repeat("x", 20<<10)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/v1/definitions/" + long},
		{"GET", "/api/v1/definitions/-dash"},
		{"GET", "/api/v1/definitions/ok/versions/" + strings.Repeat("9", 21)},
		{"POST", "/api/v1/schedules/" + long + "/enable"},
		{"POST", "/api/v1/schedules/" + long + "y/enable"},
		{"POST", "/api/v1/task-instances/" + strings.Repeat("1", 30) + "/kill"},
	} {
		r := b.do(t, tc.method, tc.path, "")
		if r.status != http.StatusBadRequest || len(r.body) > 512 || !strings.Contains(r.body, "in the path") {
			t.Errorf("%s %.60s: %d, %d bytes: %.200s; want a short 400", tc.method, tc.path, r.status, len(r.body), r.body)
		}
	}
	rows := b.audit(t, "action="+dao.AuditScheduleEnable)
	if len(rows.Items) != 1 || len(rows.Items[0].Target) > 256 || !strings.HasPrefix(rows.Items[0].Target, "schedule/xxx") ||
		!strings.Contains(rows.Items[0].Outcome, "refused: bad request: the workflow name in the path is invalid") {
		t.Errorf("the refused enables left %+v; want one clipped row", rows.Items)
	}
	var count int
	if err := b.db.SQL().Get(&count, `SELECT count FROM audit_event WHERE action = $1`, dao.AuditScheduleEnable); err != nil || count != 2 {
		t.Errorf("the row counts %d refusals (%v), want 2", count, err)
	}
}
