package executor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/notify"
	"github.com/zksched/zksched/workflow"
)

func TestHTTPToolAllowList(t *testing.T) {
	t.Parallel()
	h := HTTPTools{Allow: []string{"https://tickets.example.com/api/", "http://10.0.0.5:8080/hooks"}}
	for raw, want := range map[string]bool{
		"https://tickets.example.com/api/issues":          true,
		"https://tickets.example.com/api/":                true,
		"https://TICKETS.example.com/api/x":               true,
		"https://tickets.example.com/api":                 true,
		"https://tickets.example.com/apix":                false,
		"https://tickets.example.com/api/../admin":        false,
		"https://tickets.example.com/api/%2e%2e/admin":    false,
		"http://tickets.example.com/api/issues":           false,
		"https://tickets.example.com.evil.com/api/":       false,
		"https://user@tickets.example.com/api/":           false,
		"http://10.0.0.5:8080/hooks/a":                    true,
		"http://10.0.0.5:8080/hooksx":                     false,
		"http://10.0.0.5:8081/hooks/a":                    false,
		"https://tickets.example.com/api/issues?x=1#frag": true,
	} {
		if got := h.allowed(raw); got != want {
			t.Errorf("allowed(%s) = %t, want %t", raw, got, want)
		}
	}
}

// recordedRequest is what the test server saw of one request.
type recordedRequest struct {
	Method, Path, Query, Body, Key, Auth string
}

func httpToolServer(t *testing.T, status int) (*httptest.Server, func() []recordedRequest) {
	var mu sync.Mutex
	var got []recordedRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, recordedRequest{r.Method, r.URL.Path, r.URL.RawQuery, string(body), r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization")})
		mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"ticket": 42}` + strings.Repeat(" ", 100)))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []recordedRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]recordedRequest(nil), got...)
	}
}

func httpAgent(url, method string, store LoopStore) Task {
	return Task{ID: 5, Attempt: 1, Spec: workflow.Task{Name: "ticket", Type: "agent", Provider: "offline", Prompt: "open a ticket",
		Tools: []workflow.Tool{{Name: "open", Description: "opens a ticket", Type: workflow.ToolHTTP, URL: url, Method: method,
			Headers: map[string]string{"Authorization": "Bearer ${TICKETS_TOKEN}"},
			Arguments: map[string]any{"type": "object", "properties": map[string]any{
				"title": map[string]any{"type": "string", "default": "disk full"}, "urgent": map[string]any{"type": "boolean"}}}}}},
		Loop: store}
}

func TestHTTPToolSendsTheCall(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"", "GET"} {
		srv, requests := httpToolServer(t, http.StatusCreated)
		store := newMemLoop()
		sh := shell(t)
		sh.BaseEnv = []string{"TICKETS_TOKEN=s3cret", "PATH=/usr/bin"}
		a := Agent{Providers: offlineProviders(), Shell: sh, HTTP: HTTPTools{Allow: []string{srv.URL + "/api/"},
			Client: notify.OutboundClient(5*time.Second, true), ResponseLimit: 20}}
		res := a.Run(context.Background(), httpAgent(srv.URL+"/api/issues", method, store), &syncBuffer{})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		got := requests()
		if len(got) != 1 {
			t.Fatalf("%s: %d requests, want 1", method, len(got))
		}
		r := got[0]
		if r.Key != "zk-5-1-1" || r.Auth != "Bearer s3cret" || r.Path != "/api/issues" {
			t.Errorf("%s: request %+v: want the call id as Idempotency-Key and the header expanded", method, r)
		}
		switch method {
		case "":
			var body map[string]any
			if r.Method != "POST" || json.Unmarshal([]byte(r.Body), &body) != nil || body["title"] != "disk full" || body["urgent"] != true {
				t.Errorf("POST request %+v: want the arguments as the JSON body", r)
			}
		case "GET":
			if r.Method != "GET" || r.Query != "title=disk+full&urgent=true" || r.Body != "" {
				t.Errorf("GET request %+v: want the arguments as the query", r)
			}
		}
		c := store.calls[[2]int{1, 1}]
		if c.State != CallEnded || c.IsError || !strings.HasPrefix(c.Result, "HTTP 201 Created\n{\"ticket\": 42}") ||
			!strings.Contains(c.Result, "[cut: the tool wrote 114 bytes; the first 20 are shown]") {
			t.Errorf("%s: call %+v: want the status and the body, cut at the response limit", method, c)
		}
	}
}

func TestHTTPToolFailures(t *testing.T) {
	t.Parallel()
	srv, requests := httpToolServer(t, http.StatusInternalServerError)
	t.Run("an error status is the tool failing, which the model sees", func(t *testing.T) {
		store := newMemLoop()
		a := Agent{Providers: offlineProviders(), Shell: shell(t), HTTP: HTTPTools{Allow: []string{srv.URL},
			Client: notify.OutboundClient(5*time.Second, true)}}
		if res := a.Run(context.Background(), httpAgent(srv.URL+"/x", "POST", store), &syncBuffer{}); res.Err != nil {
			t.Fatal(res.Err)
		}
		if c := store.calls[[2]int{1, 1}]; !c.IsError || !strings.Contains(c.Result, "the answer was 500 Internal Server Error") {
			t.Errorf("call %+v", c)
		}
	})
	t.Run("a url outside the allow list fails the task, the call never started", func(t *testing.T) {
		store := newMemLoop()
		n := len(requests())
		a := Agent{Providers: offlineProviders(), Shell: shell(t), HTTP: HTTPTools{Allow: []string{"https://elsewhere.example.com/"},
			Client: notify.OutboundClient(5*time.Second, true)}}
		res := a.Run(context.Background(), httpAgent(srv.URL+"/x", "POST", store), &syncBuffer{})
		if !errors.Is(res.Err, errHTTPToolConfig) || !strings.Contains(res.Err.Error(), "is under none of worker.http-tools.allow (https://elsewhere.example.com/)") {
			t.Errorf("error %v", res.Err)
		}
		if len(store.calls) != 0 || len(requests()) != n {
			t.Errorf("calls %v: want none recorded, no request sent", store.calls)
		}
	})
	t.Run("a private target is refused unless allowed", func(t *testing.T) {
		store := newMemLoop()
		n := len(requests())
		a := Agent{Providers: offlineProviders(), Shell: shell(t), HTTP: HTTPTools{Allow: []string{srv.URL},
			Client: notify.OutboundClient(5*time.Second, false)}}
		if res := a.Run(context.Background(), httpAgent(srv.URL+"/x", "POST", store), &syncBuffer{}); res.Err != nil {
			t.Fatal(res.Err)
		}
		c := store.calls[[2]int{1, 1}]
		if !c.IsError || !strings.Contains(c.Result, "worker.http-tools.allow-private-targets: true would allow") || len(requests()) != n {
			t.Errorf("call %+v: want refused at connect, nothing sent", c)
		}
	})
}
