package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/zksched/zksched/api"
)

// textFilterRoutes are, for every GET route, a path it serves and the text parameters it
// reads. A GET route missing here fails the test, so that a new one is added with its
// filters.
var textFilterRoutes = map[string]struct {
	path   string
	params []string
}{
	"GET /{$}":                       {"/", nil},
	"GET /tasks":                     {"/tasks", []string{"state", "workflow", "task", "worker", "from", "to", "before", "after", "limit"}},
	"GET /tasks/{id}":                {"/tasks/1", []string{"attempt", "done"}},
	"GET /workflows":                 {"/workflows", []string{"state", "name", "before", "after", "limit"}},
	"GET /workflows/{id}":            {"/workflows/1", []string{"done"}},
	"GET /definitions":               {"/definitions", []string{"after", "limit"}},
	"GET /definitions/{name}":        {"/definitions/wf", []string{"version"}},
	"GET /schedules":                 {"/schedules", []string{"done", "instance"}},
	"GET /cluster":                   {"/cluster", nil},
	"GET /audit":                     {"/audit", []string{"actor", "action", "target", "since", "until", "before", "limit"}},
	"GET /notifications":             {"/notifications", []string{"state", "before", "limit"}},
	"GET /hooks":                     {"/hooks", nil},
	"GET /assets":                    {"/assets", nil},
	"GET /triggers":                  {"/triggers", nil},
	"GET /login":                     {"/login", []string{"next"}},
	"GET /static/":                   {"/static/app.css", nil},
	"GET /api/v1/definitions":        {"/api/v1/definitions", []string{"after", "limit"}},
	"GET /api/v1/definitions/{name}": {"/api/v1/definitions/wf", nil},
	"GET /api/v1/definitions/{name}/versions/{version}": {"/api/v1/definitions/wf/versions/1", nil},
	"GET /api/v1/workflow-instances":                    {"/api/v1/workflow-instances", []string{"state", "name", "before", "after", "limit"}},
	"GET /api/v1/workflow-instances/{id}":               {"/api/v1/workflow-instances/1", nil},
	"GET /api/v1/task-instances":                        {"/api/v1/task-instances", []string{"state", "workflow", "task", "worker", "from", "to", "before", "after", "limit"}},
	"GET /api/v1/task-instances/{id}":                   {"/api/v1/task-instances/1", nil},
	"GET /api/v1/task-instances/{id}/log":               {"/api/v1/task-instances/1/log", []string{"attempt", "from_seq", "tail_bytes"}},
	"GET /api/v1/cluster":                               {"/api/v1/cluster", nil},
	"GET /api/v1/failover-events":                       {"/api/v1/failover-events", []string{"before", "after", "limit"}},
	"GET /api/v1/schedules":                             {"/api/v1/schedules", []string{"next"}},
	"GET /api/v1/audit-events":                          {"/api/v1/audit-events", []string{"actor", "action", "target", "since", "until", "before", "limit"}},
	"GET /api/v1/notifications":                         {"/api/v1/notifications", []string{"state", "before", "limit"}},
	"GET /api/v1/assets":                                {"/api/v1/assets", nil},
	"GET /api/v1/openapi.json":                          {"/api/v1/openapi.json", nil},
	"GET /api/v1/hooks":                                 {"/api/v1/hooks", nil},
	"GET /api/v1/triggers":                              {"/api/v1/triggers", nil},
}

// TestTextFilterWithNULOrBadUTF8IsA400: a NUL byte or bytes that are not UTF-8, in any
// parameter of any GET route of the API and the UI (the filters, and a parameter no route
// knows, which shows the check comes before any route reads its own), or in the path, is
// answered 400 with a message naming it, and nothing is logged at error level.
func TestTextFilterWithNULOrBadUTF8IsA400(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	b := setup(t, setupOpts{token: "filter-admin-token-0123456789", log: &log})
	b.seed(t, 6)
	routes := api.GETRoutes(b.server)
	for _, pattern := range routes {
		if _, ok := textFilterRoutes[pattern]; !ok {
			t.Errorf("route %s is not in textFilterRoutes: add it with its parameters", pattern)
		}
	}
	bad := map[string]string{"NUL": "a\x00b", "not UTF-8": "a\xffb", "a lone continuation byte": "\x80"}
	for _, pattern := range routes {
		rt := textFilterRoutes[pattern]
		for _, p := range append(rt.params, "no-such-parameter") {
			for what, v := range bad {
				for _, q := range []string{url.Values{p: {v}}.Encode(), url.QueryEscape(v) + "=1"} {
					r := b.do(t, "GET", rt.path+"?"+q, "")
					want := "NUL byte"
					if what != "NUL" {
						want = "not UTF-8"
					}
					if r.status != http.StatusBadRequest || !strings.Contains(r.body, want) {
						t.Errorf("%s ?%s: status %d, want 400 saying %q; body %.300s", pattern, q, r.status, want, r.body)
					}
				}
			}
		}
	}
	for _, path := range []string{"/api/v1/definitions/a%00b", "/api/v1/definitions/a%FFb", "/tasks/%00"} {
		if r := b.do(t, "GET", path, ""); r.status != http.StatusBadRequest {
			t.Errorf("GET %s: status %d, want 400; body %.300s", path, r.status, r.body)
		}
	}
	if r := b.do(t, "GET", "/api/v1/task-instances?task=t0", ""); r.status != http.StatusOK {
		t.Errorf("a good filter: status %d; body %.300s", r.status, r.body)
	}
	for _, l := range log.lines() {
		if l["level"] == "error" {
			t.Errorf("a bad filter was logged at error level: %v", l)
		}
	}
}
