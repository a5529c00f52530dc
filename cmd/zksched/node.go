package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/failover"
	"github.com/zksched/zksched/master"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
)

func runMaster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runNode(ctx, registry.RoleMaster, args, stdout, stderr)
}

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runNode(ctx, registry.RoleWorker, args, stdout, stderr)
}

// node is one running master or worker process.
type node struct {
	cfg    *conf.Config
	role   registry.Role
	id     string
	log    zerolog.Logger
	db     *dao.DB
	client *registry.Client
	reg    *registry.Registration
	guard  *failover.Guard
}

// runNode starts a master or a worker: it binds its HTTP port (part of its identity), waits for
// PostgreSQL and ZooKeeper (retrying with backoff while either is down), registers through the
// fenced multi, and runs until a signal (graceful stop, exit 0) or until it is fenced (exit 75).
func runNode(ctx context.Context, role registry.Role, args []string, stdout, stderr io.Writer) error {
	fs := newFlags(string(role), stdout)
	config := configFlag(fs)
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
	port := cfg.Master.Port
	if role == registry.RoleWorker {
		port = cfg.Worker.Port
	}
	start := time.Now()
	n := &node{cfg: cfg, role: role, id: registry.Identity(cfg.Node.Host, port, start)}
	n.log = newLogger(cfg.Log, stderr).With().Str("node", n.id).Str("role", string(role)).Logger()

	// Two processes on one host and port would be told apart only by their start time: bind
	// first, so a second one fails here instead of running beside the first.
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Node.Host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("http port: %w", err)
	}
	defer ln.Close()
	n.log.Info().Str("version", Version).Int("pid", os.Getpid()).Str("http", ln.Addr().String()).Msg("starting")

	if n.db, err = openDB(ctx, cfg, n.log); err != nil {
		return startupError(ctx, err)
	}
	defer n.db.Close()
	n.client, err = registry.Dial(ctx, registry.Config{Servers: cfg.Registry.Servers, Root: cfg.Registry.Root,
		SessionTimeout: cfg.Registry.SessionTimeout, Logger: n.log})
	if err != nil {
		return startupError(ctx, fmt.Errorf("zookeeper: %w", err))
	}
	defer n.client.Close()
	info := registry.NodeInfo{ID: n.id, Role: role, Host: cfg.Node.Host, Port: port, PID: os.Getpid(),
		StartTime: start, Version: Version, HTTPAddr: "http://" + ln.Addr().String(), HeartbeatAt: time.Now()}
	if role == registry.RoleWorker {
		info.Groups, info.Slots = cfg.Worker.Groups, cfg.Worker.Slots
	}
	n.reg, err = n.client.Register(ctx, info)
	if errors.Is(err, registry.ErrFenced) {
		return exitError{code: exitFenced, msg: err.Error()}
	}
	if err != nil {
		return startupError(ctx, fmt.Errorf("register: %w", err))
	}

	keepRunning := cfg.Registry.OnLost == conf.OnLostKeepRunning
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	runDone := make(chan error, 1)
	var running func() int
	switch role {
	case registry.RoleMaster:
		n.guard = failover.NewGuard(n.client, n.reg, failover.GuardConfig{KeepRunning: keepRunning, Log: n.log})
		m := master.New(master.Config{ID: n.id, PollInterval: cfg.Master.PollInterval, Log: n.log}, n.db, n.guard)
		running = m.Owned
		election, err := n.reg.Elect(ctx)
		if err != nil {
			return startupError(ctx, fmt.Errorf("leader election: %w", err))
		}
		defer election.Close(context.Background())
		go watchLeadership(runCtx, election, n.log)
		coord := failover.NewCoordinator(failover.CoordinatorConfig{ID: n.id, Delay: cfg.Failover.Delay,
			MarkerRetention: cfg.Failover.MarkerRetention, SweepInterval: cfg.Failover.SweepInterval, Log: n.log},
			n.client, election, n.db)
		go coord.Run(runCtx)
		go func() { runDone <- m.Run(runCtx) }()
	case registry.RoleWorker:
		self, err := os.Executable()
		if err != nil {
			return err
		}
		var w *worker.Worker
		n.guard = failover.NewGuard(n.client, n.reg, failover.GuardConfig{KeepRunning: keepRunning,
			OnLost: func() { w.Interrupt() }, Log: n.log})
		w = worker.New(worker.Config{ID: n.id, Groups: cfg.Worker.Groups, Slots: cfg.Worker.Slots,
			PollInterval: cfg.Worker.PollInterval, ShutdownTimeout: cfg.Worker.ShutdownTimeout,
			LogLimit: cfg.Worker.LogLimit, Log: n.log}, n.db, n.guard,
			executor.Set{"noop": executor.Noop{}, "shell": executor.Shell{Self: self, KillGrace: cfg.Worker.KillGrace,
				ParentStopLimit: min(cfg.Registry.SessionTimeout, n.client.SessionTimeout())}})
		running = w.Running
		go func() { runDone <- w.Run(runCtx) }()
	}
	guardDone := make(chan error, 1)
	go func() { guardDone <- n.guard.Run(runCtx) }()
	go n.refreshInfo(runCtx, running)
	srv := &http.Server{Handler: n.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error().Err(err).Msg("http server stopped")
		}
	}()
	defer srv.Close()

	select {
	case err := <-guardDone:
		// Fenced: the leader has given this identity's work to others. Exit at once; the
		// supervisors of running tasks kill their process groups when this process is gone.
		return exitError{code: exitFenced, msg: fmt.Sprintf("fenced: %v", err)}
	case err := <-runDone:
		return fmt.Errorf("%s stopped: %w", role, err)
	case <-ctx.Done():
	}
	n.log.Info().Msg("signal received: stopping gracefully")
	stopRun()
	select {
	case <-runDone:
	case err := <-guardDone:
		if err != nil {
			return exitError{code: exitFenced, msg: fmt.Sprintf("fenced during shutdown: %v", err)}
		}
		<-runDone
	}
	// The work is handed back; now leave the registry, so the leader's failover finds nothing.
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.reg.Close(cctx); err != nil {
		n.log.Warn().Err(err).Msg("deregister")
	}
	n.log.Info().Msg("stopped")
	return nil
}

// startupError reports a failure to start; an interrupted start is a clean exit.
func startupError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func watchLeadership(ctx context.Context, e *registry.Election, log zerolog.Logger) {
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
			return
		case <-ch:
		}
	}
}

// refreshInfo keeps the node's znode data current for inspection (never for liveness).
func (n *node) refreshInfo(ctx context.Context, running func() int) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		n.reg.Update(func(i *registry.NodeInfo) {
			i.Running, i.Load, i.HeartbeatAt = running(), loadAverage(), time.Now()
		})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// httpHandler serves /healthz (the process is up) and /readyz (it may take work: registered
// under a live session).
func (n *node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"node": n.id, "role": n.role, "status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		st := n.client.Status()
		body := map[string]any{"node": n.id, "role": n.role, "zookeeper": st.State.String(),
			"registration": n.reg.State().Kind.String(), "ready": n.guard.Active()}
		code := http.StatusOK
		if !n.guard.Active() {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, body)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
