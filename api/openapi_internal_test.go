package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOpenAPIRoutes checks the document against the route table: every /api/v1 route is in
// it, with its method and path parameters, and it has no operation that is not a route.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Version: "test", AllowUnauthenticated: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(s.openapi, &doc); err != nil {
		t.Fatal(err)
	}
	routes := 0
	for pattern := range s.need {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = "", pattern
		}
		if !strings.HasPrefix(path, "/api/v1/") {
			continue
		}
		routes++
		if method == "" {
			t.Errorf("route %s has no method: give it one, and document it in openapi.go", pattern)
			continue
		}
		op, ok := doc.Paths[path][strings.ToLower(method)]
		if !ok {
			t.Errorf("route %s is not in the OpenAPI document: add it to operations in openapi.go", pattern)
			continue
		}
		var documented []string
		for _, p := range op.Parameters {
			if p.In == "path" {
				documented = append(documented, p.Name)
			}
		}
		if got, want := strings.Join(documented, ","), strings.Join(pathParams(path), ","); got != want {
			t.Errorf("%s: path parameters %q documented, %q in the route", pattern, got, want)
		}
	}
	documented := 0
	for path, methods := range doc.Paths {
		for method := range methods {
			documented++
			if _, ok := s.need[strings.ToUpper(method)+" "+path]; !ok {
				t.Errorf("the OpenAPI document has %s %s, which is not a route", strings.ToUpper(method), path)
			}
		}
	}
	if routes == 0 || routes != documented {
		t.Errorf("%d /api/v1 routes, %d documented operations", routes, documented)
	}
}

// TestOpenAPIRefusesAnUnroutedOperation checks that a server does not start with a document
// that names an operation it does not route.
func TestOpenAPIRefusesAnUnroutedOperation(t *testing.T) {
	t.Parallel()
	need := map[string]Role{}
	for _, op := range operations() {
		need[op.pattern] = RoleViewer
	}
	if _, err := openAPI("test", need); err != nil {
		t.Fatalf("every operation routed: %v", err)
	}
	delete(need, "GET /api/v1/cluster")
	if _, err := openAPI("test", need); err == nil || !strings.Contains(err.Error(), "GET /api/v1/cluster is not a route") {
		t.Errorf("an operation without a route: error %v", err)
	}
}
