package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jonboulle/clockwork"
)

// Policy is how the wait between tries grows.
type Policy struct {
	// Initial is the wait after the first failure.
	Initial time.Duration
	// Max caps the wait (before jitter). A Max below Initial is taken as Initial: the wait
	// never grows.
	Max time.Duration
	// Multiplier is what each further failure multiplies the wait by. 0 means 2.
	Multiplier float64
	// Jitter adds up to this share of the wait at random: 0.2 waits between the wait and a
	// fifth more. 0 adds nothing.
	Jitter float64
	// FullJitter draws the whole wait at random instead, between Initial/2 and Initial/2
	// plus the wait, so that callers that failed together spread out over the whole
	// interval while none retries at once. Jitter is then not used.
	FullJitter bool
	// Random returns a number in [0, 1) for the jitter; nil is math/rand/v2's Float64.
	// Tests fix it.
	Random func() float64
}

// Delay is the wait after the n-th failure in a row (n ≥ 1; below 1 counts as 1): Initial
// multiplied n-1 times, at most Max, then jittered.
func (p Policy) Delay(n int) time.Duration {
	d := p.base(n)
	switch {
	case p.FullJitter:
		return p.Initial/2 + time.Duration(p.random()*float64(d))
	case p.Jitter > 0:
		return d + time.Duration(p.random()*p.Jitter*float64(d))
	}
	return d
}

// base is the wait after the n-th failure before jitter.
func (p Policy) base(n int) time.Duration {
	m := p.Multiplier
	if m <= 0 {
		m = 2
	}
	top := max(p.Max, p.Initial)
	d := p.Initial
	for i := 1; i < n && d < top; i++ {
		next := time.Duration(float64(d) * m)
		if next <= d { // a multiplier of 1 or less, or an overflow
			break
		}
		d = next
	}
	return min(d, top)
}

func (p Policy) random() float64 {
	if p.Random != nil {
		return p.Random()
	}
	return rand.Float64()
}

// Backoff returns a new Backoff of p, before any failure.
func (p Policy) Backoff() *Backoff { return &Backoff{p: p} }

// Backoff hands out the waits of one run of failures: Next after each failure, Reset once a
// try gets through. It is not safe for concurrent use.
type Backoff struct {
	p        Policy
	failures int
}

// Next counts one more failure and returns the wait before the next try.
func (b *Backoff) Next() time.Duration {
	b.failures++
	return b.p.Delay(b.failures)
}

// Reset starts a new run of failures: the next wait is the policy's initial one again.
func (b *Backoff) Reset() { b.failures = 0 }

// ErrStopped is what Sleep returns when its stop channel closed first.
var ErrStopped = errors.New("retry: stopped")

// Sleep waits d on clock. It returns nil once d has passed, ctx's error if ctx ends first,
// and ErrStopped if stop (nil never) is closed first.
func Sleep(ctx context.Context, clock clockwork.Clock, d time.Duration, stop <-chan struct{}) error {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return ErrStopped
	}
}

// permanent marks an error Do does not retry.
type permanent struct{ err error }

func (e *permanent) Error() string { return e.err.Error() }
func (e *permanent) Unwrap() error { return e.err }

// Permanent wraps err so that Do returns it (err itself, unwrapped) without trying again.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// Do calls try until it returns nil, returns a Permanent error, or ctx ends, waiting on clock
// between tries as p says. After each failure that is to be retried, failed (unless nil) is
// told the error, the number of failures so far and the wait before the next try: where the
// caller logs it. Do returns nil on success, the error inside a Permanent one, and ctx's
// error once ctx ends (without telling failed of a failure that came as ctx ended: it is
// most likely ctx's own doing). try is given ctx.
func Do(ctx context.Context, clock clockwork.Clock, p Policy, try func(ctx context.Context) error,
	failed func(err error, failures int, wait time.Duration)) error {
	b := p.Backoff()
	for {
		err := try(ctx)
		if err == nil {
			return nil
		}
		if perm := (*permanent)(nil); errors.As(err, &perm) {
			return perm.err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := b.Next()
		if failed != nil {
			failed(err, b.failures, wait)
		}
		if err := Sleep(ctx, clock, wait, nil); err != nil {
			return err
		}
	}
}
