// Command zksched is the one binary of zksched: master, worker, migrate, submit, zk, user,
// version.
// This package is wiring only; the behaviour lives in the packages it calls.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/zksched/zksched/worker/executor"
)

// Version is set at build time with -ldflags "-X main.Version=…".
var Version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitFenced  = 75 // EX_TEMPFAIL: the node was fenced; a supervisor restarts it as a new identity
	exitUnknown = 3
)

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"master", "[--config FILE]", "run a master: drives workflow instances, elects a leader that fails over lost nodes", runMaster},
		{"worker", "[--config FILE]", "run a worker: claims and runs task instances", runWorker},
		{"migrate", "[--config FILE]", "apply the database migrations (idempotent; safe to run concurrently)", runMigrate},
		{"submit", "[--config FILE] [--param k=v]... [--priority N] [--wait] WORKFLOW.yaml", "validate and submit a workflow; print the instance id", runSubmit},
		{"schedule", scheduleUsage, "list the cron schedules with their next fire times; enable, disable or trigger one", runSchedule},
		{"backfill", "WORKFLOW --from T1 --to T2 [--dry-run]", "create the instances of every fire time of a schedule in a range, within max-active-instances", runBackfill},
		{"signal", "[--config FILE] TASK_INSTANCE_ID [--output TEXT] [--fail]", "end a waiting task (type: wait) succeeded with the output, or resume a paused agent with it; --fail fails either", runSignal},
		{"zk", "tree|nodes [--json] [--config FILE]", "show the registry in ZooKeeper with parsed data", runZK},
		{"user", userUsage, "add a user of the API and the UI with a role (printing its new token once), list or remove them", runUser},
		{"bench", "burn-down|latency|dag|foreach|failover|memory|signal|retention|soak [-n N] [--rate R] [--duration D] [--workers W] [--slots S] [--seed N] [--json]",
			"measure throughput, latency, failover and memory on a scratch schema (failover, memory and signal run node processes); soak: randomized faults on servers and nodes of its own", runBench},
		{"version", "", "print the version", runVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: zksched COMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n           %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(w, "\nEvery command takes --help. Configuration: --config FILE (YAML) and ZKSCHED_<SECTION>_<KEY> variables.")
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == executor.SuperviseArg {
		os.Exit(executor.SuperviseMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.As(err, new(usageError)):
			fmt.Fprintf(stderr, "zksched %s: %v\nusage: zksched %s %s\n", c.name, err, c.name, c.args)
			return exitUsage
		case errors.As(err, new(exitError)):
			var e exitError
			errors.As(err, &e)
			if e.msg != "" {
				fmt.Fprintf(stderr, "zksched %s: %s\n", c.name, e.msg)
			}
			return e.code
		default:
			fmt.Fprintf(stderr, "zksched %s: %v\n", c.name, err)
			return exitFailed
		}
	}
	fmt.Fprintf(stderr, "zksched: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

// usageError is a mistake in the command line.
type usageError struct{ error }

// exitError ends the process with a given code.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }

func runVersion(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("version", stdout)
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "zksched", Version)
	return nil
}

// newFlags returns a flag set whose --help prints to out and whose errors are returned.
func newFlags(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	return nil
}
