package connpool

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/lib/pq"
)

// replyDialer dials PostgreSQL connections that give up on a reply that takes longer than
// limit. A context's end does not end a statement in lib/pq: it sends a cancel request on a
// new connection and goes on reading, so a connection whose server has gone silent (a link
// cut behind a proxy that stays up, a black-holed route) blocks its statement for ever, and
// whatever waits on it: a worker's log flush, its claims, a master's failover. With a reply
// limit such a statement fails (i/o timeout), its connection is dropped from the pool, and
// the caller's retry goes on a new one.
type replyDialer struct {
	limit time.Duration
	d     net.Dialer
}

var _ pq.DialerContext = replyDialer{}

func (r replyDialer) Dial(network, address string) (net.Conn, error) {
	return r.DialContext(context.Background(), network, address)
}

func (r replyDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return r.DialContext(ctx, network, address)
}

func (r replyDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := r.d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &replyConn{Conn: c, limit: r.limit}, nil
}

// replyConn is a connection each of whose writes (a statement sent) gives the reads that
// follow limit to answer. Until the connection is set up it leaves the deadlines to lib/pq,
// which bounds the set-up by connect_timeout and then clears them.
type replyConn struct {
	net.Conn
	limit time.Duration
	ready atomic.Bool
}

func (c *replyConn) SetDeadline(t time.Time) error {
	if t.IsZero() {
		c.ready.Store(true) // lib/pq clears the set-up's deadline: the connection is up
	}
	return c.Conn.SetDeadline(t)
}

func (c *replyConn) Write(p []byte) (int, error) {
	if c.ready.Load() {
		if err := c.Conn.SetReadDeadline(time.Now().Add(c.limit)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}
