package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

const auditToken = "audit-attack-token-0123456789"

type auditRows struct {
	Items []struct {
		ID      int64  `json:"id"`
		Actor   string `json:"actor"`
		Role    string `json:"role"`
		Action  string `json:"action"`
		Target  string `json:"target"`
		Client  string `json:"client"`
		Outcome string `json:"outcome"`
	} `json:"items"`
	Next int64 `json:"next"`
}

// call sends a request to a master, with the token when auth is set, and returns the status
// and the body.
func auditCall(t *testing.T, method, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{"actor": "nobody", "outcome": "ok"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAttackAuditTrailRecordsEveryChangeAndCannotBeRewritten: changes made with the CLI and
// through a real master's API appear in GET /api/v1/audit-events under the right actor, role
// and client; nobody can read the trail without the token, and no route, token or not,
// writes, changes or deletes a row of it.
func TestAttackAuditTrailRecordsEveryChangeAndCannotBeRewritten(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_API_TOKEN="+auditToken)
	master := e.Master("master")
	base := fmt.Sprintf("http://127.0.0.1:%d", master.Port)
	// No worker runs: the tasks stay queued for the API's kill and stop.
	wfFile := e.file(t, "audited.yaml", "name: audited\ntasks:\n  - {name: a, type: shell, command: 'echo a'}\n")
	out, code := e.Run("submit", wfFile)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	cliWF, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("submit printed %q", out)
	}
	sched := e.file(t, "hourly.yaml", "name: hourly\nschedule: {cron: '0 * * * *'}\ntasks:\n  - {name: t, type: noop}\n")
	for _, args := range [][]string{{"submit", sched}, {"schedule", "disable", "hourly"}, {"schedule", "enable", "hourly"},
		{"schedule", "trigger", "hourly"}, {"backfill", "hourly", "--from", "2026-11-01T00:00", "--to", "2026-11-01T01:00"}} {
		if out, code := e.Run(args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
	}
	waitUntil(t, 30*time.Second, "the master's API", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	tasks := e.tasks(t, cliWF)
	if st, body := auditCall(t, "POST", fmt.Sprintf("%s/api/v1/task-instances/%d/kill", base, tasks["a"].ID), auditToken); st != http.StatusOK {
		t.Fatalf("kill through the API: %d %s", st, body)
	}
	// The kill ended the only task; the master ends the instance when it hears of it.
	waitUntil(t, 30*time.Second, "the killed task's instance ended", func() bool {
		wf, err := e.db.WorkflowGet(context.Background(), cliWF)
		return err == nil && wf.State != dao.WorkflowSubmitted && wf.State != dao.WorkflowRunning
	})
	if st, body := auditCall(t, "POST", fmt.Sprintf("%s/api/v1/workflow-instances/%d/stop", base, cliWF), auditToken); st != http.StatusConflict {
		t.Fatalf("stop of the instance its kill ended: %d %s, want 409", st, body)
	}

	list := func() (auditRows, string) {
		st, body := auditCall(t, "GET", base+"/api/v1/audit-events?limit=500", auditToken)
		if st != http.StatusOK {
			t.Fatalf("audit events: %d %s", st, body)
		}
		var rows auditRows
		if err := json.Unmarshal([]byte(body), &rows); err != nil {
			t.Fatal(err)
		}
		return rows, body
	}
	rows, before := list()
	host, _ := os.Hostname()
	cli := "cli:" + osUser()
	type key struct{ actor, action, target string }
	want := []key{
		{"admin", dao.AuditWorkflowStop, fmt.Sprintf("workflow-instance/%d", cliWF)},
		{"admin", dao.AuditTaskKill, fmt.Sprintf("task-instance/%d", tasks["a"].ID)},
		{cli, dao.AuditBackfill, "schedule/hourly"},
		{cli, dao.AuditScheduleTrigger, "schedule/hourly"},
		{cli, dao.AuditScheduleEnable, "schedule/hourly"},
		{cli, dao.AuditScheduleDisable, "schedule/hourly"},
		{cli, dao.AuditDefinitionStore, "definition/hourly"},
		{cli, dao.AuditWorkflowSubmit, fmt.Sprintf("workflow-instance/%d", cliWF)},
		{cli, dao.AuditDefinitionStore, "definition/audited"},
	}
	if len(rows.Items) != len(want) {
		t.Fatalf("%d audit rows, want %d:\n%s", len(rows.Items), len(want), before)
	}
	for i, w := range want {
		r := rows.Items[i]
		wantClient, wantOutcome := host, "ok"
		if w.actor == "admin" {
			wantClient = "127.0.0.1"
		}
		if w.action == dao.AuditWorkflowStop {
			wantOutcome = "refused: conflict: cannot stop workflow instance"
		}
		if (key{r.Actor, r.Action, r.Target}) != w || r.Role != "admin" || r.Client != wantClient || !strings.HasPrefix(r.Outcome, wantOutcome) {
			t.Errorf("row %d = %+v; want %+v by role admin from %s, outcome %q", i, r, w, wantClient, wantOutcome)
		}
	}

	// Without the token the trail is not even readable.
	if st, _ := auditCall(t, "GET", base+"/api/v1/audit-events", ""); st != http.StatusUnauthorized {
		t.Errorf("audit events without the token: %d, want 401", st)
	}
	// No method on any path of the trail writes it, with the token or without.
	for _, auth := range []string{auditToken, ""} {
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			for _, p := range []string{"/api/v1/audit-events", fmt.Sprintf("/api/v1/audit-events/%d", rows.Items[0].ID), "/audit"} {
				st, body := auditCall(t, m, base+p, auth)
				if st != http.StatusMethodNotAllowed && st != http.StatusNotFound && st != http.StatusUnauthorized &&
					st != http.StatusForbidden {
					t.Errorf("%s %s (token %v): %d %s; want a refusal", m, p, auth != "", st, body)
				}
			}
		}
	}
	if _, after := list(); after != before {
		t.Errorf("the trail changed under write attempts:\nbefore %s\nafter %s", before, after)
	}
}

// TestAttackAuditCLIChangeWithoutItsRecordDoesNotCommit: when its audit row cannot be written,
// zksched submit fails and stores neither the definition nor the instance.
func TestAttackAuditCLIChangeWithoutItsRecordDoesNotCommit(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	daotest.RefuseAudit(t, e.db)
	out, code := e.Run("submit", e.file(t, "wf.yaml", "name: unrecorded\ntasks:\n  - {name: a, type: noop}\n"))
	if code == 0 || !strings.Contains(out, "audit_event refused by the test") {
		t.Fatalf("submit with its record refused: exit %d\n%s", code, out)
	}
	var defs, instances int
	if err := e.db.SQL().QueryRow(`SELECT (SELECT count(*) FROM workflow_definition), (SELECT count(*) FROM workflow_instance)`).
		Scan(&defs, &instances); err != nil {
		t.Fatal(err)
	}
	if defs != 0 || instances != 0 {
		t.Errorf("%d definitions and %d instances stored without their audit rows", defs, instances)
	}
}
