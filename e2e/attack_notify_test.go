package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

// The attack suite of the webhooks (issue 29, item 6): a workflow's author chooses which
// variable of the masters a webhook's URL is read from, and the target chooses its answer;
// neither may make a master post where it should not, nor tell a viewer what it found.

// countingServer is an HTTP server on loopback that counts its requests and answers with
// answer.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newCountingServer(t *testing.T, answer http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		answer(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// metadataAndRedirect starts a stand-in for a cloud metadata service and a webhook that
// answers 307 (which keeps the POST and its body) to it, with a body of its own.
func metadataAndRedirect(t *testing.T) (metadata, redirect *countingServer) {
	metadata = newCountingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"AccessKeyId": "metadata-credentials"}`))
	})
	redirect = newCountingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", metadata.URL+"/latest/meta-data/iam/security-credentials/")
		w.WriteHeader(http.StatusTemporaryRedirect)
		_, _ = w.Write([]byte("redirect-body-words"))
	})
	return metadata, redirect
}

// notifiedFile is a workflow of one noop task whose success is posted to each variable.
func notifiedFile(name string, vars ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nnotify:\n", name)
	for _, v := range vars {
		fmt.Fprintf(&b, "  - {on: [success], webhook-url-env: %s}\n", v)
	}
	b.WriteString("tasks:\n  - {name: a, type: noop}\n")
	return b.String()
}

// endedNotifications waits until n notifications are sent or dead (each has one try) and
// returns them.
func (e *e2e) endedNotifications(t *testing.T, n int) []dao.Notification {
	t.Helper()
	var ns []dao.Notification
	waitUntil(t, 60*time.Second, fmt.Sprintf("%d notifications sent or dead", n), func() bool {
		var err error
		if ns, err = e.db.NotificationList(context.Background(), "", 0, 100); err != nil {
			t.Fatal(err)
		}
		ended := 0
		for _, n := range ns {
			if n.State == dao.NotificationSent || n.State == dao.NotificationDead {
				ended++
			}
		}
		return ended == n
	})
	return ns
}

// TestAttackWebhookToThePrivateSide: a master without notify.allow-private-targets is given
// webhooks that point at its own loopback, by a redirect (307 to a "metadata" server), by
// name (localhost), as an IPv4-mapped IPv6 address and as 0.0.0.0. Each is refused when it
// connects: neither server gets a request, and each last error, which every viewer reads,
// names the variable and the refusal, not the address, port, Location or body.
func TestAttackWebhookToThePrivateSide(t *testing.T) {
	t.Parallel()
	metadata, redirect := metadataAndRedirect(t)
	port := metadata.URL[strings.LastIndex(metadata.URL, ":")+1:]
	targets := map[string]string{
		"ZKSCHED_WEBHOOK_REDIRECT": redirect.URL + "/hook",
		"ZKSCHED_WEBHOOK_BY_NAME":  "http://localhost:" + port + "/latest/meta-data/",
		"ZKSCHED_WEBHOOK_MAPPED":   "http://[::ffff:127.0.0.1]:" + port + "/latest/meta-data/",
		"ZKSCHED_WEBHOOK_ZERO":     "http://0.0.0.0:" + port + "/latest/meta-data/",
	}
	e := setupE2E(t, nil, "", "ZKSCHED_NOTIFY_MAX_ATTEMPTS=1")
	env := []string{}
	vars := []string{}
	for k, v := range targets {
		env, vars = append(env, k+"="+v), append(vars, k)
	}
	e.Master("master", env...)
	e.Worker("worker")
	if out, code := e.Run("submit", e.file(t, "private.yaml", notifiedFile("private", vars...))); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	for _, n := range e.endedNotifications(t, len(targets)) {
		if n.State != dao.NotificationDead {
			t.Errorf("the webhook in %s is %s; want dead", n.Target, n.State)
		}
		last := ""
		if n.LastError != nil {
			last = *n.LastError
		}
		if !strings.HasPrefix(last, "the webhook in "+n.Target+" was refused: ") || !strings.Contains(last, "notify.allow-private-targets") {
			t.Errorf("the webhook in %s failed with %q; want the refusal of a private target", n.Target, last)
		}
		for _, leak := range []string{"127.0.0.1", "localhost", "0.0.0.0", port, redirect.URL[strings.LastIndex(redirect.URL, ":")+1:],
			"meta-data", "redirect-body-words", "metadata-credentials"} {
			if strings.Contains(last, leak) {
				t.Errorf("the last error of %s shows %q to viewers: %q", n.Target, leak, last)
			}
		}
	}
	if got := redirect.hits.Load() + metadata.hits.Load(); got != 0 {
		t.Errorf("the loopback servers got %d requests (redirect %d, metadata %d); want none",
			got, redirect.hits.Load(), metadata.hits.Load())
	}
}

// TestAttackWebhookRedirect: with notify.allow-private-targets: true (the targets here are
// on loopback) a webhook that answers 307 is a failed delivery: the redirect's target gets
// nothing, and the last error names the status alone.
func TestAttackWebhookRedirect(t *testing.T) {
	t.Parallel()
	metadata, redirect := metadataAndRedirect(t)
	e := setupE2E(t, nil, "", "ZKSCHED_NOTIFY_MAX_ATTEMPTS=1")
	e.Master("master", "ZKSCHED_NOTIFY_ALLOW_PRIVATE_TARGETS=true", "ZKSCHED_WEBHOOK_OPS="+redirect.URL+"/hook")
	e.Worker("worker")
	if out, code := e.Run("submit", e.file(t, "redirected.yaml", notifiedFile("redirected", "ZKSCHED_WEBHOOK_OPS"))); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	ns := e.endedNotifications(t, 1)
	if ns[0].State != dao.NotificationDead {
		t.Errorf("the webhook that redirects is %s; want dead", ns[0].State)
	}
	want := "the webhook in ZKSCHED_WEBHOOK_OPS answered 307 Temporary Redirect: a redirect, which is not followed"
	if ns[0].LastError == nil || *ns[0].LastError != want {
		t.Errorf("last error %v; want %q", ns[0].LastError, want)
	}
	if got := metadata.hits.Load(); got != 0 {
		t.Errorf("the redirect's target got %d requests; want none", got)
	}
	if got := redirect.hits.Load(); got != 1 {
		t.Errorf("the webhook got %d requests; want 1", got)
	}
}

// TestAttackWebhookNamesAMasterVariable: a workflow naming PATH or HTTPS_PROXY as its
// webhook-url-env is refused when stored, by `zksched submit` and by the API, saying which
// names are allowed; nothing is stored.
func TestAttackWebhookNamesAMasterVariable(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_API_TOKEN="+attackToken)
	m := e.Master("master")
	file := notifiedFile("snoop", "PATH", "HTTPS_PROXY")
	wantMsg := []string{`notify entry #1: webhook-url-env "PATH" is not a webhook variable: the masters' notify.webhook-env-pattern allows names like ZKSCHED_WEBHOOK_*`,
		`notify entry #2: webhook-url-env "HTTPS_PROXY" is not a webhook variable`}
	out, code := e.Run("submit", e.file(t, "snoop.yaml", file))
	if code == 0 {
		t.Fatalf("submit of a webhook reading PATH: exit 0; want a refusal\n%s", out)
	}
	for _, w := range wantMsg {
		if !strings.Contains(out, w) {
			t.Errorf("submit said:\n%s\nwant it to say %q", out, w)
		}
	}
	base := "http://127.0.0.1:" + strconv.Itoa(m.Port)
	serving(t, m, base, nil)
	c := client(t, "127.0.0.1", nil)
	r := call(t, c, "POST", base+"/api/v1/definitions", file, append(bearer(attackToken), "Content-Type", "application/yaml")...)
	if r.status != http.StatusBadRequest {
		t.Fatalf("POST /api/v1/definitions of a webhook reading PATH: %d %s; want 400", r.status, r.body)
	}
	for _, w := range wantMsg {
		if !strings.Contains(r.body, strings.ReplaceAll(w, `"`, `\"`)) {
			t.Errorf("the API said %s; want it to say %q", r.body, w)
		}
	}
	if r := call(t, c, "GET", base+"/api/v1/definitions/snoop", "", bearer(attackToken)...); r.status != http.StatusNotFound {
		t.Errorf("GET the refused definition's versions: %d %s; want 404, nothing stored", r.status, r.body)
	}
}
