package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/api"
	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/failover"
	"github.com/zksched/zksched/internal/faultinject"
	"github.com/zksched/zksched/internal/retry"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/master"
	"github.com/zksched/zksched/metrics"
	"github.com/zksched/zksched/notify"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/tracing"
	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
)

func runMaster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runNode(ctx, registry.RoleMaster, args, stdout, stderr)
}

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runNode(ctx, registry.RoleWorker, args, stdout, stderr)
}

// node is one running master or worker process.
type node struct {
	metrics *metrics.Metrics
	cfg     *conf.Config
	role    registry.Role
	id      string
	log     zerolog.Logger
	db      *dao.DB
	client  *registry.Client
	reg     *registry.Registration
	guard   *failover.Guard
	// token is the master's admin token (api.token, api.token-file or the one it generated,
	// see masterToken); "" with a users file alone or api.allow-unauthenticated.
	token string
	// ln is the node's HTTP listener.
	ln net.Listener
	// dbRole is the database role's powers as read at start, and dbRoleWarning what /readyz
	// says of them: "" when the role has none zksched does not need (see checkDBRole).
	dbRole        dao.RolePowers
	dbRoleWarning string

	// What open found or made for the steps after it: the port and the start time (both part
	// of the identity), the HTTP URL, the log's output, the tracer (nil when tracing is off),
	// and a worker's shell executor and secrets (see taskIsolation).
	port    int
	start   time.Time
	httpURL string
	logOut  *nodeLog
	tracer  *tracing.Tracer
	shell   executor.Shell
	secrets []string
	// work and watch are the node's parts (see runNode); closers what runNode closes as it
	// returns, in the reverse order (onClose).
	work, watch *parts
	closers     []func()
}

// runNode starts a master or a worker: it binds its HTTP port (part of its identity), waits for
// PostgreSQL and ZooKeeper (retrying with backoff while either is down), registers through the
// fenced multi, and runs until a signal (graceful stop, exit 0) or until it is fenced (exit 75).
// Its steps: open (config, logs, port, database, registry), start the master's or the
// worker's parts, then stop. What a step opens is closed when runNode returns, in the reverse
// order.
func runNode(ctx context.Context, role registry.Role, args []string, stdout, stderr io.Writer) error {
	n := &node{role: role}
	defer n.close()
	if err := n.open(ctx, args, stdout, stderr); err != nil {
		return startOutcome(err)
	}
	// The node's work and what outlives it run as two sets of parts: during a graceful stop a
	// node cut off from ZooKeeper must still stop its tasks at the deadline, and exit at once
	// if it is fenced, so the guard (and the HTTP port) stop only once the work has.
	n.work, n.watch = startParts(), startParts()
	n.onClose(func() { n.work.Stop() })
	n.onClose(func() { n.watch.Stop() })
	var running func() int
	var err error
	switch role {
	case registry.RoleMaster:
		running, err = n.startMaster(ctx)
	case registry.RoleWorker:
		running, err = n.startWorker()
	}
	if err != nil {
		return startOutcome(err)
	}
	n.work.Go("node data refresh", func(ctx context.Context) error { return n.reg.RefreshInfo(ctx, running) })
	n.watch.Go("guard", n.guard.Run)
	handler, err := n.httpHandler()
	if err != nil {
		return err
	}
	n.watch.Go("http server", serveHTTP(newHTTPServer(handler, n.log), n.ln, n.log))
	return n.stop(ctx)
}

// onClose has f run when runNode returns, before what was opened earlier is closed.
func (n *node) onClose(f func()) { n.closers = append(n.closers, f) }

// close runs what onClose was given, the last first.
func (n *node) close() {
	for _, f := range slices.Backward(n.closers) {
		f()
	}
}

// open reads the config and makes the node's log, binds its port, opens the database and
// registers the node in ZooKeeper. A worker also prepares what keeps its secrets from its
// tasks.
func (n *node) open(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := n.openConfig(args, stdout, stderr); err != nil {
		return err
	}
	if err := n.openDatabase(ctx); err != nil {
		return err
	}
	return n.openRegistry(ctx)
}

