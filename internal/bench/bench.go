// Package bench measures zksched: how fast a cluster works down a backlog (burn-down), how
// long a workflow waits at a steady submit rate (latency), how long a fan-out/fan-in DAG takes
// above its tasks' own time (dag), how long a for-each over N items takes from submit to its
// end (foreach), how long a killed worker's tasks take to run again (failover), how much
// memory the nodes hold with a large queue (memory), and what waiting tasks cost and how fast
// a signal moves their workflows on (signal), whether the tables stop growing under a
// steady load once a short retention purges what ended (retention), and how much memory a
// master holds while a crowd of viewers reads a large instance (viewers). Each run gets a PostgreSQL
// schema of its own, dropped at the end. The first four and retention run their master and
// workers in process: the figures are those of zksched's scheduling path, the same code the
// nodes run, without ZooKeeper in the loop (which only decides membership, never the path of a
// task). Failover, memory, signal and viewers need real processes, to kill and to measure: they run the
// zksched binary as their nodes, on a ZooKeeper root of their own.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/master"
	"github.com/zksched/zksched/tracing"
	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
	"github.com/zksched/zksched/workflow"
)

// Options configure a run.
type Options struct {
	// Mode is burn-down, latency, dag, foreach, failover, memory, signal or retention.
	Mode string
	// N is the number of workflows (burn-down, dag, memory, signal), or of a for-each's items
	// (foreach).
	N int
	// Rate is the submit rate in workflows per second (latency, failover, retention), for
	// Duration. The
	// memory mode submits N at once and waits at most Duration for the queue to fill. The
	// signal mode signals Rate waiting tasks a second for Duration.
	Rate     float64
	Duration time.Duration
	// Masters, Workers and Slots size the cluster: in process, or processes for failover and
	// memory.
	Masters, Workers, Slots int
	// SpreadWait is the in-process workers' worker.spread-wait (0: they claim as if alone).
	SpreadWait time.Duration
	// DSN is the database; the run makes a schema of its own in it, unless Cluster.
	DSN string
	// Cluster runs burn-down, latency or dag against the configured cluster: its database
	// (DSN as it is, migrated) and the master and workers already running on it, which must
	// serve the default group with the noop task type. The bench's workflows (bench-noop,
	// bench-latency, bench-dag) stay in its history.
	Cluster bool
	// workflow is the name of the mode's workflow, whose instances alone are measured.
	workflow string
	// Progress receives a line every 2 s; Log the nodes' logs (usually discarded).
	Progress io.Writer
	Log      zerolog.Logger

	// The failover and memory modes run Binary (empty: ZkschedBinary) as their nodes, on
	// ZooKeeper at ZooKeeper under a root of their own beside Root (Root-bench-<random>),
	// with the nodes' registry.session-timeout SessionTimeout and failover.delay
	// FailoverDelay. Each task sleeps TaskSleep. In failover, the worker running the most
	// tasks is killed KillAfter into the load; memory samples the nodes for Hold once the
	// queue is full.
	ZooKeeper      []string
	Root           string
	Binary         string
	SessionTimeout time.Duration
	FailoverDelay  time.Duration
	TaskSleep      time.Duration
	KillAfter      time.Duration
	Hold           time.Duration
	// Interval is the sensor mode's sensors' interval; 0 means a minute.
	Interval time.Duration

	// Retention is the retention mode's retention.instances; its logs are kept half that.
	Retention time.Duration

	// Requests is how many reads of each kind (the API's detail, the UI's page) the viewers
	// mode sends at once.
	Requests int
	// usersFile is the nodes' api.users-file; empty: none.
	usersFile string

	// Tracing is the config's tracing section: on, the instances submitted get their trace
	// and the in-process nodes emit their spans (burn-down, latency, dag, foreach, retention),
	// through one exporter.
	Tracing conf.Tracing
}

// Summary is the result of a run, printed as JSON with --json.
type Summary struct {
	Mode        string            `json:"mode"`
	Tasks       int               `json:"tasks"`
	Workflows   int               `json:"workflows"`
	Seconds     float64           `json:"seconds"`
	TasksPerSec float64           `json:"tasks_per_sec"`
	P50ms       float64           `json:"p50_ms"`
	P95ms       float64           `json:"p95_ms"`
	P99ms       float64           `json:"p99_ms"`
	Latency     *dao.LatencyStats `json:"latency"`
	Masters     int               `json:"masters"`
	Workers     int               `json:"workers"`
	Slots       int               `json:"slots"`
	// CPU is what the run cost in CPU time (burn-down; nil where /proc/stat is missing).
	CPU *CPUFigures `json:"cpu,omitempty"`
	// FailoverFigures are the failover mode's own, nil in the others.
	*FailoverFigures
	// Memory holds the memory mode's figures, nil in the others. It is not inlined as the
	// failover figures are: the two share field names (zk_root, schema), which JSON would
	// then drop from both.
	Memory *MemoryFigures `json:"memory,omitempty"`
	// Signal holds the signal mode's figures, nil in the others.
	Signal *SignalFigures `json:"signal,omitempty"`
	// Sensor holds the sensor mode's figures, nil in the others.
	Sensor *SensorFigures `json:"sensor,omitempty"`
	// ForEach holds the foreach mode's figures, nil in the others.
	ForEach *ForEachFigures `json:"foreach,omitempty"`
	// Retention holds the retention mode's figures, nil in the others.
	Retention *RetentionFigures `json:"retention,omitempty"`
	// Viewers holds the viewers mode's figures, nil in the others.
	Viewers *ViewerFigures `json:"viewers,omitempty"`
}

