package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testenv"
)

// openAPIDoc fetches the OpenAPI document from b's server, without a token.
func openAPIDoc(t *testing.T, b *testBundle) []byte {
	t.Helper()
	r := b.do(t, "GET", "/api/v1/openapi.json", "", "Authorization", "")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/v1/openapi.json without a token: %d %s\n%s", r.status, r.header.Get("Content-Type"), r.body)
	}
	return []byte(r.body)
}

// TestOpenAPIIsValid checks the served document against the OpenAPI 3.1 schema, builds it
// with an OpenAPI library (which resolves every reference), and compiles every schema in it.
func TestOpenAPIIsValid(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: "s3cret"})
	raw := openAPIDoc(t, b)

	c := jsonschema.NewCompiler()
	oas, err := jsonschema.UnmarshalJSON(strings.NewReader(datamodel.OpenAPI31SchemaData))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("oas31.json", oas); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("oas31.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3.1: %v", err)
	}

	d, err := libopenapi.NewDocument(raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		t.Fatalf("build the document: %v", err)
	}
	if got := m.Model.Info.Version; got != "test" {
		t.Errorf("info.version = %q, want the binary's version", got)
	}

	var parsed struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		t.Fatal(err)
	}
	sc := schemaCompiler(t, raw)
	for name := range parsed.Components.Schemas {
		if _, err := sc.Compile("openapi.json#/components/schemas/" + name); err != nil {
			t.Errorf("schema %s: %v", name, err)
		}
	}
}

// schemaCompiler compiles the schemas of the OpenAPI document raw, by JSON pointer into
// "openapi.json".
func schemaCompiler(t *testing.T, raw []byte) *jsonschema.Compiler {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	return c
}

// pointer escapes a JSON pointer's token.
func pointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// TestOpenAPIQueryParameters checks each GET operation's query parameters against the ones
// its handler accepts: they are the ones it lists when refusing an unknown one.
func TestOpenAPIQueryParameters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc(t, b), &doc); err != nil {
		t.Fatal(err)
	}
	// The handlers that read their parameters leniently, ignoring others.
	lenient := map[string]bool{"/api/v1/schedules": true}
	for path, methods := range doc.Paths {
		op, ok := methods["get"]
		if !ok {
			continue
		}
		var documented []string
		for _, p := range op.Parameters {
			if p.In == "query" {
				documented = append(documented, p.Name)
			}
		}
		concrete := strings.NewReplacer("{id}", "1", "{name}", "x", "{version}", "1").Replace(path)
		r := b.do(t, "GET", concrete+"?zz_unknown=1", "")
		if lenient[path] {
			if r.status != 200 {
				t.Errorf("GET %s with an unknown parameter: %d %s", path, r.status, r.body)
			}
			continue
		}
		msg := r.errorMessage(t)
		_, known, ok := strings.Cut(msg, "; known: ")
		if r.status != 400 || !ok {
			t.Errorf("GET %s with an unknown parameter: %d %s; want 400 naming the known ones", path, r.status, msg)
			continue
		}
		var accepted []string
		if known != "" {
			accepted = strings.Split(known, ", ")
		}
		slices.Sort(accepted)
		slices.Sort(documented)
		if !slices.Equal(accepted, documented) {
			t.Errorf("GET %s: the handler accepts %v, the document says %v", path, accepted, documented)
		}
	}
}

