package llm

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// window lets at most n requests start in any period (a minute for requests-per-minute).
// It remembers when the last n started: a sliding window, so a burst after a quiet spell is
// still capped, unlike a token bucket's refill.
type window struct {
	n      int
	period time.Duration
	clock  clockwork.Clock
	epoch  time.Time

	mu sync.Mutex
	// starts is a ring of the last n start times, as offsets from epoch: plain integers
	// rather than time.Time values, which hold a pointer the garbage collector would scan
	// across a ring of a million.
	starts []time.Duration
	next   int
}

func newWindow(n int, period time.Duration, clock clockwork.Clock) *window {
	return &window{n: n, period: period, clock: clock, epoch: clock.Now(), starts: make([]time.Duration, 0, min(n, 1024))}
}

// wait blocks until a request may start, and counts it as started; it returns ctx's error
// if ctx ends first.
func (w *window) wait(ctx context.Context) error {
	for {
		d := w.reserve()
		if d <= 0 {
			return nil
		}
		t := w.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.Chan():
		}
	}
}

// reserve counts a start now and returns 0, or returns how long until one is allowed.
func (w *window) reserve() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Since(w.epoch)
	if len(w.starts) < w.n {
		w.starts = append(w.starts, now)
		return 0
	}
	if d := w.starts[w.next] + w.period - now; d > 0 {
		return d
	}
	w.starts[w.next] = now
	w.next = (w.next + 1) % w.n
	return 0
}
