package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/bench"
	"github.com/zksched/zksched/internal/soak"
)

// benchModes are the modes of zksched-bench.
var benchModes = []string{"burn-down", "latency", "dag", "foreach", "failover", "memory", "signal", "sensor", "retention", "viewers", "soak"}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zksched-bench", flag.ContinueOnError)
	fs.SetOutput(stdout)
	config := configFlag(fs)
	n := fs.Int("n", 10000, "workflows (burn-down, dag; memory, signal: 100000 unless set); foreach: the for-each's items, 1000 unless set; viewers: the instance's tasks, 10000 unless set")
	rate := fs.Float64("rate", 500, "workflows per second (latency; failover, retention: 50 unless set); signal: signals per second, 200 unless set")
	duration := fs.Duration("duration", 20*time.Second,
		"how long to submit (latency; failover: 15s unless set; retention: 3m unless set); memory: the most to wait for the queue to fill, 5m unless set; viewers: the most to wait for the instance's tasks, 2m unless set; signal: how long to signal; soak: how long the faults go on, 1m unless set")
	masters := fs.Int("masters", 1, "masters (in process; failover, memory: processes; soak: processes, 2 unless set)")
	workers := fs.Int("workers", 2, "workers (in process; failover: processes, one of them killed; memory: processes; soak: processes, 3 unless set)")
	slots := fs.Int("slots", 64, "slots per worker (soak: 2 unless set)")
	sleep := fs.Duration("sleep", time.Second, "how long each task sleeps (failover; memory: 30s unless set)")
	killAfter := fs.Duration("kill-after", 3*time.Second, "when, into the load, to kill -9 a worker (failover)")
	hold := fs.Duration("hold", 10*time.Second, "how long to go on sampling once the queue is full (memory) or every task waits (signal)")
	sessionTimeout := fs.Duration("session-timeout", 2*time.Second, "the nodes' registry.session-timeout (failover; memory: 10s unless set)")
	failoverDelay := fs.Duration("failover-delay", 2*time.Second, "the nodes' failover.delay (failover, memory)")
	bin := fs.String("bin", "", "the zksched binary to run as the nodes (failover, memory, signal, viewers, soak; default: the zksched beside zksched-bench, else on PATH)")
	interval := fs.Duration("interval", time.Minute, "sensor: the sensors' interval (their hold is -hold, at least this)")
	seed := fs.Int64("seed", 0, "the soak's seed, to replay its schedule (soak; default: random)")
	faults := fs.String("faults", "", "the fault kinds the soak picks from, comma-separated (soak; default: all)")
	retention := fs.Duration("retention", 20*time.Second, "retention.instances of the run's master (retention; its logs are kept half that)")
	requests := fs.Int("requests", 200, "viewers: how many reads of the instance's API detail, and as many of its UI page, to send at once")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	external := fs.Bool("cluster", false, "burn-down, latency, dag: measure the configured cluster (its database and running nodes) instead of nodes in process on a scratch schema")
	nodeLog := fs.String("log-level", "", "show the in-process nodes' log at this level (debug, info, warn) on stderr")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run (pprof) to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile at the end of the run (pprof) to this file")
	mode, args, err := parseMode(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %v", args)}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch mode {
	case "failover":
		if !set["rate"] {
			*rate = 50
		}
		if !set["duration"] {
			*duration = 15 * time.Second
		}
	case "retention":
		if !set["rate"] {
			*rate = 50
		}
		if !set["duration"] {
			*duration = 3 * time.Minute
		}
		if *retention <= 0 {
			return usageError{fmt.Errorf("--retention %v: want a positive duration", *retention)}
		}
	case "soak":
		return runSoak(*config, soakOptions{seed: *seed, duration: *duration, faults: *faults, masters: *masters,
			workers: *workers, slots: *slots, sessionTimeout: *sessionTimeout, failoverDelay: *failoverDelay, bin: *bin, set: set}, stdout)
	case "foreach":
		if !set["n"] {
			*n = 1000
		}
	case "memory":
		if !set["n"] {
			*n = 100_000
		}
		if !set["duration"] {
			*duration = 5 * time.Minute
		}
		if !set["sleep"] {
			*sleep = 30 * time.Second
		}
		// Longer than failover's short one: the master creating 100,000 task instances on a
		// small machine must not lose its session on the way.
		if !set["session-timeout"] {
			*sessionTimeout = 10 * time.Second
		}
	case "viewers":
		if !set["n"] {
			*n = 10_000
		}
		if !set["duration"] {
			*duration = 2 * time.Minute
		}
		if !set["session-timeout"] {
			*sessionTimeout = 10 * time.Second
		}
	case "sensor":
		if !set["session-timeout"] {
			*sessionTimeout = 10 * time.Second
		}
	case "signal":
		if !set["n"] {
			*n = 100_000
		}
		if !set["rate"] {
			*rate = 200
		}
		if !set["session-timeout"] {
			*sessionTimeout = 10 * time.Second
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		defer func() {
			if f, err := os.Create(*memProfile); err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}()
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	opts := bench.Options{Mode: mode, N: *n, Rate: *rate, Duration: *duration, Masters: *masters,
		Workers: *workers, Slots: *slots, DSN: cfg.DB.DSN, Progress: stderr, Log: benchLog(*nodeLog, stderr),
		ZooKeeper: cfg.Registry.Servers, Root: cfg.Registry.Root, Binary: *bin, SessionTimeout: *sessionTimeout,
		FailoverDelay: *failoverDelay, TaskSleep: *sleep, KillAfter: *killAfter, Hold: *hold, Cluster: *external,
		Retention: *retention, Tracing: cfg.Tracing, SpreadWait: cfg.Worker.SpreadWait, Requests: *requests,
		Interval: *interval}
	s, err := bench.Run(ctx, opts)
	if s == nil {
		return err
	}
	// A failover run that found problems has a summary too: print it, then fail.
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if encErr := enc.Encode(s); encErr != nil {
			return encErr
		}
		return err
	}
	if s.FailoverFigures != nil {
		printFailover(stdout, s)
		return err
	}
	if s.Memory != nil {
		printMemory(stdout, s)
		return err
	}
	if s.Signal != nil {
		printSignal(stdout, s)
		return err
	}
	if s.Sensor != nil {
		printSensor(stdout, s)
		return err
	}
	if s.ForEach != nil {
		printForEach(stdout, s)
		return err
	}
	if s.Retention != nil {
		printRetention(stdout, s)
		return err
	}
	if s.Viewers != nil {
		printViewers(stdout, s.Viewers)
		return err
	}
	nodes := fmt.Sprintf("%d master(s), %d worker(s) × %d slots in process", s.Masters, s.Workers, s.Slots)
	if *external {
		nodes = "the configured cluster's nodes"
	}
	fmt.Fprintf(stdout, "%s: %d workflows (%d tasks) in %.2fs = %.0f tasks/s; %s\n",
		s.Mode, s.Workflows, s.Tasks, s.Seconds, s.TasksPerSec, nodes)
	fmt.Fprintf(stdout, "submit → first task queued: p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms\n",
		s.Latency.Queued.P50, s.Latency.Queued.P95, s.Latency.Queued.P99, s.Latency.Queued.Max)
	fmt.Fprintf(stdout, "submit → first task start: p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms\n",
		s.Latency.Start.P50, s.Latency.Start.P95, s.Latency.Start.P99, s.Latency.Start.Max)
	fmt.Fprintf(stdout, "submit → workflow finished: p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms\n",
		s.Latency.Finish.P50, s.Latency.Finish.P95, s.Latency.Finish.P99, s.Latency.Finish.Max)
	if s.CPU != nil {
		fmt.Fprintln(stdout, s.CPU)
	}
	return nil
}

