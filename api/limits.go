package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Two limits keep any one reader from taking a master's memory and time, each answered with
// a Retry-After:
//
//   - Heavy reads (an instance's detail and its page, a task's detail and page, a log) hold a
//     place among Config.HeavyReads while they run. A request that finds none free waits up
//     to Config.HeavyReadWait for one, then gets 503: what many clients ask at once waits in
//     a short, bounded queue instead of piling up in memory, and the rest is refused.
//   - Every principal (a user, or an address where no user is known) has a token bucket of
//     Config.RateLimit requests a second, Config.RateBurst at once; past it, 429.

// errBusy is the answer to a heavy read that found no place in time.
var errBusy = errors.New("the master is busy with other reads")

// heavyReads is the semaphore of heavy reads.
type heavyReads struct {
	places chan struct{}
	wait   time.Duration
	// refused counts the reads answered 503.
	refused atomic.Int64
}

func newHeavyReads(n int, wait time.Duration) *heavyReads {
	return &heavyReads{places: make(chan struct{}, n), wait: wait}
}

// acquire takes a place, waiting at most h.wait; the returned function gives it back. It
// fails with errBusy when none came free in time, or with ctx's error.
func (h *heavyReads) acquire(ctx context.Context) (func(), error) {
	release := func() { <-h.places }
	select {
	case h.places <- struct{}{}:
		return release, nil
	default:
	}
	t := time.NewTimer(h.wait)
	defer t.Stop()
	select {
	case h.places <- struct{}{}:
		return release, nil
	case <-t.C:
		h.refused.Add(1)
		return nil, errBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// heavy runs h holding a place among the heavy reads; without one in time it answers 503
// with a Retry-After of a second, by when a place has usually come free.
func (s *Server) heavy(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		release, err := s.heavyReads.acquire(r.Context())
		if errors.Is(err, errBusy) {
			if info := infoOf(r); info != nil {
				info.busy = true
			}
			w.Header().Set("Retry-After", "1")
			return errorf(http.StatusServiceUnavailable, "%v: %d heavy reads (an instance, a task, a log, the overview) at once; retry in a second",
				err, cap(s.heavyReads.places))
		}
		if err != nil {
			return err
		}
		defer release()
		return h(w, r)
	}
}

// rateLimiter is the token bucket of each principal's requests.
type rateLimiter struct {
	rate  float64 // tokens a second
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	// limited counts the requests answered 429.
	limited atomic.Int64
}

// rateMaxKeys bounds the table of principals: beyond it, those whose bucket is full again
// are forgotten first, then any one.
const rateMaxKeys = 10000

func newRateLimiter(rate float64, burst int, now func() time.Time) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(max(burst, 1)), now: now, buckets: map[string]*bucket{}}
}

// take spends one token of key's bucket; when there is none, it returns how long until
// there is one and spends nothing.
func (l *rateLimiter) take(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= rateMaxKeys {
			l.evict(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	lv := l.level(b, now)
	if lv < 1 {
		l.limited.Add(1)
		return time.Duration((1 - lv) / l.rate * float64(time.Second))
	}
	b.tokens, b.at = lv-1, now
	return 0
}

func (l *rateLimiter) level(b *bucket, now time.Time) float64 {
	return math.Min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
}

func (l *rateLimiter) evict(now time.Time) {
	for k, b := range l.buckets {
		if l.level(b, now) >= l.burst {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < rateMaxKeys {
			return
		}
		delete(l.buckets, k)
	}
}

// rateKey is whom a request counts against: its user, or its client's address when no user
// is known (before a login, or on a master without authentication).
func rateKey(r *http.Request) string {
	if p, ok := r.Context().Value(principalKey{}).(Principal); ok && p.Name != "anonymous" {
		return "user:" + p.Name
	}
	return "addr:" + clientKey(r)
}

// limitRate answers 429 with a Retry-After to a principal over its rate; nil lets the
// request through. Without a limiter (Config.RateLimit 0) every request goes through.
func (s *Server) limitRate(w http.ResponseWriter, r *http.Request) error {
	if s.rate == nil {
		return nil
	}
	wait := s.rate.take(rateKey(r))
	if wait == 0 {
		return nil
	}
	w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(wait)))
	return errorf(http.StatusTooManyRequests, "too many requests from %s: the limit is %g a second (api.rate-limit); retry in %s",
		principalOf(r).Name, s.rate.rate, wait.Round(time.Millisecond))
}

// Busy is how many heavy reads the server refused with 503, no place among
// Config.HeavyReads having come free in time.
func (s *Server) Busy() int64 { return s.heavyReads.refused.Load() }

// RateLimited is how many requests the server refused with 429, their principal being over
// Config.RateLimit.
func (s *Server) RateLimited() int64 {
	if s.rate == nil {
		return 0
	}
	return s.rate.limited.Load()
}
