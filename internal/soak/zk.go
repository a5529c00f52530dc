package soak

import (
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testenv"
)

// Ensemble is the ZooKeeper servers the cluster runs on, which the nemesis kills, restarts,
// freezes and thaws (testenv.ZKEnsemble). The nemesis acts on one server at a time per fault.
type Ensemble interface {
	// Servers are the servers' client addresses, in server order.
	Servers() []string
	Stop(i int)
	Start(i int) error
	Freeze(i int) error
	Thaw(i int) error
	// Leader returns the index of the server that leads, -1 if none does now.
	Leader() int
}

// NewEnsemble starts the soak's private ZooKeeper servers: servers of them, with timings
// that suit its 2 s sessions. A follower gives up on a silent leader after syncLimit ticks
// (1 s): a frozen leader is replaced within the session timeout, as issue 15 asks of a
// deployment (session timeout ≥ 2 × syncLimit × tickTime).
func NewEnsemble(t testing.TB, servers int) Ensemble {
	t.Helper()
	return testenv.NewZKEnsemble(t, servers, testenv.ZKEnsembleOptions{TickTime: 500 * time.Millisecond, SyncLimit: 2})
}
