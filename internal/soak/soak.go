package soak

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/registry"
)

// Config is one soak run.
type Config struct {
	// Seed drives the nemesis's and the workload's generators: the same seed replays the same
	// schedule.
	Seed int64
	// Duration is how long the nemesis and the workload run; the drain comes after it.
	Duration time.Duration
	// Masters and Workers are the nodes. Default 2 and 3. Slots is the workers' mean slot
	// count: they get Slots-1, Slots and Slots+1 in turn (at least 1). Default 2.
	Masters, Workers, Slots int
	// SessionTimeout and FailoverDelay are the nodes' registry.session-timeout and
	// failover.delay; KillGrace the workers' worker.kill-grace. Default 2 s, 2 s, 500 ms, the
	// fault tests' timing.
	SessionTimeout, FailoverDelay, KillGrace time.Duration
	// FaultEvery is the mean time between two faults (default 2.5 s), SubmitEvery between two
	// submissions (default 1 s).
	FaultEvery, SubmitEvery time.Duration
	// Drain bounds the wait, once the nemesis has stopped and everything has healed, for every
	// workflow to end. Default 90 s.
	Drain time.Duration
	// Kinds are the fault kinds the nemesis picks from; all of them (FaultKinds) if empty.
	Kinds []string
	// Servers is the number of ZooKeeper servers. Default 3.
	Servers int
	// Detail fills Result.Detail even when there is no anomaly: the fault log and the node
	// exits, to read what caused a figure.
	Detail bool
	// Logf reports progress; nothing if nil.
	Logf func(format string, args ...any)
}

