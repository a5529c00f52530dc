// Command zksched-bench measures zksched and runs its randomized fault soak:
//
//	zksched-bench MODE [flags]
//
// MODE is burn-down, latency, dag, foreach or retention (nodes in process on a scratch
// schema), failover, memory, signal or viewers (zksched processes as the nodes), or soak
// (randomized faults on servers and zksched processes of its own). It is a binary apart from
// zksched because it uses the test harness (internal/bench, internal/soak), which the product
// does not link.
//
// The modes that run processes run the zksched binary of --bin; by default the zksched
// beside this executable (bin/zksched for bin/zksched-bench), else the first on PATH.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/worker/executor"
)

// Exit codes, those of zksched.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	// The in-process workers run shell tasks under this executable as their supervisor.
	if len(os.Args) > 1 && os.Args[1] == executor.SuperviseArg {
		os.Exit(executor.SuperviseMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := runBench(ctx, args, stdout, stderr)
	var ce configError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "zksched-bench: %v\nusage: zksched-bench %s\n", err, usageLine)
		return exitUsage
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "zksched-bench: %v\n", ce.error)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "zksched-bench: %v\n", err)
		return exitFailed
	}
}

// usageLine is the command line, after the command's name.
var usageLine = strings.Join(benchModes, "|") + " [-n N] [--rate R] [--duration D] [--workers W] [--slots S] [--seed N] [--bin ZKSCHED] [--json]"

// usageError is a mistake in the command line.
type usageError struct{ error }

// configError is a config that does not load.
type configError struct{ error }

func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", os.Getenv("ZKSCHED_CONFIG"), "YAML config file (default: none; defaults and ZKSCHED_* variables)")
}

func loadConfig(path string) (*conf.Config, error) {
	cfg, err := conf.Load(path, os.Environ())
	if err != nil {
		return nil, configError{err}
	}
	return cfg, nil
}

// parseMode parses args with fs and returns the mode, one of benchModes, and the arguments
// after it. Flags may come before, between or after the arguments, as zksched's do.
func parseMode(fs *flag.FlagSet, args []string) (mode string, rest []string, err error) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: zksched-bench %s\n", usageLine)
		fs.PrintDefaults()
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", nil, err
			}
			return "", nil, usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	want := strings.Join(benchModes[:len(benchModes)-1], ", ") + " or " + benchModes[len(benchModes)-1]
	switch {
	case len(positional) == 0:
		return "", nil, usageError{fmt.Errorf("want %s", want)}
	case !slices.Contains(benchModes, positional[0]):
		return "", nil, usageError{fmt.Errorf("unknown mode %q: want %s", positional[0], want)}
	}
	return positional[0], positional[1:], nil
}
