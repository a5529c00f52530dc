package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
)

// typedFile declares a param of every type and kind the run form draws.
const typedFile = `name: typed
description: Loads one day of one region.
params:
  region: eu
  day: {required: true, pattern: '\d{4}-\d{2}-\d{2}', description: The day to load.}
  size: {type: integer, default: 3}
  ratio: {type: number}
  dry: {type: boolean, default: false}
  opts: {type: json, default: {a: 1}}
  tier: {enum: [gold, silver]}
params-extra: allow
tasks:
  - {name: a, type: noop}
`

type runFormBundle struct {
	*testBundle
	viewer, operator *session
}

// setupRunForm stores typedFile and an old-form definition, and logs in a viewer and an
// operator.
func setupRunForm(t *testing.T) runFormBundle {
	t.Helper()
	b := setup(t, setupOpts{usersFile: writeUsers(t)})
	for _, file := range []string{typedFile, "name: old\nparams: {region: eu}\ntasks:\n  - {name: a, type: noop}\n"} {
		if r := b.do(t, "POST", "/api/v1/definitions", file, "Authorization", "Bearer "+adminToken, "Content-Type", "application/yaml"); r.status != 200 {
			t.Fatalf("store: %d %s", r.status, r.body)
		}
	}
	rb := runFormBundle{testBundle: b, viewer: newSession(t, b), operator: newSession(t, b)}
	rb.viewer.login(viewerToken)
	rb.operator.login(operatorToken)
	return rb
}

// instanceParams are the params stored with workflow instance id.
func (b *testBundle) instanceParams(t *testing.T, id int64) map[string]string {
	t.Helper()
	w, err := b.db.WorkflowGet(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]string
	if err := json.Unmarshal(w.Params, &p); err != nil {
		t.Fatalf("params %s: %v", w.Params, err)
	}
	return p
}

// TestDefinitionPageDrawsTheRunForm: a definition's page draws an input per declared param
// by its type, with the defaults filled in, required ones marked and descriptions shown; a
// viewer sees the params but no form, and the definitions list links to the page.
func TestDefinitionPageDrawsTheRunForm(t *testing.T) {
	t.Parallel()
	b := setupRunForm(t)
	page := b.operator.get("/definitions/typed")
	if page.status != http.StatusOK {
		t.Fatalf("GET /definitions/typed: %d\n%s", page.status, page.body)
	}
	for _, want := range []string{
		`<p id="definition-description">Loads one day of one region.</p>`,
		`<form method="post" action="/definitions/typed/run" class="run" id="run-form">`,
		`<input type="hidden" name="version" value="1">`,
		`<input type="text" id="param-region" name="param.region" value="eu">`,
		`<input type="text" id="param-day" name="param.day" value="" pattern="\d{4}-\d{2}-\d{2}" title="matches \d{4}-\d{2}-\d{2}" required>`,
		`<span class="required">required</span>`,
		`<small class="help">The day to load.</small>`,
		`<input type="number" id="param-size" name="param.size" value="3" step="1">`,
		`<input type="number" id="param-ratio" name="param.ratio" value="" step="any">`,
		`<select id="param-dry" name="param.dry">`,
		`<option value="true">true</option><option value="false" selected>false</option>`,
		`<textarea id="param-opts" name="param.opts" rows="3">{&#34;a&#34;:1}</textarea>`,
		`<select id="param-tier" name="param.tier">`,
		`<option value="" selected>(none)</option><option value="gold">gold</option><option value="silver">silver</option>`,
		`<textarea id="run-extra" name="extra" rows="3"></textarea>`,
		`href="/workflows?name=typed"`,
		`<p class="dim">No schedule: it runs when submitted.</p>`,
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the operator's page lacks %s", want)
		}
	}
	if strings.Contains(page.body, `id="params"`) {
		t.Error("the operator's page shows the params table as well as the form")
	}

	// An old file's params, declared by their defaults, are string inputs with the default.
	old := b.operator.get("/definitions/old")
	if !strings.Contains(old.body, `<input type="text" id="param-region" name="param.region" value="eu">`) || strings.Contains(old.body, `id="run-extra"`) {
		t.Errorf("the old form's page:\n%s", old.body)
	}

	v := b.viewer.get("/definitions/typed")
	if v.status != http.StatusOK || strings.Contains(v.body, `id="run-form"`) || !strings.Contains(v.body, `<table class="list" id="params">`) ||
		!strings.Contains(v.body, `<td class="name"><code>day</code></td>`) {
		t.Errorf("the viewer's page: want the params table and no form: %d\n%s", v.status, v.body)
	}
	if r := b.viewer.get("/definitions"); !strings.Contains(r.body, `<a href="/definitions/typed">typed</a>`) {
		t.Errorf("the definitions list does not link to the page:\n%s", r.body)
	}
	if r := b.viewer.get("/definitions/nope"); r.status != http.StatusNotFound {
		t.Errorf("the page of no definition: %d", r.status)
	}
	if r := b.viewer.get("/definitions/typed?version=2"); r.status != http.StatusNotFound {
		t.Errorf("the page of no version: %d", r.status)
	}
}

