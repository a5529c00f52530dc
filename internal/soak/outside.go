package soak

import (
	"context"
	"math/rand"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
)

// Nemesis harms a cluster the soak did not start (RunOn), such as the three simulated hosts
// of bin/cluster.sh, with faults of its own kinds.
type Nemesis interface {
	// Run injects faults drawn from r until ctx ends, then heals everything (every process
	// running again, every link up) before it returns.
	Run(ctx context.Context, r *rand.Rand)
	// Faults counts the faults injected, by kind.
	Faults() map[string]int
	// Lost are the workers killed with kill -9 and when: the report gives the time their
	// tasks took to run elsewhere.
	Lost() []Lost
	// Failures are the faults it could not inject or heal: each is an anomaly.
	Failures() []string
	// Log lists the faults in order, their times relative to origin, for a failed verdict.
	Log(origin time.Time) string
}

// Lost is a worker killed with kill -9 at At.
type Lost struct {
	Worker string
	At     time.Time
}

// Outside is a cluster the soak did not start. Its nodes run with NodeEnv in their
// environment and the run log's (Rec.Env), its database migrated.
type Outside struct {
	// Masters are the masters' API base URLs (http://host:port); Token is the API's token.
	Masters []string
	Token   string
	// DB is the cluster's database, reached by the soak as a client would.
	DB *dao.DB
	// Rec is the run log the workers' tasks write.
	Rec *history.Recorder
	// Nemesis harms the cluster while the workload runs.
	Nemesis Nemesis
}

// RunOn runs the soak's workload on a cluster of someone else's under its nemesis, and judges
// the history as Run does: no task lost, one committed result, no two runs of a task
// overlapping, the pools, signals and flows kept. Of cfg it reads Seed, Duration,
// SubmitEvery, Drain, KillGrace (the wake grace of the history), Servers (for the report),
// Detail and Logf. The nodes' exits and fence markers are not judged: the nemesis restarts
// the nodes as a host's supervisor would.
func RunOn(t testing.TB, cfg Config, on Outside) *Result {
	t.Helper()
	cfg.defaults()
	began := time.Now()
	logf := cfg.Logf
	logf("soak: seed %d, %v of faults on a cluster of %d masters", cfg.Seed, cfg.Duration, len(on.Masters))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ledger := filepath.Join(t.TempDir(), "tool-ledger")
	ks := kinds(on.Rec.Command, ledger, nil)
	if err := define(ctx, on.DB, ks); err != nil {
		t.Fatalf("soak: %v", err)
	}
	w := &workload{db: on.DB, kinds: ks, every: cfg.SubmitEvery,
		api:       &apiClient{masters: on.Masters, token: on.Token, client: &http.Client{Timeout: 10 * time.Second}},
		submitted: map[string]int{}, actions: map[string]int{}}
	setup := time.Since(began)

	chaosAt, healedAt := runChaos(cfg, on.Nemesis.Run, w, on.DB, func() int {
		n := 0
		for _, c := range on.Nemesis.Faults() {
			n += c
		}
		return n
	})

	v := &verdict{cfg: cfg, db: on.DB, rec: on.Rec, w: w, outside: on.Nemesis, chaosAt: chaosAt, ledger: ledger}
	res := v.judge(healedAt)
	res.Setup = setup
	res.Wall = time.Since(began)
	return res
}
