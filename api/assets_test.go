package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/metrics"
)

// TestAssetEmit: an operator emits an asset event through the API, audited with its output's
// size; a bad name is a 400 and an output over the cap a 413, both audited as refusals and
// writing no event.
func TestAssetEmit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{usersFile: writeUsers(t), token: "the-admin-token-0123456789"})
	b.token = operatorToken
	r := b.do(t, "POST", "/api/v1/assets/orders/events", `{"output": "42 rows"}`, "Content-Type", "application/json")
	if r.status != 201 {
		t.Fatalf("emit: %d %s", r.status, r.body)
	}
	var got struct {
		Asset string `json:"asset"`
		Event int64  `json:"event"`
	}
	r.json(t, &got)
	var ev dao.AssetEvent
	if err := b.db.SQL().Get(&ev, `SELECT id, asset, task_instance_id, workflow_instance_id, output, output_truncated,
		emitted_by, created_at FROM asset_event WHERE id = $1`, got.Event); err != nil {
		t.Fatal(err)
	}
	if ev.Asset != "orders" || ev.Output == nil || *ev.Output != "42 rows" || ev.EmittedBy == nil || *ev.EmittedBy != "otto" {
		t.Errorf("event = %+v", ev)
	}
	if r := b.do(t, "POST", "/api/v1/assets/orders/events", ""); r.status != 201 {
		t.Errorf("emit without a body: %d %s", r.status, r.body)
	}
	if r := b.do(t, "POST", "/api/v1/assets/bad%20name/events", `{}`, "Content-Type", "application/json"); r.status != 400 ||
		!strings.Contains(r.errorMessage(t), "invalid") {
		t.Errorf("bad name: %d %s", r.status, r.body)
	}
	big := `{"output": "` + strings.Repeat("x", dao.MaxAssetOutput+1) + `"}`
	if r := b.do(t, "POST", "/api/v1/assets/orders/events", big, "Content-Type", "application/json"); r.status != 413 {
		t.Errorf("oversize output: %d %s", r.status, r.body)
	}
	var n int
	if err := b.db.SQL().Get(&n, `SELECT count(*) FROM asset_event`); err != nil || n != 2 {
		t.Errorf("%d events, %v; want 2", n, err)
	}
	var rows []struct {
		Actor   string `db:"actor"`
		Target  string `db:"target"`
		Outcome string `db:"outcome"`
		Params  string `db:"params"`
	}
	if err := b.db.SQL().Select(&rows, `SELECT actor, target, outcome, coalesce(params::text, '') AS params FROM audit_event
		WHERE action = $1 ORDER BY id`, dao.AuditAssetEmit); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || rows[0].Actor != "otto" || rows[0].Target != "asset/orders" || rows[0].Outcome != dao.AuditOK ||
		!strings.Contains(rows[0].Params, `"output_bytes": 7`) || !strings.HasPrefix(rows[2].Outcome, "refused: bad request") ||
		!strings.HasPrefix(rows[3].Outcome, "refused: request entity too large") {
		t.Errorf("audit rows = %+v", rows)
	}
}

// TestAssetEmitMetric: an event emitted through the API is counted in /metrics as
// zksched_asset_events_total{source="emit"}; a refused one is not.
func TestAssetEmitMetric(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: "the-admin-token-0123456789", metrics: metrics.New("m1", "master", "test")})
	for _, path := range []string{"/api/v1/assets/orders/events", "/api/v1/assets/bad%20name/events", "/api/v1/assets/orders/events"} {
		b.do(t, "POST", path, `{"output": "42 rows"}`, "Content-Type", "application/json")
	}
	r := b.do(t, "GET", "/metrics", "")
	if want := `zksched_asset_events_total{source="emit"} 2`; r.status != 200 || !strings.Contains(r.body, want) {
		t.Errorf("/metrics (%d) lacks %q:\n%s", r.status, want, r.body)
	}
}