// TestRunFormRefusesAsTheAPIDoes: a run form with bad params comes back with 400, what was
// typed, and each of the API's messages beside its field and in a summary; nothing is created
// and the refusal is in the audit trail. A viewer's run and a run without the CSRF token are
// refused with 403.
func TestRunFormRefusesAsTheAPIDoes(t *testing.T) {
	t.Parallel()
	b := setupRunForm(t)
	b.operator.get("/definitions/typed")
	form := url.Values{"version": {"1"}, "param.region": {"us"}, "param.size": {"3.5"}, "param.opts": {"{bad"},
		"param.tier": {"bronze"}, "extra": {"colour=red\nno equals sign"}}
	r := b.operator.post("/definitions/typed/run", form)
	if r.status != http.StatusBadRequest {
		t.Fatalf("bad params: status %d\n%s", r.status, r.body)
	}
	for _, want := range []string{
		`<div class="form-errors" id="run-errors" role="alert">`,
		`<input type="text" id="param-region" name="param.region" value="us">`,
		`<input type="number" id="param-size" name="param.size" value="3.5" step="1" aria-invalid="true" aria-describedby="param-size-error">`,
		`<span class="field-error" id="param-size-error">params: size must be an integer (decimal, 64 bits), not &#34;3.5&#34;</span>`,
		`<textarea id="param-opts" name="param.opts" rows="3" aria-invalid="true" aria-describedby="param-opts-error">{bad</textarea>`,
		`<span class="field-error" id="param-opts-error">params: opts must be JSON, not &#34;{bad&#34;</span>`,
		`<option value="bronze" selected>bronze</option>`,
		`id="param-tier-error">params: tier must be one of &#34;gold&#34;, &#34;silver&#34;, not &#34;bronze&#34;</span>`,
		`<textarea id="run-extra" name="extra" rows="3">colour=red` + "\n" + `no equals sign</textarea>`,
		`<span class="field-error" id="run-extra-error">params: want k=v, got &#34;no equals sign&#34;</span>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the refused form lacks %s", want)
		}
	}
	form.Set("extra", "colour=red")
	r = b.operator.post("/definitions/typed/run", form)
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, `<span class="field-error" id="param-day-error">params: day is required: the workflow gives it no default</span>`) {
		t.Errorf("a missing required param: %d\n%s", r.status, r.body)
	}
	// The API refuses the same params with the same messages.
	params := map[string]string{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "param."); ok {
			params[name] = v[0]
		}
	}
	params["colour"] = "red"
	body, _ := json.Marshal(map[string]any{"name": "typed", "params": params})
	api := b.do(t, "POST", "/api/v1/workflow-instances", string(body), "Authorization", "Bearer "+adminToken)
	msg := api.errorMessage(t)
	if api.status != http.StatusBadRequest {
		t.Fatalf("the API took %s: %d", body, api.status)
	}
	for line := range strings.Lines(msg) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "params: ") {
			continue
		}
		if !strings.Contains(r.body, strings.ReplaceAll(line, `"`, "&#34;")) {
			t.Errorf("the form does not say, as the API does: %s", line)
		}
	}

	if id, err := b.db.WorkflowLastID(b.ctx); err != nil || id != 0 {
		t.Errorf("after refused runs the last instance is %d, %v; want none", id, err)
	}
	trail := b.auditAs(t, "actor=otto&action="+dao.AuditWorkflowSubmit)
	if len(trail.Items) != 2 || trail.Items[0].Target != "definition/typed" || !strings.HasPrefix(trail.Items[0].Outcome, "refused: bad request: the params are rejected") {
		t.Errorf("otto's refused runs in the trail: %+v", trail.Items)
	}

	// A viewer may not run it, nor anyone without the CSRF token.
	b.viewer.get("/definitions/typed")
	good := url.Values{"version": {"1"}, "param.day": {"2026-11-01"}}
	if r := b.viewer.post("/definitions/typed/run", good); r.status != http.StatusForbidden || !strings.Contains(r.body, "needs the operator role; vera is viewer") {
		t.Errorf("a viewer's run: %d\n%s", r.status, r.body)
	}
	noToken := url.Values{"csrf": {""}, "version": {"1"}, "param.day": {"2026-11-01"}}
	if r := b.operator.post("/definitions/typed/run", noToken); r.status != http.StatusForbidden || !strings.Contains(r.body, "CSRF token mismatch") {
		t.Errorf("a run without the CSRF token: %d\n%s", r.status, r.body)
	}
	if id, err := b.db.WorkflowLastID(b.ctx); err != nil || id != 0 {
		t.Errorf("after refused runs the last instance is %d, %v; want none", id, err)
	}
}

