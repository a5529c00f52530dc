package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/notify"
)

// request is what the test's webhook receiver got.
type request struct {
	key  string
	body map[string]any
}

// receiver is a webhook that answers with the statuses of answers in turn, then 200, and
// records each request.
type receiver struct {
	mu       sync.Mutex
	answers  []int
	requests []request
	srv      *httptest.Server
}

func newReceiver(t *testing.T, answers ...int) *receiver {
	r := &receiver{answers: answers}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil || req.Method != http.MethodPost ||
			req.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook got %s %s (%s): %v", req.Method, b, req.Header.Get("Content-Type"), err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests = append(r.requests, request{key: req.Header.Get("Idempotency-Key"), body: body})
		status := http.StatusOK
		if len(r.answers) > 0 {
			status, r.answers = r.answers[0], r.answers[1:]
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) got() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

type testBundle struct {
	ctx     context.Context
	db      *dao.DB
	hook    *receiver
	env     map[string]string
	counted []string
	mu      sync.Mutex
	// refusePrivate leaves notify.allow-private-targets off; the receivers are on loopback,
	// so the other tests turn it on.
	refusePrivate bool
}

func setup(t *testing.T, answers ...int) *testBundle {
	t.Helper()
	db, _ := daotest.New(t)
	b := &testBundle{ctx: context.Background(), db: db, hook: newReceiver(t, answers...)}
	b.env = map[string]string{"ZKSCHED_WEBHOOK_OPS": b.hook.srv.URL, "ZKSCHED_WEBHOOK_SLACK": b.hook.srv.URL}
	return b
}

func (b *testBundle) sender(cfg notify.Config) *notify.Sender {
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	cfg.AllowPrivateTargets = !b.refusePrivate
	if cfg.Backoff == 0 {
		cfg.Backoff, cfg.MaxBackoff = time.Millisecond, time.Millisecond
	}
	cfg.Getenv = func(k string) string { return b.env[k] }
	cfg.Jitter = func() float64 { return 0 }
	cfg.Counted = func(r string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.counted = append(b.counted, r)
	}
	return notify.NewSender(cfg, b.db)
}

// fail ends an instance of a workflow that notifies on failure, as name, with the entries.
func (b *testBundle) fail(t *testing.T, name string, entries ...map[string]any) int64 {
	t.Helper()
	wf := daotest.Submit(t, b.db, name, map[string]any{"name": name, "notify": entries})
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	if err := b.db.WorkflowFinishIfOwned(b.ctx, wf, "m1", dao.WorkflowFailed, "boom"); err != nil {
		t.Fatal(err)
	}
	return wf
}

// sendAll sends until nothing is due, at most n rounds.
func (b *testBundle) sendAll(t *testing.T, s *notify.Sender, n int) {
	t.Helper()
	for range n {
		if _, err := s.SendDue(b.ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // past the 1ms backoff, by the database's clock
	}
}

func (b *testBundle) row(t *testing.T) dao.Notification {
	t.Helper()
	ns, err := b.db.NotificationList(b.ctx, "", 0, 10)
	if err != nil || len(ns) != 1 {
		t.Fatalf("notifications = %+v, %v; want one", ns, err)
	}
	return ns[0]
}

// TestWebhookBody: a webhook gets the message as JSON with its idempotency key, a link to the
// instance's page under the public URL, and the row is sent.
func TestWebhookBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"})
	b.sendAll(t, b.sender(notify.Config{PublicURL: "https://zksched.example.com/"}), 1)
	got := b.hook.got()
	if len(got) != 1 {
		t.Fatalf("webhook got %d requests; want 1", len(got))
	}
	body := got[0].body
	want := map[string]any{"event": "failure", "workflow": "nightly", "instance": float64(wf), "state": "failed",
		"error": "boom", "url": "https://zksched.example.com/workflows/" + jsonNumber(wf)}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("body[%s] = %v; want %v (body %v)", k, body[k], v, body)
		}
	}
	if ts, _ := body["time"].(string); ts == "" {
		t.Errorf("body has no time: %v", body)
	}
	n := b.row(t)
	if n.State != dao.NotificationSent || n.SentAt == nil || got[0].key != n.IdempotencyKey || !strings.HasPrefix(n.IdempotencyKey, "zksched-") {
		t.Fatalf("row = %+v, key sent %q; want sent with that key", n, got[0].key)
	}
	if !slices.Equal(b.counted, []string{"sent"}) {
		t.Errorf("counted %v; want [sent]", b.counted)
	}
}

func jsonNumber(id int64) string { b, _ := json.Marshal(id); return string(b) }

// TestWebhookSlack: slack: true sends {"text": ...}.
func TestWebhookSlack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_SLACK", "slack": true})
	b.sendAll(t, b.sender(notify.Config{}), 1)
	got := b.hook.got()
	if len(got) != 1 || len(got[0].body) != 1 {
		t.Fatalf("webhook got %+v; want one body with text alone", got)
	}
	want := "zksched failure: workflow nightly instance " + jsonNumber(wf) + " is failed: boom"
	if got[0].body["text"] != want {
		t.Fatalf("text = %q; want %q", got[0].body["text"], want)
	}
}