// TestOpenAPIResponses calls every operation of the document and checks each answer's body
// against the schema the document gives for its status.
func TestOpenAPIResponses(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: "s3cret", hookSecrets: map[string]string{"ZKSCHED_HOOK_SECRET_OPS": "hook-secret"}})
	raw := openAPIDoc(t, b)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Ref string `json:"$ref"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	sc := schemaCompiler(t, raw)
	f := b.seed(t, 8)
	file := "name: nightly\nschedule: {cron: '0 2 * * *'}\ntasks: [{name: a, type: noop}]\n"
	task := func(name string) string { return fmt.Sprint(f.byName[name]) }

	called := map[string]bool{}
	check := func(method, path, concrete, body string, headers ...string) {
		t.Helper()
		r := b.do(t, method, concrete, body, headers...)
		op := strings.ToLower(method)
		called[op+" "+path] = true
		resp, ok := doc.Paths[path][op].Responses[fmt.Sprint(r.status)]
		if !ok {
			t.Errorf("%s %s answered %d, which the document does not list: %s", method, concrete, r.status, r.body)
			return
		}
		ptr := "openapi.json#/paths/" + pointer(path) + "/" + op + "/responses/" + fmt.Sprint(r.status)
		if resp.Ref != "" {
			ptr = "openapi.json" + resp.Ref
		}
		s, err := sc.Compile(ptr + "/content/application~1json/schema")
		if err != nil {
			t.Errorf("%s %s: the schema of %d: %v", method, path, r.status, err)
			return
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(r.body))
		if err != nil {
			t.Errorf("%s %s: %d, body not JSON: %v", method, concrete, r.status, err)
			return
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%s %s: %d: the body does not match the document: %v\n%s", method, concrete, r.status, err, r.body)
		}
	}
	check("GET", "/api/v1/openapi.json", "/api/v1/openapi.json", "")
	check("POST", "/api/v1/definitions", "/api/v1/definitions", file, "Content-Type", "application/yaml")
	check("POST", "/api/v1/definitions", "/api/v1/definitions", "name: [", "Content-Type", "application/yaml")
	check("GET", "/api/v1/definitions", "/api/v1/definitions", "")
	check("GET", "/api/v1/definitions/{name}", "/api/v1/definitions/nightly", "")
	check("GET", "/api/v1/definitions/{name}", "/api/v1/definitions/nothing", "")
	check("GET", "/api/v1/definitions/{name}/versions/{version}", "/api/v1/definitions/nightly/versions/1", "")
	check("POST", "/api/v1/workflow-instances", "/api/v1/workflow-instances", `{"name": "nightly", "params": {"a": "b"}}`)
	check("GET", "/api/v1/workflow-instances", "/api/v1/workflow-instances", "")
	check("GET", "/api/v1/workflow-instances", "/api/v1/workflow-instances?state=bogus", "")
	check("GET", "/api/v1/workflow-instances/{id}", fmt.Sprintf("/api/v1/workflow-instances/%d", f.wf), "")
	check("GET", "/api/v1/task-instances", "/api/v1/task-instances", "")
	check("GET", "/api/v1/task-instances", "/api/v1/task-instances", "", "Authorization", "")
	check("GET", "/api/v1/task-instances/{id}", "/api/v1/task-instances/"+task("t2"), "")
	check("GET", "/api/v1/task-instances/{id}", "/api/v1/task-instances/99999999", "")
	check("GET", "/api/v1/task-instances/{id}/log", "/api/v1/task-instances/"+task("t0")+"/log", "")
	check("POST", "/api/v1/task-instances/{id}/kill", "/api/v1/task-instances/"+task("t6")+"/kill", "")
	check("POST", "/api/v1/task-instances/{id}/kill", "/api/v1/task-instances/"+task("t3")+"/kill", "")
	check("POST", "/api/v1/task-instances/{id}/kill", "/api/v1/task-instances/"+task("t0")+"/kill", "")
	check("POST", "/api/v1/task-instances/{id}/rerun", "/api/v1/task-instances/"+task("t2")+"/rerun", "")
	check("POST", "/api/v1/task-instances/{id}/signal", "/api/v1/task-instances/"+task("t7")+"/signal", `{"output": "ok"}`)
	check("POST", "/api/v1/workflow-instances/{id}/stop", fmt.Sprintf("/api/v1/workflow-instances/%d/stop", f.other), "")
	check("POST", "/api/v1/workflow-instances/{id}/rerun", fmt.Sprintf("/api/v1/workflow-instances/%d/rerun", f.other), "")
	check("GET", "/api/v1/cluster", "/api/v1/cluster", "")
	check("GET", "/api/v1/failover-events", "/api/v1/failover-events", "")
	check("GET", "/api/v1/schedules", "/api/v1/schedules", "")
	check("POST", "/api/v1/schedules/{name}/disable", "/api/v1/schedules/nightly/disable", "")
	check("POST", "/api/v1/schedules/{name}/enable", "/api/v1/schedules/nightly/enable", "")
	check("POST", "/api/v1/schedules/{name}/enable", "/api/v1/schedules/nothing/enable", "")
	check("POST", "/api/v1/schedules/{name}/trigger", "/api/v1/schedules/nightly/trigger", `{"params": {"a": "b"}}`)
	check("POST", "/api/v1/assets/{name}/events", "/api/v1/assets/orders/events", `{"output": "42 rows"}`)
	check("GET", "/api/v1/assets", "/api/v1/assets", "")
	check("POST", "/api/v1/assets/{name}/events", "/api/v1/assets/bad%20name/events", "")
	check("GET", "/api/v1/audit-events", "/api/v1/audit-events?limit="+url.QueryEscape("5"), "")
	notified := daotest.Submit(t, b.db, "notified", map[string]any{"name": "notified", "notify": []map[string]any{
		{"on": []string{"failure"}, "webhook-url-env": "OPS_WEBHOOK", "email": []string{"ops@example.com"}}}})
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 100); err != nil {
		t.Fatal(err)
	}
	if err := b.db.WorkflowFinishIfOwned(b.ctx, notified, "m1", dao.WorkflowFailed, "boom"); err != nil {
		t.Fatal(err)
	}
	check("GET", "/api/v1/notifications", "/api/v1/notifications?limit=1", "")
	check("GET", "/api/v1/notifications", "/api/v1/notifications?state=dead", "")
	check("GET", "/api/v1/notifications", "/api/v1/notifications?state=bogus", "")
	hooked := "name: hooked\nparams: {who: x}\ntriggers:\n  - webhook: {name: ops, secret-env: ZKSCHED_HOOK_SECRET_OPS, signature: bearer, " +
		"params: {who: '{{ .body.who }}'}, filter: '{{ ne .body.who \"nobody\" }}'}\ntasks: [{name: a, type: noop}]\n"
	check("POST", "/api/v1/definitions", "/api/v1/definitions", hooked, "Content-Type", "application/yaml")
	check("POST", "/api/v1/definitions", "/api/v1/definitions", strings.Replace(hooked, "name: hooked", "name: thief", 1), "Content-Type", "application/yaml")
	check("POST", "/api/v1/hooks/{name}", "/api/v1/hooks/ops", `{"who": "me"}`, "Authorization", "Bearer hook-secret")
	check("POST", "/api/v1/hooks/{name}", "/api/v1/hooks/ops", `{"who": "nobody"}`, "Authorization", "Bearer hook-secret")
	check("POST", "/api/v1/hooks/{name}", "/api/v1/hooks/ops", `{"who": "me"}`, "Authorization", "Bearer wrong")
	check("POST", "/api/v1/hooks/{name}", "/api/v1/hooks/nothing", `{}`)
	check("GET", "/api/v1/hooks", "/api/v1/hooks", "")
	check("GET", "/api/v1/triggers", "/api/v1/triggers", "")

	for path, methods := range doc.Paths {
		for method := range methods {
			if !called[method+" "+path] {
				t.Errorf("%s %s is not called here: add a call, so its answers are checked", strings.ToUpper(method), path)
			}
		}
	}
}

// TestDocsOpenAPICommand runs the command of docs/http-api.md that reads the OpenAPI
// document, against a master of this test instead of one on port 5678.
func TestDocsOpenAPICommand(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: "s3cret"})
	command := strings.TrimSpace(testenv.DocBlock(t, "docs/http-api.md", "The OpenAPI document", "sh", 1))
	if !strings.Contains(command, "http://127.0.0.1:5678/") {
		t.Fatalf("docs/http-api.md's command %q does not read the master on 127.0.0.1:5678", command)
	}
	command = strings.ReplaceAll(command, "http://127.0.0.1:5678", b.srv.URL)
	out, err := exec.Command("bash", "-o", "pipefail", "-c", command).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	var paths []string
	if err := json.Unmarshal(out, &paths); err != nil || !slices.Contains(paths, "/api/v1/task-instances/{id}") {
		t.Errorf("%s printed %s (%v); want the API's paths", command, out, err)
	}
}
