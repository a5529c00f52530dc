package master

import (
	"context"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testenv"
)

// countWarnings counts the log lines at warn level or above, and marks warned at each.
type countWarnings struct {
	n      atomic.Int64
	warned chan struct{}
}

func (c *countWarnings) Write(p []byte) (int, error) {
	if strings.Contains(string(p), `"level":"warn"`) || strings.Contains(string(p), `"level":"error"`) {
		c.n.Add(1)
		signal(c.warned)()
	}
	return len(p), nil
}

// TestDatabaseGoneDoesNotSpin checks that a master whose database refuses connections retries
// at its poll interval, not in a loop: each failed claim waits for the next wake-up or poll.
func TestDatabaseGoneDoesNotSpin(t *testing.T) {
	t.Parallel()
	_, dsn := daotest.New(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := dao.Open(ctx, u.String(), 4, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	warns := &countWarnings{warned: make(chan struct{}, 1)}
	const poll = 200 * time.Millisecond
	m := New(Config{ID: "m1", PollInterval: poll, Log: zerolog.New(warns)}, db, newGate(true))
	waits, rescans := make(chan struct{}, 1), make(chan struct{}, 1)
	m.waiting, m.rescanned = signal(waits), signal(rescans)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()
	wait := func(c <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s within 10s", what)
		}
	}
	// Settled: the listener listens, and the master has looked at everything it then asked for.
	wait(rescans, "rescan once the master's listener listens")
	select {
	case <-waits:
	default:
	}
	wait(waits, "wait of the master after its first rounds")

	proxy.Close() // connection refused from now on
	// The next poll's round fails; the window starts once the master waits after it.
	wait(warns.warned, "warning with the database gone")
	select {
	case <-waits:
	default:
	}
	wait(waits, "wait of the master after a failed round")
	before := warns.n.Load()
	// Real time goes by: a master that retried at once would warn all along.
	const window = 2 * time.Second
	time.Sleep(window)
	got := warns.n.Load() - before
	// Each poll may warn for its claim and for the admission of waiting instances; a loop
	// retrying at once warns thousands of times in the window.
	if limit := int64(3 * window / poll); got > limit {
		t.Fatalf("%d warnings in %v with the database gone, want at most %d (one retry per poll)", got, window, limit)
	}
	if got == 0 {
		t.Fatalf("no warning in %v with the database gone: the test saw no failed claim", window)
	}
}
