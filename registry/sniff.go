package registry

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// connInfo is the bookkeeping of one go-zookeeper connection (which makes many TCP connections
// over its life, one per reconnect).
type connInfo struct {
	events  chan struct{} // a session event happened; buffered 1
	servers int           // how many servers the connection goes round
	tls     *tls.Config   // nil: plain TCP
	// handshakeLimit bounds a handshake (see sniffConn.SetReadDeadline), in nanoseconds.
	handshakeLimit atomic.Int64

	mu        sync.Mutex
	handshake handshake
}

// handshake is what the last successful connect exchange of a connection told.
type handshake struct {
	timeout   time.Duration // negotiated session timeout
	sessionID int64
	sentAt    time.Time // when the connect request was sent, by Now
}

func newConnInfo(sessionTimeout time.Duration, servers int, tlsConfig *tls.Config) *connInfo {
	i := &connInfo{events: make(chan struct{}, 1), servers: max(servers, 1), tls: tlsConfig}
	i.setSessionTimeout(sessionTimeout)
	return i
}

// setSessionTimeout bounds the next handshakes by the session timeout divided by the number of
// servers, as the Java client does (its connect timeout), and never more than 2/3 of it, the
// read timeout of an established connection. A server that takes the connection and answers
// nothing (frozen, or hung) costs that much before the client tries the next: with one share
// of the timeout per server, a client can try every server in turn before its session
// expires, even when the frozen one comes next. The floor keeps a slow but healthy server
// reachable when the timeout is very short.
func (i *connInfo) setSessionTimeout(d time.Duration) {
	i.handshakeLimit.Store(int64(handshakeLimit(d, i.servers)))
}

func handshakeLimit(timeout time.Duration, servers int) time.Duration {
	return max(min(timeout*2/3, timeout/time.Duration(servers)), 100*time.Millisecond)
}

func (i *connInfo) lastHandshake() handshake {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.handshake
}

// dial is go-zookeeper's Dialer. It wraps the connection (TCP, or TLS over it) to read the
// connect response.
func (i *connInfo) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	nc, err := dialServer(i.tls, network, address, timeout, time.Duration(i.handshakeLimit.Load()))
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: nc, info: i}, nil
}

// dialServer connects to a ZooKeeper server: TCP within timeout, then, with a TLS config, a TLS
// handshake within handshake (a server's secureClientPort). The server name checked against the
// certificate is the config's ServerName, or else the host of address (an IP address is checked
// against the certificate's IP SANs).
func dialServer(cfg *tls.Config, network, address string, timeout, handshake time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, address, timeout)
	if err != nil || cfg == nil {
		return nc, err
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(address); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(nc, cfg)
	_ = tc.SetDeadline(time.Now().Add(handshake))
	if err := tc.Handshake(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("tls handshake with zookeeper %s: %w", address, err)
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

// connectResponseHead is how much of a connect response the client reads: a 4-byte frame length,
// then protocolVersion int32, timeOut int32 (ms), sessionId int64, all big-endian. This is the
// ZooKeeper wire protocol, not a go-zookeeper detail, and it is the first thing a server sends on
// a connection. go-zookeeper reads it, then reports StateHasSession on the same goroutine, so
// the values are in place before the event callback runs.
const connectResponseHead = 4 + 4 + 4 + 8

// sniffConn watches the first exchange of a TCP connection: the connect request the client
// writes and the connect response it reads.
type sniffConn struct {
	net.Conn
	info *connInfo

	wrote atomic.Bool
	read  atomic.Bool
	// sentAt, deadline and head belong to the goroutine in the handshake (go-zookeeper does it
	// on one).
	sentAt   time.Time
	deadline time.Time
	head     []byte
}

func (s *sniffConn) Write(b []byte) (int, error) {
	if !s.wrote.Load() {
		s.sentAt = Now()
		s.deadline = time.Now().Add(time.Duration(s.info.handshakeLimit.Load()))
		s.Conn.SetReadDeadline(s.deadline)
		s.wrote.Store(true)
	}
	return s.Conn.Write(b)
}

// SetReadDeadline bounds the reads of the handshake. go-zookeeper waits 10 × its read timeout for
// a connect response (67 s with a 10 s session), and not at all for the body after the length: a
// server that takes the connection and never answers (seen: ZooKeeper 3.8.0 hitting an exception
// while it starts) would hold the client that long, or forever.
func (s *sniffConn) SetReadDeadline(t time.Time) error {
	if s.wrote.Load() && !s.read.Load() && (t.IsZero() || t.After(s.deadline)) {
		t = s.deadline
	}
	return s.Conn.SetReadDeadline(t)
}

func (s *sniffConn) Read(b []byte) (int, error) {
	n, err := s.Conn.Read(b)
	if !s.read.Load() && n > 0 {
		need := connectResponseHead - len(s.head)
		s.head = append(s.head, b[:min(n, need)]...)
		if len(s.head) == connectResponseHead {
			s.read.Store(true)
			s.Conn.SetReadDeadline(time.Time{}) // go-zookeeper sets its own from here on
			h := handshake{
				timeout:   time.Duration(int32(binary.BigEndian.Uint32(s.head[8:12]))) * time.Millisecond,
				sessionID: int64(binary.BigEndian.Uint64(s.head[12:20])),
				sentAt:    s.sentAt,
			}
			if h.sessionID != 0 { // 0: the server refused the session as expired
				s.info.mu.Lock()
				s.info.handshake = h
				s.info.mu.Unlock()
			}
		}
	}
	return n, err
}