// openConfig reads the flags and the config, names the node, makes its log, and binds its
// HTTP port.
func (n *node) openConfig(args []string, stdout, stderr io.Writer) error {
	role := n.role
	fs := newFlags(string(role), stdout)
	config := configFlag(fs)
	check := fs.Bool("check-config", false, "load and check the config as the start would (all but what needs ZooKeeper or PostgreSQL), print \"config ok\" or the problems (exit 2), and exit")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("unexpected arguments %v", fs.Args())}
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	if *check {
		if err := checkConfig(cfg, role); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "config ok")
		return errConfigChecked
	}
	n.port = cfg.Master.Port
	if role == registry.RoleWorker {
		n.port = cfg.Worker.Port
	}
	n.start = time.Now()
	n.cfg, n.id = cfg, registry.Identity(cfg.Node.Host, n.port, n.start)
	n.log, n.logOut = newNodeLog(cfg.Log, stderr)
	n.log = n.log.With().Str("node", n.id).Str("role", string(role)).Logger()
	n.onClose(func() { n.logOut.Flush(2 * time.Second) })

	// A worker keeps its secrets from its tasks, and a task user it cannot use stops it before
	// it registers.
	if role == registry.RoleWorker {
		if n.shell, n.secrets, err = n.taskIsolation(); err != nil {
			return err
		}
	}

	// Two processes on one host and port would be told apart only by their start time: bind
	// first, so a second one fails here instead of running beside the first.
	if role == registry.RoleMaster {
		if n.token, err = masterToken(cfg, n.log); err != nil {
			return err
		}
	}
	ln, httpURL, err := listenNode(cfg, role, n.port, cfg.API.Authenticated(), n.log)
	if err != nil {
		return err
	}
	n.ln, n.httpURL = ln, httpURL
	n.onClose(func() { ln.Close() })
	n.log.Info().Str("version", Version).Int("pid", os.Getpid()).Str("http", ln.Addr().String()).Str("url", httpURL).Msg("starting")
	return nil
}

// openDatabase opens the database (waiting for it), checks the role's powers, and starts
// tracing if it is configured.
func (n *node) openDatabase(ctx context.Context) error {
	cfg := n.cfg
	var err error
	if n.db, err = openDBLimited(ctx, cfg, cfg.DB.ReplyTimeout, n.log); err != nil {
		return startupError(ctx, err)
	}
	n.onClose(func() { n.db.Close() })
	n.checkDBRole(ctx)
	tracer, err := tracing.New(ctx, tracing.Config(cfg.Tracing), tracing.Options{Node: n.id, Role: string(n.role), Version: Version, Log: n.log})
	if err != nil {
		return exitError{code: exitUsage, msg: fmt.Sprintf("conf: %v", err)}
	}
	n.tracer = tracer
	if tracer != nil {
		n.log.Info().Float64("sample_ratio", cfg.Tracing.SampleRatio).Msg("tracing on")
		n.onClose(func() {
			// Last out: the spans of the work stopped are ended by now.
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tracer.Shutdown(sctx); err != nil {
				n.log.Warn().Err(err).Msg("tracing: shutdown")
			}
		})
	}
	return nil
}

// openRegistry connects to ZooKeeper (waiting for it), makes the node's metrics, and
// registers the node through the fenced multi: a node fenced already exits 75.
func (n *node) openRegistry(ctx context.Context) error {
	cfg, role := n.cfg, n.role
	auth, err := registryAuth(cfg)
	if err != nil {
		return err
	}
	if auth == nil {
		n.log.Warn().Str("root", cfg.Registry.Root).
			Msg("registry.auth-file is not set: the zookeeper tree is open, so anyone who reaches zookeeper can stop any node or disturb the leader election; set registry.auth-file (user:password) on every node")
	}
	zkTLS, err := registryTLS(cfg)
	if err != nil {
		return err
	}
	n.client, err = registry.Dial(ctx, registry.Config{Servers: cfg.Registry.Servers, Root: cfg.Registry.Root,
		SessionTimeout: cfg.Registry.SessionTimeout, Auth: auth, TLS: zkTLS, Logger: n.log})
	if errors.Is(err, registry.ErrCredentials) {
		return exitError{code: exitUsage, msg: "zookeeper: " + err.Error()}
	}
	if err != nil {
		return startupError(ctx, fmt.Errorf("zookeeper: %w", err))
	}
	n.metrics = metrics.New(n.id, string(role), Version)
	n.metrics.WatchSession(n.client.Status)
	n.metrics.Counter("zksched_log_messages_dropped_total", "Log messages dropped while the log output was blocked.",
		func() float64 { return float64(n.logOut.Dropped()) })
	n.onClose(func() { n.client.Close() })
	info := registry.NodeInfo{ID: n.id, Role: role, Host: cfg.Node.Host, Port: n.port, PID: os.Getpid(),
		StartTime: n.start, Version: Version, HTTPAddr: n.httpURL, HeartbeatAt: time.Now()}
	if role == registry.RoleWorker {
		info.Groups, info.Slots, info.KillGraceMs = cfg.Worker.Groups, cfg.Worker.Slots, cfg.Worker.KillGrace.Milliseconds()
	}
	n.reg, err = n.client.Register(ctx, info)
	if errors.Is(err, registry.ErrFenced) {
		return exitError{code: exitFenced, msg: err.Error()}
	}
	if err != nil {
		return startupError(ctx, fmt.Errorf("register: %w", err))
	}
	return nil
}