// TestRunFormSubmits: a run form's text values are converted by their declared types as
// `--param k=v` is, an empty field gives the default, the extra lines give undeclared params,
// and the operator lands on the new instance's page.
func TestRunFormSubmits(t *testing.T) {
	t.Parallel()
	b := setupRunForm(t)
	b.operator.get("/definitions/typed")
	form := url.Values{"version": {"1"}, "param.region": {"us"}, "param.day": {"2026-11-01"}, "param.size": {"+007"},
		"param.ratio": {""}, "param.dry": {"1"}, "param.opts": {"{\r\n  \"b\": [1, 2]\r\n}"}, "param.tier": {"gold"},
		"extra": {"colour=red\r\n\r\nnote=a=b\r\n"}}
	r := b.operator.post("/definitions/typed/run", form)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/workflows/1?done=submitted" {
		t.Fatalf("run: %d to %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	want := map[string]string{"region": "us", "day": "2026-11-01", "size": "7", "dry": "true", "opts": `{"b":[1,2]}`,
		"tier": "gold", "colour": "red", "note": "a=b"}
	if got := b.instanceParams(t, 1); !maps.Equal(got, want) {
		t.Errorf("the instance's params = %v; want %v", got, want)
	}
	if page := b.operator.get("/workflows/1?done=submitted"); !strings.Contains(page.body, `<p class="flash" id="flash">Submitted:`) {
		t.Errorf("the instance's page has no flash:\n%s", page.body)
	}
	trail := b.auditAs(t, "actor=otto&action="+dao.AuditWorkflowSubmit)
	if len(trail.Items) != 1 || trail.Items[0].Outcome != dao.AuditOK || trail.Items[0].Role != "operator" {
		t.Errorf("otto's run in the trail: %+v", trail.Items)
	}
}

