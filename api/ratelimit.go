package api

import (
	"math"
	"net"
	"net/http"
	"sync"
	"time"
)

// Failed logins and wrong bearer tokens are limited per client address by a token bucket:
// each failure takes a token, one comes back every failRefill, and an address with no token
// left has every wrong credential it sends refused with 429 (and not counted again), while a
// right one is still served, so a guesser cannot lock out the users behind its NAT. A user
// who mistypes a few times is not slowed down; a guesser gets 429 for its misses and sees its
// hit, which the tokens' randomness, not this limit, makes hopeless (see checkToken).
const (
	failBurst  = 10
	failRefill = 6 * time.Second
	// failMaxAddrs bounds the table of addresses: beyond it, addresses whose bucket is full
	// again are forgotten first, then any one.
	failMaxAddrs = 10000
)

// failLimiter is the per-address token bucket of failed authentications.
type failLimiter struct {
	burst  float64
	refill time.Duration
	max    int
	now    func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newFailLimiter(now func() time.Time) *failLimiter {
	return &failLimiter{burst: failBurst, refill: failRefill, max: failMaxAddrs, now: now, buckets: map[string]*bucket{}}
}

// level returns the tokens of addr's bucket now.
func (l *failLimiter) level(b *bucket, now time.Time) float64 {
	return math.Min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.refill))
}

// retryAfter returns how long addr must wait before its next credential is checked; 0 when
// it may try now.
func (l *failLimiter) retryAfter(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[addr]
	if !ok {
		return 0
	}
	lv := l.level(b, l.now())
	if lv >= 1 {
		return 0
	}
	return time.Duration((1 - lv) * float64(l.refill))
}

// fail records a failed authentication from addr.
func (l *failLimiter) fail(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.buckets[addr]
	if !ok {
		if len(l.buckets) >= l.max {
			l.evict(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[addr] = b
	}
	b.tokens, b.at = math.Max(l.level(b, now)-1, 0), now
}

// evict makes room for one more address: it forgets those whose bucket is full again and, if
// there is none, one chosen by the map's order.
func (l *failLimiter) evict(now time.Time) {
	for k, b := range l.buckets {
		if l.level(b, now) >= l.burst {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < l.max {
			return
		}
		delete(l.buckets, k)
	}
}

// size is how many addresses the limiter holds.
func (l *failLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// clientKey is the address a request's failures count against: the peer's IP (not a header
// a client may set), or for IPv6 its /64, which one host usually holds whole.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}
