package registry

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zksched/zksched/internal/testenv"
)

// dials records when a zk.Conn dials, through a Dialer that dials for real.
type dials struct {
	mu sync.Mutex
	at []time.Time
}

func (d *dials) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	d.at = append(d.at, time.Now())
	d.mu.Unlock()
	return net.DialTimeout(network, address, timeout)
}

func (d *dials) times() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.at...)
}

// TestReconnectAfterAResetIsImmediate: with a single server, the patched go-zookeeper
// (internal/third_party/zk/PATCHES.md) redials a connection whose session was up at once
// after a reset, instead of pausing the second it pauses between rounds over the servers —
// which outlived a 1 s session. A server that drops every connection before its session is
// up is still dialled no more than about once a second.
func TestReconnectAfterAResetIsImmediate(t *testing.T) {
	t.Parallel()
	p := testenv.NewProxy(t, testenv.ZKServers()[0])
	d := &dials{}
	conn, events, err := zk.Connect([]string{p.Addr()}, time.Second, zk.WithDialer(d.dial), zk.WithLogger(nopZKLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hasSession := func(what string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev := <-events:
				if ev.State == zk.StateHasSession {
					return
				}
			case <-deadline:
				t.Fatalf("no session %s", what)
			}
		}
	}
	hasSession("at first")
	first := conn.SessionID()
	for i := range 3 {
		before := len(d.times())
		reset := time.Now()
		p.Reset()
		hasSession("after a reset")
		at := d.times()
		if len(at) <= before {
			t.Fatalf("reset %d: no new dial", i)
		}
		// The pause between rounds is a whole second: a redial sooner did not take it.
		if gap := at[before].Sub(reset); gap >= time.Second {
			t.Errorf("reset %d: redialled %v after the reset; want at once, not after the pause between rounds", i, gap)
		}
		if conn.SessionID() != first {
			t.Fatalf("reset %d: session %#x replaced %#x; a reset must keep a 1 s session", i, conn.SessionID(), first)
		}
		// The next reset comes after the quick retry's once-a-second allowance.
		time.Sleep(1100 * time.Millisecond)
	}

	// A server that closes every connection at once: the client keeps trying, a second apart.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	r := &dials{}
	refused, _, err := zk.Connect([]string{ln.Addr().String()}, time.Second, zk.WithDialer(r.dial), zk.WithLogger(nopZKLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	refused.Close()
	if n := len(r.times()); n < 2 || n > 5 {
		t.Errorf("%d dials in 3 s to a server that refuses every session; want one about every second", n)
	}
}