// TestSchedulesPage: every schedule is listed with its next fires and a link to its
// definition; an operator disables, enables and triggers it from the page, each in the audit
// trail; a viewer sees no button and is refused the forms.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	b := setupRunForm(t)
	file := "name: nightly\nparams: {region: eu}\nschedule: {cron: '30 2 * * *', timezone: Asia/Tokyo}\ntasks:\n  - {name: t, type: noop}\n"
	if r := b.do(t, "POST", "/api/v1/definitions", file, "Authorization", "Bearer "+adminToken, "Content-Type", "application/yaml"); r.status != 200 {
		t.Fatalf("store: %d %s", r.status, r.body)
	}
	v := b.viewer.get("/schedules")
	if v.status != http.StatusOK || !strings.Contains(v.body, `<a href="/definitions/nightly">nightly</a>`) ||
		!strings.Contains(v.body, "<code>30 2 * * *</code>") || !strings.Contains(v.body, " JST</time>") ||
		!strings.Contains(v.body, `<a href="/schedules" class="on">Schedules</a>`) {
		t.Errorf("the viewer's schedules page: %d\n%s", v.status, v.body)
	}
	if strings.Contains(v.body, "<button") && strings.Contains(v.body, "Trigger now") {
		t.Error("a viewer is offered the schedule's buttons")
	}
	for _, action := range []string{"disable", "enable", "trigger"} {
		if r := b.viewer.post("/schedules/nightly/"+action, nil); r.status != http.StatusForbidden {
			t.Errorf("a viewer's %s: %d", action, r.status)
		}
	}

	page := b.operator.get("/schedules")
	if !strings.Contains(page.body, `action="/schedules/nightly/disable"`) || !strings.Contains(page.body, `action="/schedules/nightly/trigger"`) {
		t.Fatalf("the operator's schedules page has no buttons:\n%s", page.body)
	}
	if r := b.operator.post("/schedules/nightly/disable", nil); r.status != http.StatusSeeOther || r.header.Get("Location") != "/schedules?done=schedule-disabled" {
		t.Fatalf("disable: %d %q", r.status, r.header.Get("Location"))
	}
	page = b.operator.get("/schedules?done=schedule-disabled")
	if !strings.Contains(page.body, `id="flash">Disabled:`) || !strings.Contains(page.body, `action="/schedules/nightly/enable"`) ||
		!strings.Contains(page.body, `<td class="schedule-state"><span class="dim">disabled</span></td>`) {
		t.Errorf("after the disable:\n%s", page.body)
	}
	if r := b.operator.post("/schedules/nightly/enable", nil); r.status != http.StatusSeeOther || r.header.Get("Location") != "/schedules?done=schedule-enabled" {
		t.Fatalf("enable: %d %q", r.status, r.header.Get("Location"))
	}
	r := b.operator.post("/schedules/nightly/trigger", nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/schedules?done=triggered&instance=1" {
		t.Fatalf("trigger: %d %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	page = b.operator.get(r.header.Get("Location"))
	if !strings.Contains(page.body, `id="flash">Triggered:`) || !strings.Contains(page.body, `<a href="/workflows/1">workflow instance 1</a>`) {
		t.Errorf("after the trigger:\n%s", page.body)
	}
	if got := b.instanceParams(t, 1); len(got) != 2 || got["fire_date"] == "" || got["fire_time"] == "" {
		t.Errorf("the triggered instance's params = %v; want the fire's (and the defaults for the rest)", got)
	}
	// The run form of a scheduled workflow triggers its schedule, with the form's params on top
	// of the fire's.
	def := b.operator.get("/definitions/nightly")
	if !strings.Contains(def.body, `id="run-trigger"`) || !strings.Contains(page.body, `href="/definitions/nightly?version=1#run"`) {
		t.Errorf("the scheduled workflow's form does not say it triggers, or the schedules page does not link it:\n%s", def.body)
	}
	r = b.operator.post("/definitions/nightly/run", url.Values{"version": {"1"}, "param.region": {"us"}, "param.regoin": {"us"}})
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, `params: &#34;regoin&#34; is not a param of workflow nightly (did you mean &#34;region&#34;?)`) {
		t.Errorf("a trigger from the form with an undeclared param: %d\n%s", r.status, r.body)
	}
	r = b.operator.post("/definitions/nightly/run", url.Values{"version": {"1"}, "param.region": {"us"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/workflows/2?done=triggered-run" {
		t.Fatalf("a trigger from the form: %d %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	if got := b.instanceParams(t, 2); got["region"] != "us" || got["fire_date"] == "" {
		t.Errorf("the form's trigger's params = %v; want region us and the fire's", got)
	}
	if r := b.operator.post("/schedules/typed/trigger", nil); r.status != http.StatusNotFound {
		t.Errorf("trigger of a definition without schedule: %d", r.status)
	}
	trail := b.auditAs(t, "actor=otto")
	var actions []string
	refusedTrigger := false
	for _, ev := range trail.Items {
		if ev.Outcome == dao.AuditOK && strings.HasPrefix(ev.Action, "schedule.") {
			actions = append(actions, ev.Action)
		}
		refusedTrigger = refusedTrigger || ev.Action == dao.AuditScheduleTrigger && ev.Target == "schedule/nightly" &&
			strings.HasPrefix(ev.Outcome, "refused: bad request: the params are rejected")
	}
	if !refusedTrigger {
		t.Errorf("the form's refused trigger is not in the trail: %+v", trail.Items)
	}
	if strings.Join(actions, " ") != "schedule.trigger schedule.trigger schedule.enable schedule.disable" {
		t.Errorf("otto's schedule actions in the trail, newest first: %v", actions)
	}
	if def := b.viewer.get("/definitions/nightly"); !strings.Contains(def.body, `<dl class="facts" id="definition-schedule">`) {
		t.Errorf("the definition's page does not show its schedule:\n%s", def.body)
	}
}

// auditAs lists the trail through the API as the admin.
func (b *testBundle) auditAs(t *testing.T, query string) auditJSON {
	t.Helper()
	r := b.do(t, "GET", "/api/v1/audit-events?"+query, "", "Authorization", "Bearer "+adminToken)
	if r.status != http.StatusOK {
		t.Fatalf("audit events: %d %s", r.status, r.body)
	}
	var out auditJSON
	r.json(t, &out)
	return out
}
