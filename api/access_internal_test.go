package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"":                          "/",
		"/":                         "/",
		"/cluster":                  "/cluster",
		"/tasks/3?attempt=2#log":    "/tasks/3?attempt=2#log",
		"/?state=failed&task=a%20b": "/?state=failed&task=a%20b",
		"/\t/evil.example/":         "/",
		"/\n/evil.example":          "/",
		"/\x7f/evil.example":        "/",
		"/\u0085/evil.example":      "/",
		"//evil.example":            "/",
		"/\\evil.example":           "/",
		"\\\\evil.example":          "/",
		"/%2F%2Fevil.example":       "/",
		"/%2f/evil.example":         "/",
		"/%5Cevil.example":          "/",
		"/%09/evil.example":         "/",
		"/%252F%252Fevil.example":   "/",
		"/%25252F%25252Fevil":       "/",
		"https://evil.example":      "/",
		"evil.example/x":            "/",
		"javascript:alert(1)":       "/",
		"/%zz":                      "/",
		"/\xff":                     "/",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

func TestFailLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	l := newFailLimiter(func() time.Time { return now })
	for i := range failBurst {
		if w := l.retryAfter("a"); w != 0 {
			t.Fatalf("after %d failures: wait %v, want none", i, w)
		}
		l.fail("a")
	}
	if w := l.retryAfter("a"); w != failRefill {
		t.Fatalf("after %d failures: wait %v, want %v", failBurst, w, failRefill)
	}
	if w := l.retryAfter("b"); w != 0 {
		t.Fatalf("another address waits %v", w)
	}
	now = now.Add(failRefill / 2)
	if w := l.retryAfter("a"); w != failRefill/2 {
		t.Fatalf("half a refill later: wait %v, want %v", w, failRefill/2)
	}
	now = now.Add(failRefill / 2)
	if w := l.retryAfter("a"); w != 0 {
		t.Fatalf("a refill later: wait %v, want none", w)
	}
	l.fail("a")
	if w := l.retryAfter("a"); w == 0 {
		t.Fatal("a failure past the refill is let through again at once")
	}
}

func TestFailLimiterMemoryIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	l := newFailLimiter(func() time.Time { return now })
	l.max = 100
	for i := range 1000 {
		l.fail(fmt.Sprintf("10.0.%d.%d", i/256, i%256))
		if l.size() > l.max {
			t.Fatalf("%d addresses held, cap %d", l.size(), l.max)
		}
	}
	// Full again, the old addresses make room for new ones first.
	now = now.Add(failRefill * failBurst)
	l.fail("new")
	if l.size() > l.max || l.retryAfter("new") != 0 {
		t.Fatalf("%d addresses held, cap %d", l.size(), l.max)
	}
}

func TestClientKey(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:5000":                 "127.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443":     "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:1":       "2001:db8:1:2::/64",
		"[::ffff:10.1.2.3]:80":           "10.1.2.3",
		"not an address":                 "not an address",
		"[fe80::1%eth0]:80":              "fe80::1%eth0",
		"[2001:db8:1:3:3:4:5:6]:443":     "2001:db8:1:3::/64",
		"192.0.2.7:65535":                "192.0.2.7",
		"[2001:db8:0:0:0:0:0:1]:8080":    "2001:db8::/64",
		"[2001:0db8:0000:0000::2]:8080":  "2001:db8::/64",
		"[2001:db8:aaaa:bbbb:1::1]:8080": "2001:db8:aaaa:bbbb::/64",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		if got := clientKey(r); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", addr, got, want)
		}
	}
}

// TestRouteTable checks the route table against the roles of the issue: every GET is a
// viewer's, every action an operator's (a stored definition's run from the UI too), every
// definition or submission through the API an admin's, and a route that changes state cannot
// be left to a viewer.
func TestRouteTable(t *testing.T) {
	t.Parallel()
	s, err := New(Config{NodeID: "n", AllowUnauthenticated: true, Log: zerolog.Nop()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Role{
		"POST /api/v1/definitions":                          RoleAdmin,
		"POST /api/v1/workflow-instances":                   RoleAdmin,
		"POST /api/v1/workflow-instances/{id}/stop":         RoleOperator,
		"POST /api/v1/workflow-instances/{id}/rerun":        RoleOperator,
		"POST /api/v1/task-instances/{id}/kill":             RoleOperator,
		"POST /api/v1/task-instances/{id}/rerun":            RoleOperator,
		"POST /api/v1/task-instances/{id}/signal":           RoleOperator,
		"POST /api/v1/schedules/{name}/enable":              RoleOperator,
		"POST /api/v1/schedules/{name}/disable":             RoleOperator,
		"POST /api/v1/schedules/{name}/trigger":             RoleOperator,
		"POST /tasks/{id}/kill":                             RoleOperator,
		"POST /tasks/{id}/rerun":                            RoleOperator,
		"POST /tasks/{id}/signal":                           RoleOperator,
		"POST /workflows/{id}/stop":                         RoleOperator,
		"POST /workflows/{id}/rerun":                        RoleOperator,
		"POST /definitions/{name}/run":                      RoleOperator,
		"POST /schedules/{name}/enable":                     RoleOperator,
		"POST /schedules/{name}/disable":                    RoleOperator,
		"POST /schedules/{name}/trigger":                    RoleOperator,
		"GET /api/v1/task-instances/{id}/log":               RoleViewer,
		"GET /api/v1/definitions/{name}/versions/{version}": RoleViewer,
	}
	for pattern, need := range s.need {
		if strings.HasPrefix(pattern, "GET ") && need != RoleViewer {
			t.Errorf("%s needs %s: every GET is a viewer's", pattern, need)
		}
		if w, ok := want[pattern]; ok && w != need {
			t.Errorf("%s needs %s, want %s", pattern, need, w)
		}
		if !strings.HasPrefix(pattern, "GET ") && need == RoleViewer && !stateless[pattern] && !signed[pattern] {
			t.Errorf("%s changes state and is a viewer's", pattern)
		}
	}
	for pattern := range want {
		if _, ok := s.need[pattern]; !ok {
			t.Errorf("no route %s", pattern)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a POST route for viewers was accepted")
		}
	}()
	s.route(http.NewServeMux(), "POST /api/v1/new-action", RoleViewer,
		func(http.ResponseWriter, *http.Request) error { return nil }, s.writeError)
}
