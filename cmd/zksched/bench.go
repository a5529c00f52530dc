package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/bench"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdout, "usage: zksched bench burn-down|latency|dag [flags]")
		if len(args) == 0 {
			return usageError{fmt.Errorf("want a mode")}
		}
		return nil
	}
	mode := args[0]
	fs := newFlags("bench "+mode, stdout)
	config := configFlag(fs)
	n := fs.Int("n", 10000, "workflows (burn-down, dag)")
	rate := fs.Float64("rate", 500, "workflows per second (latency)")
	duration := fs.Duration("duration", 20*time.Second, "how long to submit (latency)")
	masters := fs.Int("masters", 1, "masters in process")
	workers := fs.Int("workers", 2, "workers in process")
	slots := fs.Int("slots", 64, "slots per worker")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	opts := bench.Options{Mode: mode, N: *n, Rate: *rate, Duration: *duration, Masters: *masters,
		Workers: *workers, Slots: *slots, DSN: cfg.DB.DSN, Progress: stderr, Log: zerolog.Nop()}
	s, err := bench.Run(ctx, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	fmt.Fprintf(stdout, "%s: %d workflows (%d tasks) in %.2fs = %.0f tasks/s; %d master(s), %d worker(s) × %d slots\n",
		s.Mode, s.Workflows, s.Tasks, s.Seconds, s.TasksPerSec, s.Masters, s.Workers, s.Slots)
	fmt.Fprintf(stdout, "submit → first task start: p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms\n",
		s.Latency.Start.P50, s.Latency.Start.P95, s.Latency.Start.P99, s.Latency.Start.Max)
	fmt.Fprintf(stdout, "submit → workflow finished: p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms\n",
		s.Latency.Finish.P50, s.Latency.Finish.P95, s.Latency.Finish.P99, s.Latency.Finish.Max)
	return nil
}
