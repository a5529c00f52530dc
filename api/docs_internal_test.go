package api

import (
	"regexp"
	"strings"
	"testing"

	"github.com/zksched/zksched/internal/testenv"
)

// TestDocsRouteTable: docs/http-api.md's table of routes names every /api/v1 route of the
// route table. A cell lists routes as "`GET /api/v1/x?filter=`, `/y`", a later one being the
// first's path with its last segment replaced (…/stop, `/rerun`) or extended (…/{name},
// `/versions/{v}`); path parameters match whatever their names.
func TestDocsRouteTable(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Version: "test", AllowUnauthenticated: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	params := regexp.MustCompile(`\{[^}]*\}`)
	documented := map[string]bool{}
	for line := range strings.Lines(testenv.DocSection(t, "docs/http-api.md", "The HTTP API")) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		var method, first string
		for _, item := range regexp.MustCompile("`([^`]*)`").FindAllStringSubmatch(cell, -1) {
			route, _, _ := strings.Cut(item[1], "?")
			route = params.ReplaceAllString(route, "{}")
			if m, p, ok := strings.Cut(route, " "); ok {
				method, first = m, p
				documented[m+" "+p] = true
				continue
			}
			if method == "" || !strings.HasPrefix(route, "/") {
				continue
			}
			documented[method+" "+first+route] = true
			documented[method+" "+first[:strings.LastIndexByte(first, '/')]+route] = true
		}
	}
	for pattern := range s.need {
		if !strings.Contains(pattern, " /api/v1/") {
			continue
		}
		if !documented[params.ReplaceAllString(pattern, "{}")] {
			t.Errorf("docs/http-api.md's table of routes lacks %s", pattern)
		}
	}
}