// openGate lets the in-process nodes work: there is no ZooKeeper membership to lose.
type openGate struct{}

func (openGate) Active() bool             { return true }
func (openGate) Changed() <-chan struct{} { return nil }

// Run runs one benchmark.
func Run(ctx context.Context, o Options) (*Summary, error) {
	var db *dao.DB
	if o.Cluster {
		if o.Mode != "burn-down" && o.Mode != "latency" && o.Mode != "dag" {
			return nil, fmt.Errorf("--cluster is for burn-down, latency and dag; %s runs nodes of its own", o.Mode)
		}
		var err error
		if db, err = dao.Open(ctx, o.DSN, 80, o.Log); err != nil {
			return nil, err
		}
		defer db.Close()
	} else {
		scratchDB, drop, err := scratch(ctx, o.DSN, o.Log)
		if err != nil {
			return nil, err
		}
		defer drop()
		db = scratchDB
	}
	if o.Tracing.Enabled {
		db.SetTraceStart(tracing.Traceparents(o.Tracing.SampleRatio))
	}
	switch o.Mode {
	case "burn-down":
		return burnDown(ctx, db, o)
	case "latency":
		return latency(ctx, db, o)
	case "dag":
		return dag(ctx, db, o)
	case "foreach":
		return forEach(ctx, db, o)
	case "failover":
		return failover(ctx, db, o)
	case "memory":
		return memory(ctx, db, o)
	case "signal":
		return signalBench(ctx, db, o)
	case "sensor":
		return sensorBench(ctx, db, o)
	case "retention":
		return retentionBench(ctx, db, o)
	case "viewers":
		return viewers(ctx, db, o)
	}
	return nil, fmt.Errorf("unknown mode %q (want burn-down, latency, dag, foreach, failover, memory, signal, sensor, retention or viewers)", o.Mode)
}

