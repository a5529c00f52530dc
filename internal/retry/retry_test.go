package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/internal/retry"
)

func TestDelayDoublesUpToMax(t *testing.T) {
	t.Parallel()
	p := retry.Policy{Initial: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := p.Delay(i + 1); got != w*time.Millisecond {
			t.Errorf("Delay(%d) = %v; want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got, want := p.Delay(0), 100*time.Millisecond; got != want {
		t.Errorf("Delay(0) = %v; want %v", got, want)
	}
	// A count far past the cap neither loops long nor overflows.
	if got, want := p.Delay(1<<30), time.Second; got != want {
		t.Errorf("Delay(1<<30) = %v; want %v", got, want)
	}
}

func TestDelayMultiplierAndFixed(t *testing.T) {
	t.Parallel()
	p := retry.Policy{Initial: time.Second, Max: time.Minute, Multiplier: 3}
	if got, want := p.Delay(3), 9*time.Second; got != want {
		t.Errorf("Delay(3) with multiplier 3 = %v; want %v", got, want)
	}
	fixed := retry.Policy{Initial: 200 * time.Millisecond}
	if got, want := fixed.Delay(5), 200*time.Millisecond; got != want {
		t.Errorf("Delay(5) without Max = %v; want %v", got, want)
	}
	huge := retry.Policy{Initial: time.Hour, Max: time.Duration(1<<63 - 1)}
	if got := huge.Delay(100); got <= 0 {
		t.Errorf("Delay(100) up to the largest duration = %v; want positive", got)
	}
}

func TestDelayJitter(t *testing.T) {
	t.Parallel()
	at := func(r float64) func() float64 { return func() float64 { return r } }
	p := retry.Policy{Initial: 10 * time.Second, Max: time.Hour, Jitter: 0.2, Random: at(0.5)}
	if got, want := p.Delay(2), 22*time.Second; got != want {
		t.Errorf("Delay(2) with a fifth of jitter at 0.5 = %v; want %v", got, want)
	}
	full := retry.Policy{Initial: time.Second, Max: 4 * time.Second, FullJitter: true, Random: at(0.5)}
	if got, want := full.Delay(3), 500*time.Millisecond+2*time.Second; got != want {
		t.Errorf("Delay(3) with full jitter at 0.5 = %v; want %v", got, want)
	}
	full.Random = at(0)
	if got, want := full.Delay(1), 500*time.Millisecond; got != want {
		t.Errorf("Delay(1) with full jitter at 0 = %v; want the floor %v", got, want)
	}
	// The default source stays within the bounds.
	p.Random, full.Random = nil, nil
	for range 100 {
		if got := p.Delay(1); got < 10*time.Second || got >= 12*time.Second {
			t.Fatalf("Delay(1) with a fifth of jitter = %v; want in [10s, 12s)", got)
		}
		if got := full.Delay(10); got < 500*time.Millisecond || got >= 4500*time.Millisecond {
			t.Fatalf("Delay(10) with full jitter = %v; want in [0.5s, 4.5s)", got)
		}
	}
}

func TestBackoffNextAndReset(t *testing.T) {
	t.Parallel()
	b := retry.Policy{Initial: time.Second, Max: 30 * time.Second}.Backoff()
	var got []time.Duration
	for range 7 {
		got = append(got, b.Next())
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("waits = %v; want %v seconds", got, want)
		}
	}
	b.Reset()
	if got, want := b.Next(), time.Second; got != want {
		t.Errorf("Next after Reset = %v; want %v", got, want)
	}
}

// doRun starts Do on a fake clock with try and reports its failures and its result.
type doRun struct {
	clock    *clockwork.FakeClock
	failures chan failure
	result   chan error
}

type failure struct {
	err  error
	n    int
	wait time.Duration
}

func startDo(ctx context.Context, p retry.Policy, try func(context.Context) error) *doRun {
	r := &doRun{clock: clockwork.NewFakeClock(), failures: make(chan failure, 100), result: make(chan error, 1)}
	go func() {
		r.result <- retry.Do(ctx, r.clock, p, try, func(err error, n int, wait time.Duration) {
			r.failures <- failure{err, n, wait}
		})
	}()
	return r
}

// next waits for the next failure Do reports and for Do to wait on the clock.
func (r *doRun) next(t *testing.T) failure {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var f failure
	select {
	case f = <-r.failures:
	case err := <-r.result:
		t.Fatalf("Do returned %v; want another failure", err)
	case <-ctx.Done():
		t.Fatal("no failure reported")
	}
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("Do does not wait on the clock: %v", err)
	}
	return f
}

func (r *doRun) done(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.result:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return")
		return nil
	}
}

func TestDoRetriesUntilSuccess(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tries := 0
	r := startDo(context.Background(), retry.Policy{Initial: time.Second, Max: 3 * time.Second},
		func(context.Context) error {
			if tries++; tries < 4 {
				return boom
			}
			return nil
		})
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		f := r.next(t)
		if f.err != boom || f.n != i+1 || f.wait != want {
			t.Fatalf("failure %d = %v, %d, %v; want boom, %d, %v", i+1, f.err, f.n, f.wait, i+1, want)
		}
		// A moment short of the wait, the next try has not been made.
		r.clock.Advance(want - time.Nanosecond)
		select {
		case <-r.failures:
			t.Fatalf("a try ran before the wait of %v had passed", want)
		case <-r.result:
			t.Fatalf("a try ran before the wait of %v had passed", want)
		default:
		}
		r.clock.Advance(time.Nanosecond)
	}
	if err := r.done(t); err != nil {
		t.Errorf("Do = %v; want nil", err)
	}
	if tries != 4 {
		t.Errorf("tries = %d; want 4", tries)
	}
}

func TestDoPermanent(t *testing.T) {
	t.Parallel()
	refused := errors.New("refused")
	tries := 0
	r := startDo(context.Background(), retry.Policy{Initial: time.Second}, func(context.Context) error {
		if tries++; tries == 1 {
			return errors.New("unavailable")
		}
		return retry.Permanent(refused)
	})
	r.next(t)
	r.clock.Advance(time.Second)
	if err := r.done(t); err != refused {
		t.Errorf("Do = %v; want the permanent error itself", err)
	}
	if retry.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
}

func TestDoStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	r := startDo(ctx, retry.Policy{Initial: time.Minute}, func(context.Context) error { return errors.New("down") })
	r.next(t)
	cancel()
	if err := r.done(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v; want context.Canceled", err)
	}

	// A failure that comes as the context ends is not reported, and not waited on.
	ctx, cancel = context.WithCancel(context.Background())
	r = startDo(ctx, retry.Policy{Initial: time.Minute}, func(context.Context) error {
		cancel()
		return errors.New("canceled mid-try")
	})
	if err := r.done(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v; want context.Canceled", err)
	}
	if len(r.failures) != 0 {
		t.Errorf("%d failures reported; want none", len(r.failures))
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	stop := make(chan struct{})
	result := make(chan error, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { result <- retry.Sleep(context.Background(), clock, time.Second, nil) }()
	go func() { result <- retry.Sleep(context.Background(), clock, time.Hour, stop) }()
	go func() { result <- retry.Sleep(ctx, clock, time.Hour, nil) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := clock.BlockUntilContext(wctx, 3); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if err := <-result; err != nil {
		t.Errorf("Sleep past its wait = %v; want nil", err)
	}
	close(stop)
	if err := <-result; err != retry.ErrStopped {
		t.Errorf("Sleep stopped = %v; want ErrStopped", err)
	}
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with its context canceled = %v; want context.Canceled", err)
	}
}
