// Command zksched is the one binary of zksched: master, worker, migrate, submit, schedule,
// backfill, status, logs, kill, rerun, stop, signal, asset, zk, user, schema, version,
// completion.
// This package is wiring only; the behaviour lives in the packages it calls. It links no test
// code: the benchmarks and the soak, which use the test harness, are cmd/zksched-bench.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/zksched/zksched/internal/buildinfo"
	"github.com/zksched/zksched/worker/executor"
)

// Version is this build's version: the release's (bin/release.sh sets it), else "dev".
var Version = buildinfo.Get().Version

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitFenced  = 75 // EX_TEMPFAIL: the node was fenced; a supervisor restarts it as a new identity
	exitUnknown = 3  // no such instance
)

// instanceUsage are the flags of the commands on an instance (see instance.go).
const instanceUsage = "[--json] [--server URL [--token-file FILE]] [--config FILE]"

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"master", "[--config FILE] [--check-config]", "run a master: drives workflow instances, elects a leader that fails over lost nodes", runMaster},
		{"worker", "[--config FILE] [--check-config]", "run a worker: claims and runs task instances", runWorker},
		{"migrate", "[--config FILE]", "apply the database migrations (idempotent; safe to run concurrently)", runMigrate},
		{"submit", "[--config FILE] [--param k=v]... [--priority N] [--wait] WORKFLOW.yaml", "validate and submit a workflow; print the instance id", runSubmit},
		{"define", "[--config FILE] WORKFLOW.yaml", "validate and store a workflow (and its schedule) without running it", runDefine},
		{"schedule", scheduleUsage, "list the cron schedules with their next fire times; enable, disable or trigger one", runSchedule},
		{"hooks", hooksUsage, "list the webhook triggers with their URLs and latest deliveries", runHooks},
		{"backfill", "WORKFLOW --from T1 --to T2 [--dry-run]", "create the instances of every fire time of a schedule in a range, within max-active-instances", runBackfill},
		{"status", "WORKFLOW_INSTANCE " + instanceUsage, "show a workflow instance: state, times, why it ended, error, parent, and its tasks with state, attempt, worker, children and what the waiting ones wait for", runStatus},
		{"logs", "TASK_INSTANCE [--follow] [--attempt N] " + instanceUsage, "print a task's log (its latest attempt's by default); --follow prints new lines until the attempt ends", runLogs},
		{"kill", "TASK_INSTANCE " + instanceUsage, "kill a queued or waiting task, or ask the worker of a running one to stop it", runKill},
		{"rerun", "TASK_INSTANCE | --workflow WORKFLOW_INSTANCE " + instanceUsage, "queue a failed or killed task again, or every failed or killed task of a workflow instance", runRerun},
		{"stop", "WORKFLOW_INSTANCE " + instanceUsage, "stop a workflow instance: its tasks are killed, it ends stopped", runStop},
		{"signal", "TASK_INSTANCE [--output TEXT] [--fail] " + instanceUsage, "end a waiting task (type: wait) succeeded with the output, or resume a paused agent with it; --fail fails either", runSignal},
		{"asset", assetUsage, "emit an asset event from outside any task: the workflows whose on-assets it completes start", runAsset},
		{"zk", "tree|nodes [--json] [--config FILE]", "show the registry in ZooKeeper with parsed data", runZK},
		{"user", userUsage, "add a user of the API and the UI with a role (printing its new token once), list or remove them", runUser},
		{"schema", schemaUsage, "print the JSON Schema of the workflow file, for editors (docs/workflow.schema.json)", runSchema},
		{"version", "[--json]", "print the version, the commit and its date, and the Go version", runVersion},
		{"completion", completionUsage, "print the shell's completion script: commands, flags, files, schedule and asset names, and instance ids from the API when --server or ZKSCHED_SERVER names a master", runCompletion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: zksched COMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n           %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(w, "\nEvery command takes --help; flags may come before or after the arguments (-- ends them).")
	fmt.Fprintln(w, "Configuration: --config FILE (YAML) and ZKSCHED_<SECTION>_<KEY> variables.")
	fmt.Fprintln(w, "--server URL (or ZKSCHED_SERVER) acts through a master's API with the token of --token-file (or ZKSCHED_TOKEN, "+
		"or else the one a master of this user generated in its state folder).")
	fmt.Fprintln(w, "Exit codes: 0 done, 1 failed or refused, 2 usage, 3 no such instance, 75 node fenced.")
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
	if args[0] == completeCommand {
		_ = runComplete(context.Background(), args[1:], stdout, stderr)
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
	if args[0] == "bench" {
		fmt.Fprintln(stderr, "zksched: bench is a binary of its own: zksched-bench MODE [flags] (go build -o bin/zksched-bench ./cmd/zksched-bench)")
		return exitUsage
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
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("unexpected arguments %v", fs.Args())}
	}
	info := buildinfo.Get()
	if *asJSON {
		return writeJSON(stdout, info)
	}
	fmt.Fprintf(stdout, "zksched %s\ncommit  %s\ndate    %s\ngo      %s\n", info.Version, info.Commit, info.Date, info.GoVersion)
	return nil
}

// newFlags returns a flag set whose --help prints to out and whose errors are returned.
func newFlags(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(&flagOutput{out: out})
	return fs
}

// flagOutput holds what the flag package writes while it parses: the flags' help, shown on
// --help, and for a mistake the error and the same help, dropped there, as run prints the
// mistake once with the command's usage line.
type flagOutput struct {
	out io.Writer
	buf bytes.Buffer
}

func (o *flagOutput) Write(p []byte) (int, error) { return o.buf.Write(p) }

// parse parses args with fs. Flags may come before, between or after the arguments (the
// flag package alone stops at the first argument that is not a flag); "--" ends the flags, and
// everything after it is an argument. fs.Args() returns the arguments in their order.
func parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(interleaved(fs, args))
	if o, ok := fs.Output().(*flagOutput); ok {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = o.out.Write(o.buf.Bytes())
		}
		o.buf.Reset()
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return usageError{err}
	}
	return err
}

// interleaved reorders args for fs.Parse: the flags of fs first (each with its value, when
// it takes one and is not written --name=value), then "--" and the arguments, keeping the
// order of each. A word that follows a flag taking a value is that value, whatever it looks
// like, as the flag package reads it. Unknown flags, and a last flag without its value, are
// left for fs.Parse to refuse.
func interleaved(fs *flag.FlagSet, args []string) []string {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 == len(args) {
			return flags
		}
		i++
		flags = append(flags, args[i])
	}
	return append(append(flags, "--"), positional...)
}
