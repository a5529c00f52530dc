package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestTriggersPage: the Triggers page and GET /api/v1/triggers (a viewer's) show a hook with
// its latest delivery, an on-assets workflow with the asset it has an event of and the one it
// misses, and the sensors waiting now whatever they wait at, their kind and target from their
// task's spec; names that could be markup are escaped.
func TestTriggersPage(t *testing.T) {
	t.Parallel()
	b := hookSetup(t, setupOpts{usersFile: writeUsers(t)})
	store := func(file string) {
		t.Helper()
		if r := b.do(t, "POST", "/api/v1/definitions", file, "Content-Type", "application/yaml"); r.status != 200 && r.status != 201 {
			t.Fatalf("store: %d %s", r.status, r.body)
		}
	}
	body := push("refs/heads/main")
	if r := b.deliver(t, "d-1", body, sign(body)); r.status != http.StatusCreated {
		t.Fatalf("delivery: %d %s", r.status, r.body)
	}
	store("name: report\non-assets: {all: [orders, customers]}\ntasks:\n  - {name: r, type: noop}\n")
	if r := b.do(t, "POST", "/api/v1/assets/customers/events", `{"output": "crm"}`, "Content-Type", "application/json"); r.status != 201 {
		t.Fatalf("emit: %d %s", r.status, r.body)
	}
	store("name: waits\ntasks:\n  - {name: at-noon, type: sensor, time: {after: 1h}, timeout: 2h, on-timeout: skip}\n" +
		"  - {name: probe, type: sensor, http: {url: 'https://example.com/ready?x=<b>'}, interval: 1m}\n")
	r := b.do(t, "POST", "/api/v1/workflow-instances", `{"name": "waits"}`, "Content-Type", "application/json")
	if r.status != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	var wf struct {
		ID int64 `json:"id"`
	}
	r.json(t, &wf)
	// The http sensor as it waits between checks, and as a sensor of a kind this page knows
	// nothing of waits: at a step of its own.
	if _, err := b.db.SQL().Exec(`UPDATE task_instance SET state = 'waiting', paused_step = 'sensor',
		wait_until = now() + interval '1 minute' WHERE workflow_instance_id = $1 AND name = 'probe'`, wf.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.SQL().Exec(`INSERT INTO task_instance (workflow_instance_id, name, type, state, paused_step, params)
		VALUES ($1, 'other-run', 'sensor', 'waiting', 'workflow-run:7',
			'{"task": {"name": "other-run", "type": "sensor", "http": {"url-env": "READY_URL"}}}')`, wf.ID); err != nil {
		t.Fatal(err)
	}

	b.token = viewerToken
	var got struct {
		Hooks []struct {
			Name         string `json:"name"`
			WorkflowName string `json:"workflow_name"`
			LastOutcome  string `json:"last_outcome"`
			LastInstance *int64 `json:"last_workflow_instance_id"`
		} `json:"hooks"`
		AssetConsumers []struct {
			WorkflowName string `json:"workflow_name"`
			AllOf        bool   `json:"all_of"`
			Assets       []struct {
				Asset     string `json:"asset"`
				Pending   int    `json:"pending"`
				LastEvent *int64 `json:"last_event"`
			} `json:"assets"`
		} `json:"asset_consumers"`
		Sensors []struct {
			Task       string  `json:"task"`
			Kind       string  `json:"kind"`
			Target     string  `json:"target"`
			Mode       string  `json:"mode"`
			PausedStep *string `json:"paused_step"`
			Timeout    string  `json:"timeout"`
			OnTimeout  string  `json:"on_timeout"`
		} `json:"sensors"`
	}
	r = b.do(t, "GET", "/api/v1/triggers", "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /api/v1/triggers: %d %s", r.status, r.body)
	}
	r.json(t, &got)
	if len(got.Hooks) != 1 || got.Hooks[0].Name != "deploy-main" || got.Hooks[0].WorkflowName != "deploy" ||
		got.Hooks[0].LastOutcome != "submitted" || got.Hooks[0].LastInstance == nil {
		t.Errorf("hooks = %+v", got.Hooks)
	}
	if c := got.AssetConsumers; len(c) != 1 || c[0].WorkflowName != "report" || !c[0].AllOf || len(c[0].Assets) != 2 ||
		c[0].Assets[0].Asset != "orders" || c[0].Assets[0].Pending != 0 || c[0].Assets[0].LastEvent != nil ||
		c[0].Assets[1].Asset != "customers" || c[0].Assets[1].Pending != 1 || c[0].Assets[1].LastEvent == nil {
		t.Errorf("asset consumers = %+v", c)
	}
	var sensors []string
	for _, s := range got.Sensors {
		step := "-"
		if s.PausedStep != nil {
			step = *s.PausedStep
		}
		sensors = append(sensors, fmt.Sprintf("%s %s %s %s %s %s/%s", s.Task, s.Kind, s.Mode, step, s.Target, s.Timeout, s.OnTimeout))
	}
	want := []string{
		`other-run http reschedule workflow-run:7 {"url-env":"READY_URL"} /fail`,
		`probe http reschedule sensor {"url":"https://example.com/ready?x=<b>"} /fail`,
		`at-noon time reschedule - {"after":"1h0m0s"} 2h0m0s/skip`,
	}
	if strings.Join(sensors, "\n") != strings.Join(want, "\n") {
		t.Errorf("sensors, newest first:\n%s\nwant\n%s", strings.Join(sensors, "\n"), strings.Join(want, "\n"))
	}

	page := b.do(t, "GET", "/triggers", "")
	for _, want := range []string{
		`<a href="/triggers" class="on">Triggers</a>`,
		`<a href="/schedules">Schedules</a>`,
		`<a href="/definitions/deploy">deploy</a>`,
		`<span class="badge st-succeeded">submitted</span>`,
		`<code>customers</code> <span class="dim">1 not taken</span>`,
		`<code>orders</code> <span class="dim">no event yet</span>`,
		`<code>workflow-run:7</code>`,
		`ready?x=&lt;b&gt;`,
		`its time, on no worker`,
	} {
		if page.status != http.StatusOK || !strings.Contains(page.body, want) {
			t.Errorf("the Triggers page (%d) lacks %q", page.status, want)
		}
	}
	if strings.Contains(page.body, "x=<b>") {
		t.Error("the page shows a sensor's target unescaped")
	}
}
