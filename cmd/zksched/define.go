package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/tracing"
	"github.com/zksched/zksched/workflow"
)

// runDefine stores a workflow file as its workflow's next version, and its schedule, without
// running it: the child of a workflow task, or a workflow the API or the UI will start.
func runDefine(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("define", stdout)
	config := configFlag(fs)
	timeout := fs.Duration("connect-timeout", 30*time.Second, "how long to wait for PostgreSQL")
	path, rest, err := parseNamed(fs, args)
	if err != nil {
		return err
	}
	if path == "" || len(rest) > 0 {
		return usageError{fmt.Errorf("want one workflow file, got %d arguments", len(rest)+min(len(path), 1))}
	}
	spec, file, err := readWorkflowFile(path)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	db, err := openDB(cctx, cfg, newLogger(cfg.Log, stderr))
	cancel()
	if err != nil {
		return err
	}
	defer db.Close()
	if err := checkConfigured(ctx, db, spec, cfg); err != nil {
		return err
	}
	stored, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: spec, File: file, By: cliActor()}, time.Now())
	if err != nil {
		return err
	}
	if stored.Schedule != nil {
		return printStoredSchedule(stdout, spec, stored.Version, stored.Schedule)
	}
	if stored.Unscheduled {
		fmt.Fprintf(stderr, "the schedule of %s was removed: this file has none\n", spec.Name)
	}
	fmt.Fprintf(stdout, "stored %s version %d; run it with zksched submit, a workflow task or the API\n", spec.Name, stored.Version)
	return nil
}

// readWorkflowFile reads and parses the workflow file at path for submit and define: its
// relative workdirs are taken from the file's folder. A file that does not parse is refused
// (exit 1) with every problem found.
func readWorkflowFile(path string) (*workflow.Spec, []byte, error) {
	spec, err := workflow.ParseFile(path)
	if err != nil {
		return nil, nil, exitError{code: exitFailed, msg: "rejected, nothing stored:\n" + err.Error()}
	}
	// Read again for its audit record's hash, now that the parse has bounded its size.
	file, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, exitError{code: exitFailed, msg: fmt.Sprintf("read workflow file: %v", err)}
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, nil, err
	}
	spec.ResolveWorkdirs(dir)
	return spec, file, nil
}

// checkConfigured refuses (exit 1) a workflow whose providers or pools the cluster lacks, or
// whose webhook variables or hook secret variables the config's patterns refuse. The cluster's are those its nodes
// stored (every worker's providers, the masters' pools), the local config's only where the
// database has none: a command line set up by its environment alone knows neither.
func checkConfigured(ctx context.Context, db *dao.DB, spec *workflow.Spec, cfg *conf.Config) error {
	providers, ok, err := db.SettingProviders(ctx)
	if err != nil {
		return err
	}
	if !ok {
		providers = slices.Sorted(maps.Keys(cfg.LLM.Providers))
	}
	pools, ok, err := db.PoolNamesLimited(ctx)
	if err != nil {
		return err
	}
	if !ok {
		pools = slices.Sorted(maps.Keys(cfg.Pools))
	}
	if err := errors.Join(spec.CheckConfigured(providers, pools), spec.CheckWebhookEnv(cfg.Notify.WebhookEnvPattern),
		spec.CheckHookSecretEnv(cfg.API.HookSecretEnvPattern)); err != nil {
		return exitError{code: exitFailed, msg: "rejected, nothing stored:\n" + err.Error()}
	}
	return nil
}

// traceAsTheMasters makes what this command line submits traced as the masters trace it,
// when its own config has tracing off: a command line set up by its environment alone would
// otherwise submit every instance untraced.
func traceAsTheMasters(ctx context.Context, db *dao.DB, cfg *conf.Config) error {
	if cfg.Tracing.Enabled {
		return nil
	}
	t, ok, err := db.SettingTracingGet(ctx)
	if err != nil {
		return err
	}
	if ok && t.SampleRatio > 0 {
		db.SetTraceStart(tracing.Traceparents(t.SampleRatio))
	}
	return nil
}