// startMaster starts the master's parts: the master and its sweep, wait timeouts and
// deadlines, the scheduler, the retention, the failover coordinator, the notifications and
// the trace export, under its leader election. It returns how many workflow instances the
// master drives.
func (n *node) startMaster(ctx context.Context) (running func() int, err error) {
	cfg, work := n.cfg, n.work
	n.guard = failover.NewGuard(n.client, n.reg, failover.GuardConfig{KeepRunning: cfg.Registry.OnLost == conf.OnLostKeepRunning, Log: n.log})
	mcfg := master.Config{ID: n.id, PollInterval: cfg.Master.PollInterval, Log: n.log}
	m := master.New(mcfg, n.db, n.guard)
	election, err := n.reg.Elect(ctx)
	if err != nil {
		return nil, startupError(ctx, fmt.Errorf("leader election: %w", err))
	}
	n.onClose(func() { election.Close(context.Background()) })
	n.metrics.Gauge("zksched_leader", "1 while this master leads.", func() float64 { return boolFloat(election.IsLeader()) })
	n.metrics.Gauge("zksched_workflows_owned", "Workflow instances this master drives.", func() float64 { return float64(m.Owned()) })
	coord := failover.NewCoordinator(failover.CoordinatorConfig{ID: n.id, Delay: cfg.Failover.Delay,
		MarkerRetention: cfg.Failover.MarkerRetention, SweepInterval: cfg.Failover.SweepInterval, Log: n.log},
		n.client, election, n.db)
	sched := master.NewScheduler(master.SchedulerConfig{ID: n.id, PollInterval: cfg.Master.PollInterval,
		MisfireThreshold: cfg.Master.MisfireThreshold, Log: n.log}, n.db, n.guard)
	rt := cfg.Retention
	retention := master.NewRetention(master.RetentionConfig{Instances: rt.Instances, Logs: rt.Logs,
		FailoverEvents: rt.FailoverEvents, Fires: rt.Fires, HookDedupeWindow: cmp.Or(n.cfg.API.HookDedupeWindow, 24*time.Hour),
		AssetEvents: rt.AssetEvents, Audit: rt.Audit, Interval: rt.Interval,
		BatchSize: rt.BatchSize, Log: n.log, Purged: n.metrics.Purged}, n.db, election)
	work.Go("master", m.Run)
	work.Go("sweep", master.NewSweep(m).Run)
	work.Go("wait timeouts", master.NewWaitTimeouts(mcfg, n.db, n.guard).Run)
	work.Go("deadlines", master.NewDeadlines(mcfg, n.db, n.guard).Run)
	work.Go("scheduler", sched.Run)
	firer := master.NewAssetFirer(m)
	firer.Started = n.metrics.AssetRunsStarted
	work.Go("asset firer", firer.Run)
	work.Go("retention", retention.Run)
	work.Go("failover coordinator", coord.Run)
	work.Go("leadership log", func(ctx context.Context) error { return watchLeadership(ctx, election, n.log) })
	work.Go("pool limits", func(ctx context.Context) error { return master.SetPoolLimits(ctx, n.db, cfg.Pools, n.log) })
	work.Go("tracing setting", func(ctx context.Context) error {
		var t dao.TracingSetting
		if cfg.Tracing.Enabled {
			t.SampleRatio = cfg.Tracing.SampleRatio
		}
		return storeSetting(ctx, n.db, dao.SettingTracing, t, n.log)
	})
	work.Go("notify defaults", func(ctx context.Context) error {
		return master.SetNotifyDefault(ctx, n.db, notifyDefault(cfg.Notify.Default), n.log)
	})
	work.Go("notifications", n.notifySender().Run)
	if n.tracer != nil {
		export := master.NewTraceExport(master.TraceExportConfig{PollInterval: cfg.Master.PollInterval, Log: n.log}, n.db, n.tracer)
		work.Go("trace export", export.Run)
	}
	work.Go("cluster metrics", func(ctx context.Context) error {
		return n.metrics.RunClusterCounts(ctx, n.db, n.client, 15*time.Second, n.log)
	})
	return m.Owned, nil
}