// printViewers prints the summary of a viewers run.
func printViewers(w io.Writer, v *bench.ViewerFigures) {
	fmt.Fprintf(w, "viewers: one instance of %d tasks; one read: API detail %d bytes in %.0f ms, UI page %d bytes in %.0f ms\n",
		v.Tasks, v.APIBytes, v.APIMs, v.UIBytes, v.UIMs)
	fmt.Fprintf(w, "%d of each at once: answers %v in %.2fs (a request: p50 %.0f ms, max %.0f ms)\n",
		v.Requests, v.Statuses, v.Seconds, v.P50Ms, v.MaxMs)
	fmt.Fprintf(w, "master RSS: %.1f MB before, %.1f MB at most sampled, %.1f MB peak (VmHWM)\n",
		v.MasterRSSMBBefore, v.MasterRSSMBMax, v.MasterHWMMB)
}

// printFailover prints the summary of a failover run.
func printFailover(w io.Writer, s *bench.Summary) {
	f := s.FailoverFigures
	fmt.Fprintf(w, "failover: %d workflows at %.0f/s, tasks sleeping %.0f ms, in %.2fs; %d master(s), %d worker(s) × %d slots\n",
		s.Workflows, f.Rate, f.TaskSleepMs, s.Seconds, s.Masters, s.Workers, s.Slots)
	fmt.Fprintf(w, "kill -9 of %s: %d running task(s) failed over (failover_event: %d requeued)\n",
		f.KilledWorker, f.TasksFailedOver, f.TasksRequeued)
	fmt.Fprintf(w, "kill → session expired seen by the leader %.0f ms, → fenced %.0f ms (session timeout %.0f ms, failover delay %.0f ms)\n",
		f.LostMs, f.FencedMs, f.SessionTimeoutMs, f.FailoverDelayMs)
	fmt.Fprintf(w, "kill → its tasks running elsewhere: p50 %.0f ms  p95 %.0f ms  p99 %.0f ms  min %.0f ms  max %.0f ms\n",
		s.P50ms, s.P95ms, s.P99ms, f.FailoverMsMin, f.FailoverMsMax)
	fmt.Fprintf(w, "submit → workflow finished: p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms\n",
		s.Latency.Finish.P50, s.Latency.Finish.P95, s.Latency.Finish.P99, s.Latency.Finish.Max)
	fmt.Fprintf(w, "lost %d, committed twice %d, overlaps %d\n", f.Lost, f.CommittedTwice, f.Overlaps)
}