// TestWebhookSaysTheEndReason: an instance its workflow timeout ended sends timeout, its body
// carrying end_reason and its Slack text the reason in words.
func TestWebhookSaysTheEndReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := daotest.Submit(t, b.db, "nightly", map[string]any{"name": "nightly", "notify": []map[string]any{
		{"on": []string{"timeout"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"},
		{"on": []string{"timeout"}, "webhook-url-env": "ZKSCHED_WEBHOOK_SLACK", "slack": true}}})
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	if err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		_, err := q.WorkflowTimeOutIfOwned(b.ctx, wf, "m1", "workflow timeout 1s exceeded")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b.sendAll(t, b.sender(notify.Config{}), 1)
	got := b.hook.got()
	if len(got) != 2 {
		t.Fatalf("webhook got %+v; want two requests", got)
	}
	text := "zksched timeout: workflow nightly instance " + jsonNumber(wf) + " is failed (its timeout passed): workflow timeout 1s exceeded"
	var sawBody, sawText bool
	for _, r := range got {
		switch {
		case r.body["text"] != nil:
			sawText = r.body["text"] == text
		default:
			sawBody = r.body["event"] == "timeout" && r.body["end_reason"] == "timeout"
		}
	}
	if !sawBody || !sawText {
		t.Fatalf("webhook got %+v; want a body with end_reason timeout and the text %q", got, text)
	}
}

// TestWebhookRetries: a refused try is retried, with the same idempotency key, until the
// webhook takes it; the last error is kept.
func TestWebhookRetries(t *testing.T) {
	t.Parallel()
	b := setup(t, http.StatusServiceUnavailable, http.StatusInternalServerError)
	b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"})
	b.sendAll(t, b.sender(notify.Config{}), 5)
	got := b.hook.got()
	if len(got) != 3 || got[0].key != got[1].key || got[1].key != got[2].key {
		t.Fatalf("webhook got %+v; want 3 tries with one key", got)
	}
	n := b.row(t)
	if n.State != dao.NotificationSent || n.Attempts != 3 || n.LastError == nil ||
		*n.LastError != "the webhook in ZKSCHED_WEBHOOK_OPS answered 500 Internal Server Error" {
		t.Fatalf("row = %+v; want sent at attempt 3, its last error kept", n)
	}
	if !slices.Equal(b.counted, []string{"failed", "failed", "sent"}) {
		t.Errorf("counted %v", b.counted)
	}
}

// TestWebhookDead: after max-attempts failed tries the row is dead and is tried no more.
func TestWebhookDead(t *testing.T) {
	t.Parallel()
	b := setup(t, 500, 500, 500, 500)
	b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"})
	b.sendAll(t, b.sender(notify.Config{MaxAttempts: 2}), 5)
	if got := b.hook.got(); len(got) != 2 {
		t.Fatalf("webhook got %d tries; want 2", len(got))
	}
	if n := b.row(t); n.State != dao.NotificationDead || n.Attempts != 2 || n.LastError == nil {
		t.Fatalf("row = %+v; want dead after 2 tries", n)
	}
	if !slices.Equal(b.counted, []string{"failed", "dead"}) {
		t.Errorf("counted %v", b.counted)
	}
}

// TestWebhookUnsetVariable: an unset variable fails the try with its name, and the URL of a
// webhook that cannot be reached is not in the error (it is a secret).
func TestWebhookUnsetVariable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fail(t, "a", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_NOT_SET"})
	b.sendAll(t, b.sender(notify.Config{MaxAttempts: 1}), 1)
	n := b.row(t)
	if n.State != dao.NotificationDead || n.LastError == nil ||
		*n.LastError != "environment variable ZKSCHED_WEBHOOK_NOT_SET is not set on this master: it holds the webhook's URL" {
		t.Fatalf("row = %+v", n)
	}

	b2 := setup(t)
	b2.env["ZKSCHED_WEBHOOK_OPS"] = "http://127.0.0.1:1/secret-token"
	b2.fail(t, "b", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"})
	b2.sendAll(t, b2.sender(notify.Config{MaxAttempts: 1}), 1)
	n = b2.row(t)
	if n.LastError == nil || strings.Contains(*n.LastError, "secret-token") || !strings.Contains(*n.LastError, "ZKSCHED_WEBHOOK_OPS") {
		t.Fatalf("last error %v; want the variable's name, not the URL", n.LastError)
	}
}

// TestBackoff: each retry waits twice the last, up to the cap, plus up to a fifth.
func TestBackoff(t *testing.T) {
	t.Parallel()
	jitter := 0.0
	s := notify.NewSender(notify.Config{Backoff: 10 * time.Second, MaxBackoff: time.Minute,
		Jitter: func() float64 { return jitter }}, nil)
	for attempt, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second,
		4: time.Minute, 30: time.Minute} {
		if got := s.Backoff(attempt); got != want {
			t.Errorf("Backoff(%d) = %s; want %s", attempt, got, want)
		}
	}
	jitter = 0.5
	if got, want := s.Backoff(2), 22*time.Second; got != want {
		t.Errorf("Backoff(2) with jitter 0.5 = %s; want %s", got, want)
	}
}

// TestRunPolls: Run sends at once, then at each poll of its clock.
func TestRunPolls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClock()
	s := b.sender(notify.Config{PollInterval: time.Minute, Clock: clock})
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"})
	if got := b.hook.got(); len(got) != 0 {
		t.Fatalf("sent %d before the poll", len(got))
	}
	clock.Advance(time.Minute)
	testenv.WaitFor(t, 10*time.Second, 10*time.Millisecond, "a send after the poll", func() bool { return len(b.hook.got()) > 0 })
}