// notifySender is the master's sender of notifications, by webhook and by email.
func (n *node) notifySender() *notify.Sender {
	cfg := n.cfg
	var mailer notify.Mailer
	if e := cfg.Notify.Email; e.Host != "" {
		var password string
		if e.PasswordEnv != "" {
			password = os.Getenv(e.PasswordEnv)
		}
		mailer = notify.NewMailer(notify.SMTP{Host: e.Host, Port: e.Port, From: e.From, Username: e.Username,
			Password: password, StartTLS: e.StartTLS, Timeout: cfg.Notify.Timeout})
	}
	return notify.NewSender(notify.Config{MaxAttempts: cfg.Notify.MaxAttempts, Timeout: cfg.Notify.Timeout,
		Backoff: cfg.Notify.Backoff, MaxBackoff: cfg.Notify.MaxBackoff, PublicURL: cfg.API.PublicURL,
		PollInterval: cfg.Master.PollInterval, WebhookEnvPattern: cfg.Notify.WebhookEnvPattern,
		AllowPrivateTargets: cfg.Notify.AllowPrivateTargets, Mailer: mailer, Log: n.log, Counted: n.metrics.Notified}, n.db)
}

// startWorker starts the worker (and its view of its peers, when the spread is on), its
// shell tasks in cgroups of their own where it may make them. It returns how many task
// attempts the worker runs.
func (n *node) startWorker() (running func() int, err error) {
	cfg, work := n.cfg, n.work
	taskCgroup, err := executor.TaskCgroupParent(cfg.Worker.TaskCgroup)
	switch {
	case errors.Is(err, executor.ErrNoTaskCgroup):
		n.log.Warn().Err(err).Msg("shell tasks run without cgroups: each supervisor kills its task's descendants as a subreaper")
	case err != nil:
		return nil, fmt.Errorf("worker.task-cgroup: %w", err)
	case taskCgroup != "":
		n.log.Info().Str("cgroup", taskCgroup).Msg("shell task attempts get cgroups of their own")
	}
	providers := n.llmProviders()
	var w *worker.Worker
	n.guard = failover.NewGuard(n.client, n.reg, failover.GuardConfig{KeepRunning: cfg.Registry.OnLost == conf.OnLostKeepRunning,
		OnLost: func() { w.Interrupt() }, Log: n.log})
	shell := n.shell
	shell.KillGrace, shell.Cgroup = cfg.Worker.KillGrace, taskCgroup
	shell.ParentStopLimit = min(cfg.Registry.SessionTimeout, n.client.SessionTimeout())
	var peers worker.Peers // none: the spread is off
	if cfg.Worker.SpreadWait > 0 {
		p := n.client.NewPeers(n.id, cfg.Worker.Groups)
		work.Go("peers", p.Run)
		peers = p
	}
	w = worker.New(worker.Config{ID: n.id, Groups: cfg.Worker.Groups, Slots: cfg.Worker.Slots,
		PollInterval: cfg.Worker.PollInterval, ShutdownTimeout: cfg.Worker.ShutdownTimeout,
		LogLimit: cfg.Worker.LogLimit, Log: n.log, Events: n.metrics, Secrets: n.secrets, Tracer: n.tracer,
		Peers: peers, SpreadWait: cfg.Worker.SpreadWait, OutputLimit: cfg.Worker.OutputLimit, OutputLimitMax: cfg.Worker.OutputLimitMax}, n.db, n.guard,
		executor.Set{"noop": executor.Noop{}, "shell": shell,
			"llm": executor.LLM{Providers: providers}, "agent": executor.Agent{Providers: providers, Shell: shell, Events: n.metrics, HTTP: executor.HTTPTools{
				Allow: cfg.Worker.HTTPTools.Allow, ResponseLimit: cfg.Worker.HTTPTools.ResponseLimit,
				Client: notify.OutboundClient(cfg.Worker.HTTPTools.Timeout, cfg.Worker.HTTPTools.AllowPrivateTargets)}},
			"sensor": executor.Sensor{Client: notify.OutboundClient(executor.CheckTimeout, cfg.Worker.HTTPTools.AllowPrivateTargets),
				Env: shell.BaseEnv, Events: n.metrics}})
	n.metrics.Gauge("zksched_tasks_running", "Task attempts running on this worker.", func() float64 { return float64(w.Running()) })
	n.metrics.Gauge("zksched_task_results_recording", "Task attempts whose run has ended and whose result is being recorded.",
		func() float64 { return float64(w.Recording()) })
	names := slices.Sorted(maps.Keys(cfg.LLM.Providers))
	work.Go("provider names", func(ctx context.Context) error {
		return storeSetting(ctx, n.db, dao.SettingProvidersPrefix+fmt.Sprintf("%s:%d", cfg.Node.Host, n.port), names, n.log)
	})
	work.Go("worker", w.Run)
	return w.Running, nil
}

