package testenv

import (
	"errors"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy for fault tests: a test points a client at Addr and cuts, resets or heals
// the link to the upstream server while the client runs. It also serves node processes that the
// test starts: they dial Addr like any server.
type Proxy struct {
	t        testing.TB
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	gate   chan struct{} // closed while traffic flows; open (blocking) while cut
	links  map[*link]struct{}
	closed bool
	wg     sync.WaitGroup
}

// link is one client connection and, once dialed, its upstream connection.
type link struct {
	client net.Conn
	mu     sync.Mutex
	server net.Conn
	done   chan struct{}
	once   sync.Once
}

// NewProxy starts a proxy to upstream on 127.0.0.1:0. It is closed when the test ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	return NewProxyOn(t, "127.0.0.1:0", upstream)
}

// NewProxyOn starts a proxy to upstream listening on addr: for instance on the bridge of
// simulated hosts (network namespaces), which reach the root namespace's loopback only so.
func NewProxyOn(t testing.TB, addr, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("testenv: proxy listen: %v", err)
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{t: t, ln: ln, upstream: upstream, gate: gate, links: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut drops the link silently, like a pulled cable: nothing is forwarded in either direction on
// existing connections, and new connections are accepted but held without being connected
// upstream. No one sees a reset; peers only see silence. Data already read is held, not lost,
// and flows on Heal, as TCP would retransmit it.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // already cut
	}
}

// Heal restores the link: held data and held connections go through.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Reset closes every connection now, with a TCP reset towards the client. New connections are
// accepted as before (unless the proxy is cut).
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		if tc, ok := l.client.(*net.TCPConn); ok {
			tc.SetLinger(0) // RST instead of FIN
		}
		l.close()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
}

// waitOpen waits until traffic flows, or the link is closed (false).
func (p *Proxy) waitOpen(l *link) bool {
	for {
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		select {
		case <-gate:
			p.mu.Lock()
			open := p.gate == gate // not cut again meanwhile
			p.mu.Unlock()
			if open {
				return true
			}
		case <-l.done:
			return false
		}
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.t.Logf("testenv: proxy accept: %v", err)
			}
			return
		}
		l := &link{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(l)
	}
}

// serve connects a link upstream once the gate is open and pumps both ways.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	if !p.waitOpen(l) {
		return
	}
	s, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return // the client sees the connection close, as if the server refused it
	}
	l.mu.Lock()
	l.server = s
	l.mu.Unlock()
	select {
	case <-l.done: // closed while dialing
		s.Close()
		return
	default:
	}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); p.pump(l, l.client, s) }()
	go func() { defer pumps.Done(); p.pump(l, s, l.client) }()
	pumps.Wait()
}

// pump copies src to dst, holding each chunk while the proxy is cut. An end of src is passed on
// (as a close of the whole link) only once the link flows again: a pulled cable carries no FIN.
func (p *Proxy) pump(l *link, src, dst net.Conn) {
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !p.waitOpen(l) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.mu.Lock()
		if l.server != nil {
			l.server.Close()
		}
		l.mu.Unlock()
	})
}