func (c *Config) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.Duration, 60*time.Second)
	set(&c.SessionTimeout, 2*time.Second)
	set(&c.FailoverDelay, 2*time.Second)
	set(&c.KillGrace, 500*time.Millisecond)
	set(&c.FaultEvery, 2500*time.Millisecond)
	set(&c.SubmitEvery, time.Second)
	set(&c.Drain, 90*time.Second)
	if c.Masters <= 0 {
		c.Masters = 2
	}
	if c.Workers <= 0 {
		c.Workers = 3
	}
	if c.Slots <= 0 {
		c.Slots = 2
	}
	if len(c.Kinds) == 0 {
		c.Kinds = FaultKinds()
	}
	if c.Servers <= 0 {
		c.Servers = 3
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// poolLimits are the masters' pool limits, which the verdict checks against the runs.
var poolLimits = map[string]int{"soak": 2, "model": 2}

// root is the registry root of the soak's own ZooKeeper servers.
const root = "/zksched"

// Run runs a soak and returns its verdict and figures; the caller fails on Result.Anomalies.
// Setup failures (a server that does not start) fail t.
func Run(t testing.TB, cfg Config) *Result {
	t.Helper()
	for _, k := range cfg.Kinds {
		if _, ok := faultWeights[k]; !ok {
			t.Fatalf("soak: unknown fault kind %q (known: %s)", k, strings.Join(FaultKinds(), ", "))
		}
	}
	cfg.defaults()
	began := time.Now()
	logf := cfg.Logf
	logf("soak: seed %d, %v of faults every ~%v (%s), %d ZooKeeper servers, %d masters, %d workers × ~%d slots, session timeout %v, failover delay %v",
		cfg.Seed, cfg.Duration, cfg.FaultEvery, strings.Join(cfg.Kinds, " "), cfg.Servers, cfg.Masters, cfg.Workers, cfg.Slots,
		cfg.SessionTimeout, cfg.FailoverDelay)

	ens := NewEnsemble(t, cfg.Servers)
	pg := testenv.NewPGServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := dao.Open(ctx, pg.DSN, 4, zerolog.Nop())
	if err != nil {
		t.Fatalf("soak: open the private postgresql: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("soak: migrate: %v", err)
	}
	rec := history.New(t)
	ledger := filepath.Join(t.TempDir(), "tool-ledger")
	sense := newSensorTargets(t)
	ks := kinds(rec.Command, ledger, sense)
	if err := define(ctx, db, ks); err != nil {
		t.Fatalf("soak: %v", err)
	}
	model := NewModel(t)
	token := randomHex(16)

	common := append([]string{
		"ZKSCHED_REGISTRY_SESSION_TIMEOUT=" + cfg.SessionTimeout.String(),
		"ZKSCHED_FAILOVER_DELAY=" + cfg.FailoverDelay.String(),
		"ZKSCHED_WORKER_KILL_GRACE=" + cfg.KillGrace.String(),
		"ZKSCHED_WORKER_POLL_INTERVAL=200ms", "ZKSCHED_MASTER_POLL_INTERVAL=200ms",
		"ZKSCHED_WORKER_SHUTDOWN_TIMEOUT=5s",
		"ZKSCHED_API_TOKEN=" + token,
		// soak-sense's http sensors ask a server of the soak's on loopback, which the
		// workers refuse by default.
		"ZKSCHED_WORKER_HTTP_TOOLS_ALLOW_PRIVATE_TARGETS=true",
	}, append(NodeEnv(model, model.BaseURL()), rec.Env()...)...)
	tc := testcluster.New(t, ens.Servers(), root, pg.DSN, common...)
	tc.PipeOutput = true
	cl := &cluster{c: tc, ids: map[string]*node{}}
	pgURL, err := url.Parse(pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Masters + cfg.Workers {
		n := &node{role: registry.RoleMaster, name: fmt.Sprintf("master-%d", i+1), port: testcluster.FreePort(t)}
		if i >= cfg.Masters {
			// Slots around cfg.Slots (1, 2 and 3 by default): a worker with one slot re-claims
			// its own retries, one with more runs them beside others.
			w := i - cfg.Masters
			n.role, n.name = registry.RoleWorker, fmt.Sprintf("worker-%d", w+1)
			n.env = []string{fmt.Sprintf("ZKSCHED_WORKER_SLOTS=%d", max(1, cfg.Slots-1+w%3))}
		}
		for _, a := range ens.Servers() {
			n.zkLinks = append(n.zkLinks, testenv.NewProxy(t, a))
		}
		n.pgLink = testenv.NewProxy(t, pgURL.Host)
		u := *pgURL
		u.Host = n.pgLink.Addr()
		n.dsn = u.String()
		cl.nodes = append(cl.nodes, n)
	}
	for _, n := range cl.nodes {
		cl.start(n)
	}
	for _, n := range cl.nodes {
		p, _ := n.current()
		p.WaitLog(t, 60*time.Second, `"message":"registered"`)
	}
	for _, n := range cl.nodes {
		go cl.supervise(n, 300*time.Millisecond)
	}
	defer cl.stop()

	zkc, events, err := zk.Connect(ens.Servers(), 10*time.Second, zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatalf("soak: zookeeper %v: %v", ens.Servers(), err)
	}
	go func() {
		for range events { // drained, so the library never blocks on a full channel
		}
	}()
	t.Cleanup(zkc.Close)
	var masters []string
	for _, n := range cl.nodes {
		if n.role == registry.RoleMaster {
			masters = append(masters, fmt.Sprintf("http://127.0.0.1:%d", n.port))
		}
	}
	w := &workload{db: db, kinds: ks, every: cfg.SubmitEvery,
		api:       &apiClient{masters: masters, token: token, client: &http.Client{Timeout: 10 * time.Second}},
		submitted: map[string]int{}, actions: map[string]int{}, sense: sense}
	nm := &nemesis{cl: cl, ens: ens, pg: pg, zkc: zkc, root: root, kinds: cfg.Kinds, every: cfg.FaultEvery,
		session: cfg.SessionTimeout, delay: cfg.FailoverDelay, logf: logf, counts: map[string]int{}}
	setup := time.Since(began)
	logf("soak: cluster up in %v; chaos for %v", setup.Round(time.Millisecond), cfg.Duration)

	chaosAt, healedAt := runChaos(cfg, nm.run, w, db, func() int {
		nm.mu.Lock()
		defer nm.mu.Unlock()
		return len(nm.events)
	})

	v := &verdict{cfg: cfg, cl: cl, db: db, rec: rec, w: w, nm: nm, zkc: zkc, chaosAt: chaosAt, ledger: ledger}
	res := v.judge(healedAt)
	cl.stop()
	res.Setup = setup
	res.Wall = time.Since(began)
	return res
}

// runChaos runs the nemesis and the workload for cfg.Duration, each with a generator of its
// own from the seed, logging progress (faults counts the faults so far); it returns when the
// chaos began and when the nemesis had healed everything after it.
func runChaos(cfg Config, nemesis func(context.Context, *mrand.Rand), w *workload, db *dao.DB, faults func() int) (began, healed time.Time) {
	chaos, stop := context.WithTimeout(context.Background(), cfg.Duration)
	defer stop()
	began = time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		nemesis(chaos, mrand.New(mrand.NewSource(cfg.Seed)))
	}()
	w.start(chaos, mrand.New(mrand.NewSource(cfg.Seed+1)))
	go progress(chaos, db, faults, cfg.Logf)
	<-chaos.Done()
	<-done
	healed = time.Now()
	cfg.Logf("soak: chaos over after %v, everything healed after %v; draining", cfg.Duration, healed.Sub(began).Round(time.Millisecond))
	return began, healed
}

// NewModel is the test model server the workload's agent tasks call: its answers to the
// prompts that start with S take 150 ms.
func NewModel(t testing.TB) *llmtest.Server {
	model := llmtest.New(t)
	model.Key = "sk-soak"
	model.Delay("S", 150*time.Millisecond)
	return model
}

// NodeEnv is what the nodes of a soak's cluster need in their environment for the workload:
// the limits of its pools, the provider "test", the model at modelURL (its base URL as the
// nodes reach it), and soak-hook's secret.
func NodeEnv(model *llmtest.Server, modelURL string) []string {
	return []string{
		fmt.Sprintf("ZKSCHED_POOLS_SOAK=%d", poolLimits["soak"]), fmt.Sprintf("ZKSCHED_POOLS_MODEL=%d", poolLimits["model"]),
		"ZKSCHED_LLM_PROVIDERS_TEST_TYPE=openai",
		"ZKSCHED_LLM_PROVIDERS_TEST_BASE_URL=" + modelURL,
		"ZKSCHED_LLM_PROVIDERS_TEST_MODEL=test-model",
		"ZKSCHED_LLM_PROVIDERS_TEST_API_KEY_ENV=LLMTEST_API_KEY",
		"LLMTEST_API_KEY=" + model.Key,
		"ZKSCHED_HOOK_SECRET_SOAK=" + hookSecret,
	}
}

// progress logs a line every 10 s while the chaos lasts.
func progress(ctx context.Context, db *dao.DB, faultCount func() int, logf func(string, ...any)) {
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
		var done, all int
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := db.SQL().QueryRowContext(qctx, `SELECT count(*) FILTER (WHERE state IN ('succeeded', 'failed', 'stopped')), count(*) FROM workflow_instance`).Scan(&done, &all)
		cancel()
		faults := faultCount()
		if err != nil {
			logf("soak: %v: %d faults; workflows unknown (%v)", time.Since(start).Round(time.Second), faults, err)
			continue
		}
		logf("soak: %v: %d faults; %d of %d workflows ended", time.Since(start).Round(time.Second), faults, done, all)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