// printMemory prints the summary of a memory run, beside the targets.
func printMemory(w io.Writer, s *bench.Summary) {
	m := s.Memory
	fmt.Fprintf(w, "memory: %d single-task workflows, tasks sleeping %.0f s; %d master(s), %d worker(s) × %d slots\n",
		s.Workflows, m.TaskSleepMs/1000, s.Masters, s.Workers, s.Slots)
	fmt.Fprintf(w, "submitted in %.1fs; every task instance created in %.1fs (%.0f/s); held %.1fs; %d samples in %.1fs\n",
		m.SubmitMs/1000, m.FillMs/1000, s.TasksPerSec, m.HoldMs/1000, m.Samples, s.Seconds)
	fmt.Fprintf(w, "queued task instances: max %d of %d\n", m.QueuedMax, m.TaskInstances)
	fmt.Fprintf(w, "master RSS max %.1f MB, HWM %.1f MB (target: under 100 MB)\n", m.MasterRSSMBMax, m.MasterHWMMB)
	fmt.Fprintf(w, "worker RSS max %.1f MB, HWM %.1f MB (target: under 50 MB)\n", m.WorkerRSSMBMax, m.WorkerHWMMB)
	for _, n := range m.Nodes {
		fmt.Fprintf(w, "  %-9s RSS max %6.1f MB  HWM %6.1f MB  Go heap in use %6.1f MB  Go sys %6.1f MB  %d goroutines  (pid %d, %s)\n",
			n.Name, n.RSSMBMax, n.HWMMB, n.HeapInuseMB, n.GoSysMB, n.Goroutines, n.PID, n.ID)
	}
}

// printSignal prints the summary of a signal run, beside the targets.
func printSignal(w io.Writer, s *bench.Summary) {
	g := s.Signal
	fmt.Fprintf(w, "signal: %d workflows waiting (noop → wait → noop) after %.1fs; %d master(s), %d worker(s) × %d slots\n",
		g.Waiting, g.FillMs/1000, s.Masters, s.Workers, s.Slots)
	fmt.Fprintf(w, "while they waited: master RSS max %.1f MB (target: under 100 MB), worker RSS max %.1f MB (target: under 50 MB)\n",
		g.MasterRSSMBMax, g.WorkerRSSMBMax)
	for i, n := range g.Held {
		idle := g.Idle[i]
		fmt.Fprintf(w, "  %-9s goroutines %d idle, %d waiting; Go heap in use %.1f MB idle, %.1f MB waiting\n",
			n.Name, idle.Goroutines, n.Goroutines, idle.HeapInuseMB, n.HeapInuseMB)
	}
	fmt.Fprintf(w, "%d signals at %g/s:\n", g.Signals, g.Rate)
	for _, l := range []struct {
		what string
		p    dao.Percentiles
	}{{"signal → next task created ", g.Queued}, {"signal → next task started ", g.Start}, {"signal → workflow finished ", g.Finish}} {
		fmt.Fprintf(w, "  %s p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms\n", l.what, l.p.P50, l.p.P95, l.p.P99, l.p.Max)
	}
	fmt.Fprintln(w, "  (target: signal → next task started p50 under 10 ms, p99 under 50 ms at 200/s)")
}

// printSensor prints the summary of a sensor run.
func printSensor(w io.Writer, s *bench.Summary) {
	g := s.Sensor
	fmt.Fprintf(w, "sensor: %d reschedule file sensors, every %.0fs, each checked once after %.1fs; %d master(s), %d worker(s) × %d slots\n",
		g.Sensors, g.IntervalMs/1000, g.FillMs/1000, s.Masters, s.Workers, s.Slots)
	fmt.Fprintf(w, "while they waited: master RSS max %.1f MB, worker RSS max %.1f MB\n", g.MasterRSSMBMax, g.WorkerRSSMBMax)
	for i, n := range g.Held {
		idle := g.Idle[i]
		fmt.Fprintf(w, "  %-9s goroutines %d idle, %d waiting; Go heap in use %.1f MB idle, %.1f MB waiting\n",
			n.Name, idle.Goroutines, n.Goroutines, idle.HeapInuseMB, n.HeapInuseMB)
	}
	l := g.Lateness
	fmt.Fprintf(w, "%d later checks: due → claimed p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms\n", g.Checks, l.P50, l.P95, l.P99, l.Max)
}