// storeSetting stores a cluster setting a node's config makes (see dao.SettingPut), retrying
// with a backoff from 1 s up to 30 s until it succeeds or ctx ends: the schema may not be
// migrated yet when the node starts. It returns nil either way: the node goes on, and the
// command line reads what was stored before.
func storeSetting(ctx context.Context, db *dao.DB, name string, value any, log zerolog.Logger) error {
	err := retry.Do(ctx, clockwork.NewRealClock(), retry.Policy{Initial: time.Second, Max: 30 * time.Second},
		func(ctx context.Context) error { return db.SettingPut(ctx, name, value) },
		func(err error, _ int, wait time.Duration) {
			log.Warn().Err(err).Str("setting", name).Dur("retry_in", wait).Msg("could not store a cluster setting; retrying")
		})
	if err == nil {
		log.Info().Str("setting", name).Interface("value", value).Msg("cluster setting stored")
	}
	return nil
}

// stop runs the node until a signal, then stops it gracefully: the work first, handing back
// what it holds, then the registration. A part of the work that fails ends the node with its
// error; the guard ends it at once, with exit 75, if the node learns it was fenced, before or
// during the stop.
func (n *node) stop(ctx context.Context) error {
	work, watch := n.work, n.watch
	// Only the guard ends the watch early: the node was fenced, and the leader has given this
	// identity's work to others.
	select {
	case <-watch.Ended():
		fencedExit(n.log, n.logOut, watch.Wait())
	case <-work.Ended():
		return fmt.Errorf("%s stopped: %w", n.role, work.Wait())
	case <-ctx.Done():
	}
	n.log.Info().Msg("signal received: stopping gracefully")
	stopped := make(chan error, 1)
	go func() { stopped <- work.Stop() }()
	select {
	case <-stopped:
	case <-watch.Ended():
		fencedExit(n.log, n.logOut, fmt.Errorf("during the graceful stop: %w", watch.Wait()))
	}
	// The work is handed back; now leave the registry, so the leader's failover finds nothing.
	// The guard still runs: a node that learns it was fenced meanwhile exits 75.
	deregistered := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		deregistered <- n.reg.Close(cctx)
	}()
	select {
	case err := <-deregistered:
		if err != nil {
			n.log.Warn().Err(err).Msg("deregister")
		}
	case <-watch.Ended():
		fencedExit(n.log, n.logOut, fmt.Errorf("while deregistering: %w", watch.Wait()))
	}
	watch.Stop()
	n.log.Info().Msg("stopped")
	return nil
}

