package notify_test

import (
	"bufio"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/notify"
)

// mailbox is an SMTP server for tests: it speaks enough of the protocol (RFC 5321) for a
// client sending in clear text, and keeps each mail's envelope and data.
type mailbox struct {
	ln    net.Listener
	mu    sync.Mutex
	mails []mailed
	// refuse makes it answer the next n RCPT commands 451.
	refuse int
}

type mailed struct {
	from, to, data string
}

func newMailbox(t *testing.T) *mailbox {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mb := &mailbox{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go mb.serve(c)
		}
	}()
	return mb
}

func (mb *mailbox) port() int { return mb.ln.Addr().(*net.TCPAddr).Port }

func (mb *mailbox) serve(c net.Conn) {
	defer c.Close()
	tp := textproto.NewConn(c)
	_ = tp.PrintfLine("220 mailbox.test ESMTP")
	var m mailed
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			_ = tp.PrintfLine("250-mailbox.test")
			_ = tp.PrintfLine("250 8BITMIME")
		case "HELO", "NOOP":
			_ = tp.PrintfLine("250 ok")
		case "RSET":
			m = mailed{}
			_ = tp.PrintfLine("250 ok")
		case "MAIL":
			m = mailed{from: arg}
			_ = tp.PrintfLine("250 ok")
		case "RCPT":
			mb.mu.Lock()
			refuse := mb.refuse > 0
			mb.refuse--
			mb.mu.Unlock()
			if refuse {
				_ = tp.PrintfLine("451 try again later")
				continue
			}
			m.to = arg
			_ = tp.PrintfLine("250 ok")
		case "DATA":
			_ = tp.PrintfLine("354 go ahead")
			data, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			m.data = string(data)
			mb.mu.Lock()
			mb.mails = append(mb.mails, m)
			mb.mu.Unlock()
			_ = tp.PrintfLine("250 queued")
		case "QUIT":
			_ = tp.PrintfLine("221 bye")
			return
		default:
			_ = tp.PrintfLine("502 not implemented")
		}
	}
}

func (mb *mailbox) got() []mailed {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return append([]mailed(nil), mb.mails...)
}

// header returns the value of a mail's header.
func header(t *testing.T, data, name string) string {
	t.Helper()
	h, err := textproto.NewReader(bufio.NewReader(strings.NewReader(data))).ReadMIMEHeader()
	if err != nil {
		t.Fatalf("mail headers: %v\n%s", err, data)
	}
	return h.Get(name)
}

// TestEmail: a notification by email reaches the SMTP server with the event in its subject
// and body, and a Message-ID made of its idempotency key; a refused try is retried with the
// same one.
func TestEmail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mb := newMailbox(t)
	mb.refuse = 1
	wf := b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "email": []string{"ops@example.com"}})
	s := b.sender(notify.Config{PublicURL: "https://zksched.example.com", Mailer: notify.NewMailer(notify.SMTP{
		Host: "127.0.0.1", Port: mb.port(), From: "zksched@example.com", Timeout: 5 * time.Second})})
	b.sendAll(t, s, 3)
	mails := mb.got()
	if len(mails) != 1 {
		t.Fatalf("mailbox got %d mails; want 1", len(mails))
	}
	m := mails[0]
	n := b.row(t)
	if n.State != dao.NotificationSent || n.Attempts != 2 || n.LastError == nil || !strings.Contains(*n.LastError, "451") {
		t.Fatalf("row = %+v; want sent at the second try, the refusal kept", n)
	}
	if !strings.Contains(m.from, "<zksched@example.com>") || !strings.Contains(m.to, "<ops@example.com>") {
		t.Errorf("envelope from %q to %q", m.from, m.to)
	}
	if got, want := header(t, m.data, "Message-Id"), "<"+n.IdempotencyKey+"@zksched>"; got != want {
		t.Errorf("Message-ID %q; want %q", got, want)
	}
	if got := header(t, m.data, "Subject"); !strings.HasPrefix(got, "zksched failure: workflow nightly instance") {
		t.Errorf("subject %q", got)
	}
	for _, want := range []string{"event: failure", "state: failed", "error: boom",
		"url: https://zksched.example.com/workflows/" + jsonNumber(wf)} {
		if !strings.Contains(m.data, want) {
			t.Errorf("body lacks %q:\n%s", want, m.data)
		}
	}
}

// TestEmailNotConfigured: without an SMTP server a mail fails with what to set.
func TestEmailNotConfigured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fail(t, "nightly", map[string]any{"on": []string{"failure"}, "email": []string{"ops@example.com"}})
	b.sendAll(t, b.sender(notify.Config{MaxAttempts: 1}), 1)
	if n := b.row(t); n.State != dao.NotificationDead || n.LastError == nil || !strings.Contains(*n.LastError, "notify.email.host") {
		t.Fatalf("row = %+v; want dead, saying what to set", n)
	}
}