// printForEach prints the summary of a foreach run, beside the target.
func printForEach(w io.Writer, s *bench.Summary) {
	f := s.ForEach
	fmt.Fprintf(w, "foreach: a for-each of %d noop items, %d runs one after another; %d master(s), %d worker(s) × %d slots in process\n",
		f.Items, len(f.Runs), s.Masters, s.Workers, s.Slots)
	for i, r := range f.Runs {
		fmt.Fprintf(w, "run %d: submit → first item started %.0f ms, → every item ended %.0f ms, → instance succeeded %.0f ms\n",
			i+1, r.FirstStartMs, r.ItemsEndedMs, r.FinishedMs)
	}
	fmt.Fprintf(w, "submit → instance succeeded: median %.0f ms, max %.0f ms (target: under 2000 ms for 1,000 items)\n", s.P50ms, s.P95ms)
}

// printRetention prints the summary of a retention run: the tables' sizes over time.
func printRetention(w io.Writer, s *bench.Summary) {
	r := s.Retention
	fmt.Fprintf(w, "retention: %d workflows (noop → shell writing a log line) at %g/s for %.0fs; instances kept %gs, logs %gs; %d master(s), %d worker(s) × %d slots in process\n",
		r.Submitted, r.Rate, r.RunSec, r.InstancesSec, r.LogsSec, s.Masters, s.Workers, s.Slots)
	for _, sample := range r.Samples {
		fmt.Fprintf(w, "%6.1fs  %s\n", sample.AtSec, bench.FormatSample(sample))
	}
	var purged, flat []string
	for _, table := range bench.RetentionTables {
		purged = append(purged, fmt.Sprintf("%s %d", table, r.Purged[table]))
		flat = append(flat, fmt.Sprintf("%s %.2f", table, r.Flat[table]))
	}
	fmt.Fprintf(w, "rows purged: %s\n", strings.Join(purged, ", "))
	fmt.Fprintf(w, "largest size in the second half ÷ size at the half (1.00: flat): %s\n", strings.Join(flat, ", "))
}

// benchLog is the in-process nodes' log: none unless asked for.
func benchLog(level string, w io.Writer) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if level == "" || err != nil {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: w, NoColor: true}).Level(lvl).With().Timestamp().Logger()
}

// soakOptions are the bench flags the soak mode reads; set holds the names of those given.
type soakOptions struct {
	seed                          int64
	duration                      time.Duration
	faults                        string
	masters, workers, slots       int
	sessionTimeout, failoverDelay time.Duration
	bin                           string
	set                           map[string]bool
}

// runSoak runs the randomized fault soak (internal/soak) on servers and nodes of its own; the
// run log of its tasks goes to a scratch schema of the configured database.
func runSoak(config string, o soakOptions, stdout io.Writer) error {
	cfg, err := loadConfig(config)
	if err != nil {
		return err
	}
	// The run log lives apart from the database the soak restarts: in the configured one,
	// unless ZKSCHED_TEST_DSN names another (internal/testenv).
	if os.Getenv("ZKSCHED_TEST_DSN") == "" {
		os.Setenv("ZKSCHED_TEST_DSN", cfg.DB.DSN)
	}
	sc := soak.Config{Seed: o.seed, Duration: time.Minute, Masters: 2, Workers: 3, Slots: 2,
		SessionTimeout: o.sessionTimeout, FailoverDelay: o.failoverDelay}
	if sc.Seed == 0 {
		sc.Seed = time.Now().UnixNano() % 1e9 // short to type
	}
	if o.set["duration"] {
		sc.Duration = o.duration
	}
	if o.set["masters"] {
		sc.Masters = o.masters
	}
	if o.set["workers"] {
		sc.Workers = o.workers
	}
	if o.set["slots"] {
		sc.Slots = o.slots
	}
	if o.faults != "" {
		sc.Kinds = strings.Split(o.faults, ",")
	}
	bin := o.bin
	if bin == "" {
		if bin, err = bench.ZkschedBinary(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "soak: seed %d (replay with --seed %d)\n", sc.Seed, sc.Seed)
	_, err = soak.Main(sc, bin, stdout)
	return err
}