// taskIsolation prepares what keeps a worker's secrets from its tasks: the worker made
// non-dumpable, the shell tasks' environment (the allow-list and worker.task-env, never a
// secret variable), their user (worker.task-user) and the secret values masked in what is
// stored of tasks. A task user that cannot be used is a configuration error.
func (n *node) taskIsolation() (executor.Shell, []string, error) {
	cfg := n.cfg
	if err := executor.ProtectFromTasks(); err != nil {
		return executor.Shell{}, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return executor.Shell{}, nil, err
	}
	shell := executor.Shell{Self: faultinject.Supervisor(self), BaseEnv: executor.TaskEnv(os.Environ(),
		append(slices.Clone(executor.DefaultTaskEnv), cfg.Worker.TaskEnv...), cfg.SecretEnvNames())}
	if shell.User, err = taskUser(cfg); err != nil {
		return executor.Shell{}, nil, err
	}
	switch u := shell.User; {
	case u != nil:
		n.log.Info().Str("user", u.Name).Uint32("uid", u.UID).Str("home", u.Home).Msg("shell tasks run as the task user")
	case os.Geteuid() == 0:
		n.log.Warn().Msg("worker.allow-root-tasks: shell tasks run as root, like the worker: set worker.task-user so that they cannot read its config and secrets nor own the machine")
	}
	secrets, err := secretValues(cfg)
	if err != nil {
		return executor.Shell{}, nil, err
	}
	return shell, secrets, nil
}

// taskUser returns the user a worker's shell tasks run as (worker.task-user), nil for the
// worker's own. A task user that cannot be used, or none while the worker runs as root
// without worker.allow-root-tasks, is a configuration error.
func taskUser(cfg *conf.Config) (*executor.TaskUser, error) {
	if name := cfg.Worker.TaskUser; name != "" {
		u, err := executor.LookupTaskUser(name)
		if err == nil {
			err = u.CheckDirs(u.Home, os.TempDir())
		}
		if err != nil {
			return nil, exitError{code: exitUsage, msg: fmt.Sprintf("conf: worker.task-user: %v", err)}
		}
		return u, nil
	}
	if os.Geteuid() == 0 && !cfg.Worker.AllowRootTasks {
		return nil, exitError{code: exitUsage, msg: "conf: worker.task-user: empty while the worker runs as root, " +
			"so every shell task would run as root and anyone who may submit a workflow would own this machine; set worker.task-user " +
			"to an unprivileged user (useradd --system --create-home zksched-task), or worker.allow-root-tasks: true where tasks are as trusted as root"}
	}
	return nil, nil
}

// secretValues are the values of the worker's secrets (see conf.Config.SecretValues), masked
// in what is stored of its tasks.
func secretValues(cfg *conf.Config) ([]string, error) {
	secrets, err := cfg.SecretValues(os.Getenv)
	if err != nil {
		return nil, exitError{code: exitUsage, msg: fmt.Sprintf("conf: %v", err)}
	}
	return secrets, nil
}

// llmProviders returns the worker's model providers, their requests-per-minute and
// tokens-per-minute kept in the database for the whole cluster. A provider that cannot be
// used (its API key variable unset) is reported now and fails only the tasks that name it.
func (n *node) llmProviders() *llm.Providers {
	cfg := make(map[string]llm.Provider, len(n.cfg.LLM.Providers))
	for name, p := range n.cfg.LLM.Providers {
		cfg[name] = llm.Provider(p)
	}
	providers := llm.NewProviders(cfg, llm.Options{Log: n.log, Limits: n.db,
		AdmissionWaited: n.metrics.AdmissionWaited})
	for _, name := range providers.Names() {
		if c, err := providers.Get(name); err != nil {
			n.log.Warn().Err(err).Str("provider", name).Msg("llm provider unusable; its tasks will fail")
		} else {
			n.log.Info().Str("provider", name).Str("type", n.cfg.LLM.Providers[name].Type).Str("model", c.Model()).Msg("llm provider ready")
		}
	}
	return providers
}

// errStartStopped is what a step of the start returns when a signal stopped the start: the
// steps after it are not taken, and runNode exits cleanly.
var errStartStopped = errors.New("the start was stopped by a signal")

