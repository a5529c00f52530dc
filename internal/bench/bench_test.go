package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/worker/executor"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == executor.SuperviseArg {
		os.Exit(executor.SuperviseMain(os.Args[2:]))
	}
	// The in-process workers' shell tasks inherit GORACE: this test binary is their
	// supervisor, and a race-built one sleeps a second at its exit unless told not to.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	os.Exit(m.Run())
}

// TestModesRun keeps the benchmark working: each mode on a small load finishes every workflow
// and reports consistent figures. It asserts no speed.
func TestModesRun(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{Mode: "burn-down", N: 200},
		{Mode: "latency", Rate: 50, Duration: time.Second},
		{Mode: "dag", N: 2},
		{Mode: "foreach", N: 50},
		// A purge is seen only if a workflow ends a retention period before the run does:
		// the run is long, and its load light, next to a shell task's time in a loaded test
		// phase.
		{Mode: "retention", Rate: 5, Duration: 10 * time.Second, Retention: time.Second},
	} {
		t.Run(o.Mode, func(t *testing.T) {
			t.Parallel()
			o.Masters, o.Workers, o.Slots, o.DSN, o.Log = 1, 2, 8, testenv.BaseDSN(), zerolog.Nop()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if o.Mode == "retention" {
				r := s.Retention
				if r == nil || r.Submitted == 0 || len(r.Samples) < 10 || r.Purged["workflow_instance"] == 0 || r.Purged["task_log"] == 0 {
					t.Fatalf("summary = %+v, retention %+v", s, r)
				}
				for _, table := range RetentionTables {
					if r.Samples[len(r.Samples)-1].Bytes[table] <= 0 || r.Flat[table] <= 0 {
						t.Fatalf("retention %+v: no size of %s", r, table)
					}
				}
				return
			}
			if o.Mode == "foreach" {
				f := s.ForEach
				if f == nil || f.Items != 50 || len(f.Runs) != forEachRuns || s.P50ms <= 0 {
					t.Fatalf("summary = %+v, foreach %+v", s, f)
				}
				// The times are the database's now() of the transactions that wrote them, each
				// its transaction's start: the master's end of the instance may have begun
				// before the worker's end of the last item, which it then read.
				for _, r := range f.Runs {
					if r.FirstStartMs <= 0 || r.ItemsEndedMs < r.FirstStartMs || r.FinishedMs < r.FirstStartMs {
						t.Fatalf("run = %+v", r)
					}
				}
				return
			}
			if s.Workflows == 0 || s.Tasks < s.Workflows || s.Seconds <= 0 || s.TasksPerSec <= 0 {
				t.Fatalf("summary = %+v", s)
			}
			if s.Latency.Finish.P50 <= 0 || s.Latency.Finish.P99 < s.Latency.Finish.P50 || s.Latency.Start.P50 > s.Latency.Finish.P50 {
				t.Fatalf("latency = %+v", s.Latency)
			}
			if o.Mode != "burn-down" {
				return
			}
			// The run's cost: the whole machine's CPU time covers this process's.
			c := s.CPU
			if c == nil || c.Cores < 1 || c.ProcessSeconds <= 0 || c.MachineSeconds < c.ProcessSeconds*0.9 ||
				c.MachineUsPerWorkflow != c.MachineSeconds*1e6/float64(s.Workflows) || c.MachineBusyFractionPct <= 0 {
				t.Fatalf("cpu = %+v", c)
			}
		})
	}
}

// TestClusterModeMeasuresTheRunningCluster runs the modes with Cluster against a database
// whose nodes run elsewhere (here: in process, on a schema of the test's own), with another
// workflow's instance left unfinished beside the bench's: the bench measures its own
// workflows and is not held up by the others. The modes with nodes of their own refuse it.
func TestClusterModeMeasuresTheRunningCluster(t *testing.T) {
	t.Parallel()
	db, dsn := daotest.New(t)
	stop := cluster(db, Options{Masters: 1, Workers: 1, Slots: 8, Log: zerolog.Nop()})
	defer stop()
	// An instance of a workflow no worker can run (its group has none) stays unfinished.
	daotest.Submit(t, db, "other", map[string]any{"name": "other", "tasks": []map[string]any{
		{"name": "t", "type": "noop", "group": "nobody"}}})
	for _, o := range []Options{
		{Mode: "burn-down", N: 100},
		{Mode: "latency", Rate: 50, Duration: time.Second},
		{Mode: "dag", N: 1},
	} {
		o.Cluster, o.DSN, o.Log = true, dsn, zerolog.Nop()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		s, err := Run(ctx, o)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", o.Mode, err)
		}
		if s.Workflows == 0 || s.TasksPerSec <= 0 || s.Latency.Finish.P50 <= 0 {
			t.Fatalf("%s: summary = %+v", o.Mode, s)
		}
	}
	if _, err := Run(context.Background(), Options{Mode: "failover", Cluster: true, DSN: dsn}); err == nil {
		t.Fatal("failover with Cluster: no error")
	}
}
