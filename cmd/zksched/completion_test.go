package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// values returns the candidates' values, without their descriptions.
func values(cands []string) string {
	var vs []string
	for _, c := range cands {
		v, _, _ := strings.Cut(c, "\t")
		vs = append(vs, v)
	}
	return strings.Join(vs, " ")
}

func TestComplete(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		words []string
		files bool
		want  string
	}{
		{words: []string{""}, want: "master worker migrate submit define schedule hooks backfill status logs kill rerun stop signal asset zk user schema version completion"},
		{words: []string{"s"}, want: "submit schedule status stop signal schema"},
		{words: []string{"st"}, want: "status stop"},
		{words: []string{"nosuch", ""}},
		{words: []string{"logs", "--f"}, want: "--follow"},
		{words: []string{"master", "-"}, want: "--check-config --config"},
		{words: []string{"submit", "--w"}, want: "--wait"},
		{words: []string{"submit", ""}, files: true},
		{words: []string{"submit", "--config", ""}, files: true},
		{words: []string{"submit", "--config=x.yaml", "--param", ""}},
		{words: []string{"status", "--token-file", ""}, files: true},
		{words: []string{"schedule", ""}, want: "list enable disable trigger"},
		{words: []string{"schedule", "--json", "e"}, want: "enable"},
		{words: []string{"zk", ""}, want: "tree nodes"},
		{words: []string{"completion", ""}, want: "bash zsh fish"},
		{words: []string{"user", "add", "alice", "--role", ""}, want: "viewer operator admin"},
		{words: []string{"user", "add", "alice", "--role", "o"}, want: "operator"},
		{words: []string{"version", ""}},
		// No server configured: no names or ids, and no error.
		{words: []string{"status", ""}},
		{words: []string{"signal", ""}},
		{words: []string{"schedule", "trigger", ""}},
		// After "--" every word is an argument.
		{words: []string{"zk", "--", "-"}, want: ""},
	} {
		files, cands := complete(context.Background(), tc.words, "")
		if files != tc.files || values(cands) != tc.want {
			t.Errorf("complete(%q) = files %v, %q; want files %v, %q", tc.words, files, values(cands), tc.files, tc.want)
		}
	}
}

// TestCompleteFromTheAPI completes ids and names from what a master lists, asking it with
// the token and filters each command needs, and shows nothing when the master does not
// answer or answers wrong.
func TestCompleteFromTheAPI(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		switch r.URL.Path {
		case "/api/v1/workflow-instances":
			fmt.Fprint(w, `{"items": [{"id": 42, "workflow_name": "nightly", "state": "running"}, {"id": 7, "workflow_name": "report", "state": "running"}]}`)
		case "/api/v1/task-instances":
			fmt.Fprintf(w, `{"items": [{"id": 901, "name": "review", "workflow_instance_id": 42, "state": %q}]}`, r.URL.Query().Get("state"))
		case "/api/v1/schedules":
			fmt.Fprint(w, `{"schedules": [{"workflow": "nightly"}, {"workflow": "berlin-report"}]}`)
		case "/api/v1/assets":
			fmt.Fprint(w, `{"assets": [{"asset": "orders"}, {"asset": "customers"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("ZKSCHED_TOKEN", "tok-123")
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"status", ""}, "42 7"},
		{[]string{"status", "4"}, "42"},
		{[]string{"stop", ""}, "42 7"},
		{[]string{"signal", ""}, "901"},
		{[]string{"rerun", ""}, "901 901"},
		{[]string{"rerun", "--workflow", ""}, "42 7"},
		{[]string{"schedule", "trigger", ""}, "berlin-report nightly"},
		{[]string{"backfill", "n"}, "nightly"},
		{[]string{"asset", "emit", ""}, "customers orders"},
		{[]string{"schedule", "list", ""}, ""},
	} {
		_, cands := complete(context.Background(), tc.words, srv.URL)
		if values(cands) != tc.want {
			t.Errorf("complete(%q) = %q; want %q", tc.words, values(cands), tc.want)
		}
	}
	_, cands := complete(context.Background(), []string{"signal", ""}, srv.URL)
	if len(cands) != 1 || cands[0] != "901\treview of workflow instance 42 (waiting)" {
		t.Errorf("signal's candidates = %q; want the task with what it is", cands)
	}
	mu.Lock()
	all := strings.Join(asked, "\n")
	mu.Unlock()
	for _, want := range []string{"/api/v1/task-instances?state=waiting Bearer tok-123", "/api/v1/workflow-instances?state=running Bearer tok-123"} {
		if !strings.Contains(all, want) {
			t.Errorf("the master was asked:\n%s\nwant %q among them", all, want)
		}
	}
	// --server on the line names the master, over the environment's.
	if _, cands := complete(context.Background(), []string{"status", "--server", srv.URL, ""}, "http://127.0.0.1:1"); values(cands) != "42 7" {
		t.Errorf("with --server: %q; want the ids that master lists", values(cands))
	}

	// A master that does not answer: nothing, within the timeout.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Now()
	if _, cands := complete(context.Background(), []string{"status", ""}, "http://"+l.Addr().String()); len(cands) != 0 {
		t.Errorf("a silent master: %q; want nothing", cands)
	}
	if d := time.Since(start); d > completeTimeout+time.Second {
		t.Errorf("a silent master kept completion %v; want at most %v", d, completeTimeout)
	}
	// A bad answer: nothing.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "<html>") }))
	defer bad.Close()
	if _, cands := complete(context.Background(), []string{"status", ""}, bad.URL); len(cands) != 0 {
		t.Errorf("a bad answer: %q; want nothing", cands)
	}
}

// TestCompleteCommand is the hidden command the scripts run: a directive, then candidates;
// exit 0 whatever it is given.
func TestCompleteCommand(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := run([]string{completeCommand, "submit", ""}, &out, &errOut); code != exitOK || out.String() != completeFiles+"\n" {
		t.Errorf("__complete submit '': exit %d, %q; want 0 and the files directive", code, out.String())
	}
	out.Reset()
	if code := run([]string{completeCommand, "kil"}, &out, &errOut); code != exitOK || !strings.HasPrefix(out.String(), completeWords+"\nkill\t") {
		t.Errorf("__complete kil: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{completeCommand}, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "\nversion\t") {
		t.Errorf("__complete: exit %d, %q; want every command", code, out.String())
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out.Reset()
		if code := run([]string{"completion", shell}, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "zksched __complete") {
			t.Errorf("completion %s: exit %d\n%s", shell, code, out.String())
		}
	}
	if code := run([]string{"completion", "tcsh"}, &out, &errOut); code != exitUsage {
		t.Errorf("completion tcsh: exit %d; want %d", code, exitUsage)
	}
}