// startupError reports a failure to start; an interrupted start is errStartStopped.
func startupError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errStartStopped
	}
	return err
}

// startOutcome is the exit of a start that failed: none for one a signal stopped, nor after
// --check-config found the config good.
func startOutcome(err error) error {
	if errors.Is(err, errStartStopped) || errors.Is(err, errConfigChecked) {
		return nil
	}
	return err
}

// watchLeadership logs this master's changes of leadership until ctx ends.
func watchLeadership(ctx context.Context, e *registry.Election, log zerolog.Logger) error {
	was := false
	for {
		ch := e.Changed()
		if is := e.IsLeader(); is != was {
			was = is
			if is {
				log.Info().Msg("became the leader")
			} else {
				log.Info().Str("leader", e.Leader()).Msg("no longer the leader")
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

// httpHandler is what the node serves on its port: on a master the API, the web UI,
// /metrics, /healthz and /readyz (package api); on a worker the last three.
func (n *node) httpHandler() (http.Handler, error) {
	if n.role == registry.RoleWorker {
		return api.NodeHandler(n.id, string(n.role), n.readiness, n.metrics.Handler()), nil
	}
	a := n.cfg.API
	srv, err := api.New(api.Config{NodeID: n.id, Version: Version, Token: n.token, UsersFile: a.UsersFile,
		AllowUnauthenticated: a.AllowUnauthenticated,
		Hosts:                ownHosts(n.cfg, n.ln), CookieSecure: a.CookieSecure, Cluster: n.client, Ready: n.readiness,
		PatroniURLs: n.cfg.DB.PatroniURLs, InstanceRetention: n.cfg.Retention.Instances, Metrics: n.metrics.Handler(),
		WebhookEnvPattern: n.cfg.Notify.WebhookEnvPattern, HookSecretEnvPattern: a.HookSecretEnvPattern,
		HookBodyLimit: int64(a.HookBodyLimit), HookDedupeWindow: a.HookDedupeWindow, PublicURL: a.PublicURL,
		HookDelivered: n.metrics.HookDelivered,
		AssetEmitted:  n.metrics.AssetEmitted,
		RateLimit:     float64(a.RateLimit), RateBurst: a.RateBurst, HeavyReads: a.HeavyReads, HeavyReadWait: a.HeavyReadWait, Log: n.log}, n.db)
	if err != nil {
		return nil, exitError{code: exitUsage, msg: fmt.Sprintf("conf: api: %v", err)}
	}
	n.metrics.Counter("zksched_api_auth_failures_total", "Wrong tokens (bearer or login form) this master refused.",
		func() float64 { return float64(srv.AuthFailures()) })
	n.metrics.Counter("zksched_api_auth_rate_limited_total", "Wrong credentials this master refused with 429: their address had failed too often.",
		func() float64 { return float64(srv.AuthRateLimited()) })
	n.metrics.Counter("zksched_api_audit_refusals_unrecorded_total", "Refused changes this master could not record in the audit trail (each logged at error level).",
		func() float64 { return float64(srv.RefusalsUnrecorded()) })
	n.metrics.Counter("zksched_api_rate_limited_total", "Requests this master refused with 429: their user (or address) was over api.rate-limit.",
		func() float64 { return float64(srv.RateLimited()) })
	n.metrics.Counter("zksched_api_busy_total", "Heavy reads this master refused with 503: no place among api.heavy-reads came free within api.heavy-read-wait.",
		func() float64 { return float64(srv.Busy()) })
	return srv, nil
}

// readiness is /readyz: the node may take work when it is registered under a live session.
func (n *node) readiness() api.Readiness {
	details := map[string]any{"zookeeper": n.client.Status().State.String(), "registration": n.reg.State().Kind.String()}
	n.dbRoleDetails(details)
	return api.Readiness{Ready: n.guard.Active(), Details: details}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// notifyDefault is notify.default as the rows of notify_rule.
func notifyDefault(entries []conf.NotifyEntry) []dao.NotifyRule {
	list := make([]workflow.Notify, len(entries))
	for i, e := range entries {
		list[i] = workflow.Notify{On: e.EventList(), WebhookURLEnv: e.WebhookURLEnv, Slack: e.Slack, Email: e.Email}
	}
	return lifecycle.NotifyRules(list)
}
