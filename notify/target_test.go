package notify_test

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/notify"
)

// TestPrivateTarget: loopback, unspecified, link-local and metadata addresses are private in
// every spelling that reaches them; the private ranges of an internal network and public
// addresses are not.
func TestPrivateTarget(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "0.0.0.0": true, "0.1.2.3": true, "::": true,
		"169.254.169.254": true, "169.254.1.1": true, "fe80::1": true, "fe80::1%eth0": true, "febf::1": true,
		"::ffff:127.0.0.1": true, "::ffff:169.254.169.254": true, "::127.0.0.1": true, "::ffff:0.0.0.0": true,
		"64:ff9b::a9fe:a9fe": true, "64:ff9b::7f00:1": true, "fd00:ec2::254": true, "100.100.100.200": true,
		"10.0.0.5": false, "172.16.3.4": false, "192.168.1.10": false, "fd12::5": false, "100.64.0.1": false,
		"93.184.216.34": false, "2606:4700::1111": false, "::ffff:10.0.0.5": false, "fec0::1": false,
	} {
		if got := notify.PrivateTarget(netip.MustParseAddr(addr)); got != want {
			t.Errorf("PrivateTarget(%s) = %v; want %v", addr, got, want)
		}
	}
}

// TestWebhookRedirectNotFollowed: a 307 is a failed try naming its status alone; the
// POST and its body never reach where it points, and the last error shows neither the
// Location nor the body.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var reached atomic.Int64
	metadata := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	t.Cleanup(metadata.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", metadata.URL+"/latest/meta-data/iam")
		w.WriteHeader(http.StatusTemporaryRedirect)
		_, _ = w.Write([]byte("body-of-the-redirect"))
	}))
	t.Cleanup(redirect.Close)
	b.env["ZKSCHED_WEBHOOK_OPS"] = redirect.URL
	b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"})
	b.sendAll(t, b.sender(notify.Config{MaxAttempts: 1}), 1)
	n := b.row(t)
	want := "the webhook in ZKSCHED_WEBHOOK_OPS answered 307 Temporary Redirect: a redirect, which is not followed"
	if n.State != dao.NotificationDead || n.LastError == nil || *n.LastError != want {
		t.Fatalf("row = %+v; want dead with %q", n, want)
	}
	if got := reached.Load(); got != 0 {
		t.Fatalf("the redirect's target got %d requests; want none", got)
	}
}

// TestWebhookStatusOnly: the last error names the status code and its standard name, not the
// reason phrase the target wrote nor its body.
func TestWebhookStatusOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				if _, err := http.ReadRequest(r); err != nil {
					return
				}
				_, _ = c.Write([]byte("HTTP/1.1 599 root:x:0:0\r\nContent-Length: 12\r\nConnection: close\r\n\r\nsecret-bytes"))
			}()
		}
	}()
	b.env["ZKSCHED_WEBHOOK_OPS"] = "http://" + ln.Addr().String()
	b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"})
	b.sendAll(t, b.sender(notify.Config{MaxAttempts: 1}), 1)
	n := b.row(t)
	if n.LastError == nil || *n.LastError != "the webhook in ZKSCHED_WEBHOOK_OPS answered 599" {
		t.Fatalf("last error %v; want the status code alone", n.LastError)
	}
}

// TestWebhookPrivateTargetRefused: without allow-private-targets a webhook on loopback is
// refused when connecting; nothing reaches it, and the last error says why without the URL.
func TestWebhookPrivateTargetRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.refusePrivate = true
	b.env["ZKSCHED_WEBHOOK_OPS"] = b.hook.srv.URL + "/secret-token"
	b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"})
	b.sendAll(t, b.sender(notify.Config{MaxAttempts: 1}), 1)
	if got := b.hook.got(); len(got) != 0 {
		t.Fatalf("webhook on loopback got %d requests; want none", len(got))
	}
	n := b.row(t)
	port := b.hook.srv.URL[strings.LastIndex(b.hook.srv.URL, ":"):]
	if n.LastError == nil || !strings.HasPrefix(*n.LastError, "the webhook in ZKSCHED_WEBHOOK_OPS was refused: ") ||
		!strings.Contains(*n.LastError, "notify.allow-private-targets") || strings.Contains(*n.LastError, "127.0.0.1") ||
		strings.Contains(*n.LastError, port) {
		t.Fatalf("last error %v; want the refusal, without the address", n.LastError)
	}
}

// TestWebhookVariableOutsidePattern: a rule naming a variable outside
// notify.webhook-env-pattern (stored before the pattern changed, or by a client that did not
// check) is never read: the try fails saying so, and nothing is posted.
func TestWebhookVariableOutsidePattern(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.env["PATH"] = b.hook.srv.URL
	b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "PATH"})
	b.sendAll(t, b.sender(notify.Config{MaxAttempts: 1}), 1)
	if got := b.hook.got(); len(got) != 0 {
		t.Fatalf("webhook got %d requests; want none", len(got))
	}
	n := b.row(t)
	want := "environment variable PATH may not hold a webhook's URL: its name does not match notify.webhook-env-pattern (ZKSCHED_WEBHOOK_*)"
	if n.LastError == nil || *n.LastError != want {
		t.Fatalf("last error %v; want %q", n.LastError, want)
	}

	b2 := setup(t)
	b2.env["OPS_HOOK"] = b2.hook.srv.URL
	b2.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "OPS_HOOK"})
	b2.sendAll(t, b2.sender(notify.Config{WebhookEnvPattern: "OPS_*"}), 1)
	if got := b2.hook.got(); len(got) != 1 {
		t.Fatalf("with the pattern OPS_*, the webhook in OPS_HOOK got %d requests; want 1", len(got))
	}
}

// TestWebhookTimeout: a target that never answers fails the try as a timeout, without its
// address.
func TestWebhookTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	b.env["ZKSCHED_WEBHOOK_OPS"] = "http://" + ln.Addr().String()
	b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"})
	b.sendAll(t, b.sender(notify.Config{MaxAttempts: 1, Timeout: 200 * time.Millisecond}), 1)
	n := b.row(t)
	if n.LastError == nil || *n.LastError != "the webhook in ZKSCHED_WEBHOOK_OPS did not answer within notify.timeout" {
		t.Fatalf("last error %v; want a timeout", n.LastError)
	}
}