// scratch makes a migrated schema of the run's own and returns a function that drops it.
func scratch(ctx context.Context, dsn string, log zerolog.Logger) (*dao.DB, func(), error) {
	admin, err := dao.Open(ctx, dsn, 2, log)
	if err != nil {
		return nil, nil, err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	schema := "bench_" + hex.EncodeToString(b)
	if _, err := admin.SQL().ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return nil, nil, fmt.Errorf("create schema: %w", err)
	}
	drop := func() {
		_, _ = admin.SQL().Exec("DROP SCHEMA " + schema + " CASCADE")
		admin.Close()
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		drop()
		return nil, nil, fmt.Errorf("bench needs a postgres:// URL DSN")
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := dao.Open(ctx, u.String(), 40, log)
	if err != nil {
		drop()
		return nil, nil, err
	}
	if _, err := db.Migrate(ctx); err != nil {
		db.Close()
		drop()
		return nil, nil, err
	}
	return db, func() { db.Close(); drop() }, nil
}

// cluster runs masters and workers in process until stop is called; with o.Cluster, the
// configured cluster's nodes do the work and cluster starts nothing.
func cluster(db *dao.DB, o Options) (stop func()) {
	if o.Cluster {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Each master runs as a node's does, with its three parts beside it.
	const masterParts = 4
	done := make(chan struct{}, masterParts*o.Masters+o.Workers)
	tracer, err := tracing.New(ctx, tracing.Config(o.Tracing), tracing.Options{Node: "bench", Role: "bench", Log: o.Log})
	if err != nil {
		o.Log.Warn().Err(err).Msg("tracing could not start; the run goes on without it")
	}
	// Each node has a pool of its own, of the default size, as a node process has: sharing
	// the load generator's made the nodes wait for connections the submitters held.
	var pools []*dao.DB
	pool := func() *dao.DB {
		p, err := dao.Open(ctx, db.DSN(), conf.Defaults().DB.MaxConns, o.Log)
		if err != nil {
			// The scratch schema just answered; if it no longer does, the node shares the
			// run's pool rather than the run failing here, and says so.
			o.Log.Warn().Err(err).Msg("a node's own pool could not be opened; it shares the bench's")
			return db
		}
		pools = append(pools, p)
		return p
	}
	for i := range o.Masters {
		cfg, mdb := master.Config{ID: fmt.Sprintf("bench-master-%d", i), PollInterval: time.Second, Log: o.Log}, pool()
		m := master.New(cfg, mdb, openGate{})
		for _, run := range []func(context.Context) error{m.Run, master.NewSweep(m).Run,
			master.NewWaitTimeouts(cfg, mdb, openGate{}).Run, master.NewDeadlines(cfg, mdb, openGate{}).Run} {
			go func() { run(ctx); done <- struct{}{} }()
		}
	}
	exported := make(chan struct{})
	if tracer != nil {
		export := master.NewTraceExport(master.TraceExportConfig{PollInterval: time.Second, Log: o.Log}, pool(), tracer)
		go func() { export.Run(ctx); close(exported) }()
	} else {
		close(exported)
	}
	self, _ := os.Executable()
	// The tasks get what a node's would with worker.task-env: [GORACE]: a race-built
	// supervisor (the tests') would otherwise sleep a second at its exit, after every task.
	taskEnv := executor.TaskEnv(os.Environ(), append(slices.Clone(executor.DefaultTaskEnv), "GORACE"), nil)
	for i := range o.Workers {
		// The workers know each other as a node's registry tells it, so that their claims
		// take their shares of a burst as a cluster's do.
		peers := fixedPeers{}
		for j := range o.Workers {
			if j != i {
				peers[fmt.Sprintf("bench-worker-%d", j)] = o.Slots
			}
		}
		w := worker.New(worker.Config{ID: fmt.Sprintf("bench-worker-%d", i), Groups: []string{workflow.DefaultGroup},
			Slots: o.Slots, PollInterval: time.Second, ShutdownTimeout: 5 * time.Second, LogLimit: 1 << 20, Log: o.Log,
			Tracer: tracer, Peers: peers, SpreadWait: o.SpreadWait},
			pool(), openGate{}, executor.Set{"noop": executor.Noop{}, "shell": executor.Shell{Self: self, KillGrace: time.Second, BaseEnv: taskEnv}})
		go func() { w.Run(ctx); done <- struct{}{} }()
	}
	return func() {
		cancel()
		for range masterParts*o.Masters + o.Workers {
			<-done
		}
		<-exported
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := tracer.Shutdown(sctx); err != nil {
			o.Log.Warn().Err(err).Msg("tracing: shutdown")
		}
		scancel()
		for _, p := range pools {
			p.Close()
		}
	}
}

// fixedPeers are the other in-process workers, by id, with their slots (worker.Peers).
type fixedPeers map[string]int

func (p fixedPeers) Slots() map[string]int { return p }

// define stores a workflow definition and returns its version.
func define(ctx context.Context, db *dao.DB, spec *workflow.Spec) (int, error) {
	stored, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: spec}, time.Now())
	return stored.Version, err
}

// waitFinished waits until want workflows with ids above after (dao.WorkflowLastID) have
// finished, counting them every interval, and printing progress every 2 s from start.
func waitFinished(ctx context.Context, db *dao.DB, o Options, after int64, start time.Time, want int, every time.Duration) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	lastPrint, lastN := time.Now(), 0
	for {
		n, err := db.WorkflowCountFinished(ctx, o.workflow, after)
		if err != nil {
			return err
		}
		if now := time.Now(); now.Sub(lastPrint) >= 2*time.Second && o.Progress != nil {
			fmt.Fprintf(o.Progress, "%6.1fs  %d/%d workflows finished  (%.0f/s over the last %.1fs)\n",
				now.Sub(start).Seconds(), n, want, float64(n-lastN)/now.Sub(lastPrint).Seconds(), now.Sub(lastPrint).Seconds())
			lastPrint, lastN = now, n
		}
		if n >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func summarize(ctx context.Context, db *dao.DB, o Options, after int64, took time.Duration, workflows, tasks int) (*Summary, error) {
	st, err := db.WorkflowLatency(ctx, o.workflow, after)
	if err != nil {
		return nil, err
	}
	return summary(o, took, workflows, tasks, st), nil
}

func summary(o Options, took time.Duration, workflows, tasks int, st *dao.LatencyStats) *Summary {
	s := &Summary{Mode: o.Mode, Tasks: tasks, Workflows: workflows, Seconds: took.Seconds(),
		TasksPerSec: float64(tasks) / took.Seconds(), Latency: st, Masters: o.Masters, Workers: o.Workers, Slots: o.Slots}
	s.P50ms, s.P95ms, s.P99ms = st.Finish.P50, st.Finish.P95, st.Finish.P99
	if o.Mode == "latency" {
		s.P50ms, s.P95ms, s.P99ms = st.Start.P50, st.Start.P95, st.Start.P99
	}
	return s
}