// TestAssetsPage: the assets page and GET /api/v1/assets list each asset with the workflows
// that produce it and those it starts, and the latest events.
func TestAssetsPage(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: "the-admin-token-0123456789"})
	for _, file := range []string{
		"name: load\ntasks:\n  - {name: l, type: noop, produces: [orders]}\n",
		"name: report\non-assets: {all: [orders, customers]}\ntasks:\n  - {name: r, type: noop}\n",
	} {
		if r := b.do(t, "POST", "/api/v1/definitions", file, "Content-Type", "application/yaml"); r.status != 201 && r.status != 200 {
			t.Fatalf("store: %d %s", r.status, r.body)
		}
	}
	if r := b.do(t, "POST", "/api/v1/assets/customers/events", `{"output": "from the CRM"}`, "Content-Type", "application/json"); r.status != 201 {
		t.Fatalf("emit: %d %s", r.status, r.body)
	}
	var got struct {
		Assets []struct {
			Asset     string   `json:"asset"`
			Producers []string `json:"producers"`
			Consumers []string `json:"consumers"`
			Pending   int      `json:"pending"`
		} `json:"assets"`
		Events []struct {
			Asset  string `json:"asset"`
			Output string `json:"output"`
		} `json:"events"`
	}
	b.do(t, "GET", "/api/v1/assets", "").json(t, &got)
	if len(got.Assets) != 2 || got.Assets[0].Asset != "customers" || got.Assets[0].Pending != 1 ||
		strings.Join(got.Assets[0].Consumers, ",") != "report" || got.Assets[1].Asset != "orders" ||
		strings.Join(got.Assets[1].Producers, ",") != "load" || len(got.Events) != 1 || got.Events[0].Output != "from the CRM" {
		t.Errorf("GET /api/v1/assets = %+v", got)
	}
	if r := b.do(t, "GET", "/definitions/report", ""); !strings.Contains(r.body, `Started by assets: a run once each of
<code>orders</code>, <code>customers</code> has had an event`) {
		t.Errorf("the consumer's page (%d) does not say what it waits for:\n%s", r.status, r.body)
	}
	// Each asset with its events not taken yet and its latest event.
	waits := func() string {
		t.Helper()
		body := b.do(t, "GET", "/definitions/report", "").body
		i, j := strings.Index(body, `<table class="list" id="definition-asset-waits">`), strings.Index(body, "Every consumer's waits")
		if i < 0 || j < i {
			t.Fatalf("the consumer's page lacks its waits:\n%s", body)
		}
		return body[i:j]
	}
	if w := waits(); !strings.Contains(w, "<code>orders</code></td>\n  <td><span class=\"dim\">none: waiting for its next event</span></td>\n  <td><span class=\"dim\">none yet</span>") ||
		!strings.Contains(w, "<code>customers</code></td>\n  <td>1 pending</td>") || !strings.Contains(w, "(pending)") ||
		!strings.Contains(w, "No run started by assets yet.") {
		t.Errorf("before a run, the consumer's waits read:\n%s", w)
	}
	if r := b.do(t, "POST", "/api/v1/assets/orders/events", "", "Content-Type", "application/json"); r.status != 201 {
		t.Fatalf("emit: %d %s", r.status, r.body)
	}
	runs, err := lifecycle.FireAssets(b.ctx, b.db, "report")
	if err != nil || len(runs) != 1 {
		t.Fatalf("fire = %+v, %v", runs, err)
	}
	if r := b.do(t, "GET", fmt.Sprintf("/workflows/%d", runs[0].Instance), ""); !strings.Contains(r.body,
		fmt.Sprintf("<code>customers</code> event %d by admin, <code>orders</code> event %d by admin", runs[0].Events[0].ID, runs[0].Events[1].ID)) {
		t.Errorf("the run's page (%d) does not link its events:\n%s", r.status, r.body)
	}
	if w := waits(); strings.Contains(w, "pending") || strings.Count(w, "(consumed)") != 2 ||
		!strings.Contains(w, fmt.Sprintf(`<a href="/workflows/%d">run %d</a>`, runs[0].Instance, runs[0].Instance)) {
		t.Errorf("after the run, the consumer's waits read:\n%s", w)
	}
	r := b.do(t, "GET", "/assets", "")
	for _, want := range []string{`<a href="/definitions/load">load</a>`, `<a href="/definitions/report">report</a>`, "from the CRM"} {
		if r.status != 200 || !strings.Contains(r.body, want) {
			t.Errorf("the assets page (%d) lacks %q", r.status, want)
		}
	}
}
