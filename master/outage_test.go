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
	"github.com/zksched/zksched/internal/signal"
	"github.com/zksched/zksched/internal/testenv"
)

// countWarnings counts the log lines at warn level or above, and signals warned at each.
type countWarnings struct {
	n      atomic.Int64
	warned signal.Test[struct{}]
}

func (c *countWarnings) Write(p []byte) (int, error) {
	if strings.Contains(string(p), `"level":"warn"`) || strings.Contains(string(p), `"level":"error"`) {
		c.n.Add(1)
		c.warned.Signal(struct{}{})
	}
	return len(p), nil
}

// TestDatabaseGoneDoesNotSpin checks that a master whose database refuses connections retries
// at its poll interval, not in a loop: each failed claim (and step of the sweep, and look of
// its other parts) waits for the next wake-up or poll.
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
	warns := &countWarnings{}
	warns.warned.Init()
	const poll = 200 * time.Millisecond
	m := startMaster(t, New(Config{ID: "m1", PollInterval: poll, Log: zerolog.New(warns)}, db, newGate(true)))
	// Settled: the listener listens, and the master has looked at everything it then asked for.
	m.rescanned.Wait(t, "rescan once the master's listener listens")
	m.waiting.Clear()
	m.waiting.Wait(t, "wait of the master after its first rounds")

	proxy.Close() // connection refused from now on
	// The next poll's round fails; the window starts once the master waits after it.
	warns.warned.Wait(t, "warning with the database gone")
	m.waiting.Clear()
	m.waiting.Wait(t, "wait of the master after a failed round")
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
