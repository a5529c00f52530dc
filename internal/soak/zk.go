package soak

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testenv"
)

// Ensemble is the ZooKeeper servers the cluster runs on, which the nemesis stops and starts.
// Stop and Start are called from the nemesis's goroutines, one server at a time each.
type Ensemble interface {
	// Addrs are the servers' client addresses, in server order.
	Addrs() []string
	// Stop kills server i, as a crash would; Start starts it again with its data.
	Stop(i int)
	Start(i int)
}

// singleServer is a one-server "ensemble": what the soak runs on until the 3-server helper
// exists. Losing quorum is stopping it.
type singleServer struct{ z *testenv.ZKServer }

// NewSingleServer starts a private ZooKeeper server for the soak.
func NewSingleServer(t testing.TB) Ensemble {
	t.Helper()
	z := testenv.NewZKServer(t)
	z.Start("data")
	return singleServer{z}
}

func (s singleServer) Addrs() []string { return []string{s.z.Addr()} }
func (s singleServer) Stop(int)        { s.z.Stop() }
func (s singleServer) Start(int)       { s.z.Start("data") }

// zkMode asks the server at addr for its mode (leader, follower, standalone) with the srvr
// four-letter word; "" when it does not answer.
func zkMode(addr string) string {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return ""
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(mode)
		}
	}
	return ""
}

// zkLeader returns the index of the server that leads (or runs standalone), -1 if none
// answers so.
func zkLeader(e Ensemble) int {
	for i, a := range e.Addrs() {
		if m := zkMode(a); m == "leader" || m == "standalone" {
			return i
		}
	}
	return -1
}
