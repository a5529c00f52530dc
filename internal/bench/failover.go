package bench

// The failover mode: a steady load on a cluster of real processes while one worker is killed
// with kill -9. It measures, from the database, how long the killed worker's tasks took to run
// again elsewhere, and fails the run when the failover broke a promise: a workflow lost, a
// result committed twice, or two attempts of one task running at once.
//
// Unlike the in-process modes it cannot run its nodes in process: kill -9 needs a process to
// kill and ZooKeeper to see its session expire. So it starts the zksched binary as masters and
// workers (one and two by default) as a procCluster, defined here and shared with the memory
// mode: on a ZooKeeper root of its own, beside the configured one, and on the run's schema,
// with a config file in a temporary directory; all of it is removed at the end, and the nodes
// are stopped, whether the run passes, fails or is interrupted.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
	"go.yaml.in/yaml/v3"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/workflow"
)

// exitFenced is the exit code of a node that finds itself fenced (see cmd/zksched).
const exitFenced = 75

// failoverKillGrace is the workers' worker.kill-grace: short, so that a failover.delay of
// 2 s passes validation (at least kill grace + conf.KillGraceMargin).
const failoverKillGrace = 500 * time.Millisecond

// FailoverFigures are what the failover mode adds to a [Summary]; their JSON is inlined in the
// summary's.
type FailoverFigures struct {
	// KilledWorker is the identity of the worker killed with kill -9, KilledAt when (by the
	// database's clock, which every time below is measured against).
	KilledWorker string    `json:"killed_worker"`
	KilledAt     time.Time `json:"killed_at"`
	// TasksFailedOver counts the killed worker's attempts that ended failed_over: the tasks it
	// was running when it died. TasksRequeued is what the leader's failover_event row says.
	TasksFailedOver int `json:"tasks_failed_over"`
	TasksRequeued   int `json:"tasks_requeued"`
	// FailoverMsMin and FailoverMsMax bound, over the failed-over tasks, the time from the
	// kill to the start of the task's next attempt on another worker (percentiles in the
	// summary's p50_ms, p95_ms, p99_ms).
	FailoverMsMin float64 `json:"failover_ms_min"`
	FailoverMsMax float64 `json:"failover_ms_max"`
	// LostMs is from the kill to the leader seeing the worker's session expire; FencedMs to
	// the leader fencing it (LostMs + failover.delay, give or take a sweep).
	LostMs   float64 `json:"lost_ms"`
	FencedMs float64 `json:"fenced_ms"`
	// Lost counts workflow instances that did not succeed, or whose task has no committed
	// result; CommittedTwice tasks with more than one succeeded attempt; Overlaps pairs of
	// attempts of one task that ran at the same time (an attempt of the killed worker counts
	// as ending at the kill). Each must be 0.
	Lost           int `json:"lost"`
	CommittedTwice int `json:"committed_twice"`
	Overlaps       int `json:"overlaps"`
	// Problems lists what went wrong (the first 20), empty when the run passed.
	Problems []string `json:"problems,omitempty"`

	Rate             float64 `json:"rate"`
	TaskSleepMs      float64 `json:"task_sleep_ms"`
	SessionTimeoutMs float64 `json:"session_timeout_ms"`
	FailoverDelayMs  float64 `json:"failover_delay_ms"`
	// ZKRoot and Schema are where the run ran; both are gone when it returns.
	ZKRoot string `json:"zk_root"`
	Schema string `json:"schema"`
}

// benchNode is one zksched process of the run.
type benchNode struct {
	name    string
	role    registry.Role
	cmd     *exec.Cmd
	logPath string
	// port is the node's HTTP port, where it serves /metrics.
	port int
	// id is the node's identity, known once it has registered.
	id   string
	done chan struct{}
}

func (n *benchNode) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

func (n *benchNode) String() string {
	if n.id == "" {
		return n.name
	}
	return n.name + " (" + n.id + ")"
}

// procCluster is the zksched processes of a run and what they run on: a ZooKeeper root of
// the run's own, the run's schema, and a config file in a temporary directory.
type procCluster struct {
	o      Options
	db     *dao.DB
	mode   string
	start  time.Time
	dir    string
	config string
	root   string
	schema string
	reg    *registry.Client
	nodes  []*benchNode
	// victim is a node killed on purpose, whose exit checkAlive accepts; nil until then.
	victim *benchNode
}

// startCluster starts o.Masters masters and o.Workers workers for a run of mode on db, the
// run's scratch schema, and waits until every one is registered and a master leads. The
// cluster's close must be called whatever it returns, error or not.
func startCluster(ctx context.Context, db *dao.DB, o Options, mode string) (c *procCluster, err error) {
	c = &procCluster{o: o, db: db, mode: mode, start: time.Now()}
	if err := db.SQL().GetContext(ctx, &c.schema, "SELECT current_schema()"); err != nil {
		return c, fmt.Errorf("read the run's schema: %w", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	c.root = strings.TrimSuffix(o.Root, "/") + "-bench-" + hex.EncodeToString(b)
	if c.dir, err = os.MkdirTemp("", "zksched-bench-"+mode+"-"); err != nil {
		return c, err
	}
	if err := c.writeConfig(); err != nil {
		return c, err
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c.reg, err = registry.Dial(dctx, registry.Config{Servers: o.ZooKeeper, Root: c.root})
	cancel()
	if err != nil {
		c.reg = nil
		return c, fmt.Errorf("zookeeper %v: %w (is ZooKeeper running?)", o.ZooKeeper, err)
	}
	for i := range o.Masters {
		if err := c.startNode(fmt.Sprintf("master-%d", i+1), registry.RoleMaster); err != nil {
			return c, err
		}
	}
	for i := range o.Workers {
		if err := c.startNode(fmt.Sprintf("worker-%d", i+1), registry.RoleWorker); err != nil {
			return c, err
		}
	}
	return c, c.waitRegistered(ctx)
}

// close stops the nodes and removes the ZooKeeper root and the temporary directory; with
// logTails it first prints the end of every node's log, for a run that failed.
func (c *procCluster) close(logTails bool) {
	if logTails {
		c.printLogTails()
	}
	if c.reg != nil {
		c.reg.Close()
	}
	c.stopNodes()
	c.cleanZooKeeper()
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// withProcDefaults fills the defaults of the modes that run processes: ZkschedBinary as
// the nodes, and the ZooKeeper of a default config.
func withProcDefaults(o *Options) error {
	if o.Binary == "" {
		bin, err := ZkschedBinary()
		if err != nil {
			return err
		}
		o.Binary = bin
	}
	if len(o.ZooKeeper) == 0 {
		o.ZooKeeper = []string{"127.0.0.1:2181"}
	}
	if o.Root == "" {
		o.Root = "/zksched"
	}
	return nil
}

// failoverRun is the state of one run of the failover mode.
type failoverRun struct {
	*procCluster
	// after is the newest workflow instance id before the load (dao.WorkflowLastID).
	after int64
	// killedAt is when the victim was killed, by the database's clock.
	killedAt time.Time
	// lastPrint is when the last progress line was printed.
	lastPrint time.Time
}

// failover runs the failover mode on db, the run's scratch schema.
func failover(ctx context.Context, db *dao.DB, o Options) (*Summary, error) {
	return runOnProcesses(ctx, db, o, "failover", nil, checkFailoverOptions,
		func(c *procCluster, spec *workflow.Spec, v int) (*Summary, error) {
			r := &failoverRun{procCluster: c}
			var err error
			if r.after, err = db.WorkflowLastID(ctx); err != nil {
				return nil, err
			}
			start, n, err := r.load(ctx, spec, v)
			if err != nil {
				return nil, err
			}
			if err := r.waitFinished(ctx, start, n); err != nil {
				return nil, err
			}
			took := time.Since(start)
			return r.summarize(ctx, start, took, n)
		})
}

// runOnProcesses runs a mode on real processes (mode names it in errors and the ZooKeeper
// root): it fills and checks o with check, starts the cluster, defines the mode's workflow
// spec (nil: one shell task that sleeps o.TaskSleep, named for the mode) and hands them to
// run. The
// cluster is closed when run returns; the nodes' logs are printed for a failure, not after
// a verdict (it has a summary) or an interruption: they say nothing then.
func runOnProcesses(ctx context.Context, db *dao.DB, o Options, mode string, spec *workflow.Spec, check func(*Options) error,
	run func(c *procCluster, spec *workflow.Spec, version int) (*Summary, error)) (s *Summary, err error) {
	if err := check(&o); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%s: interrupted: %w", mode, ctx.Err())
		}
	}()
	c, err := startCluster(ctx, db, o, mode)
	defer func() { c.close(err != nil && s == nil && ctx.Err() == nil) }()
	if err != nil {
		return nil, err
	}
	if spec == nil {
		spec = sleepSpec(mode, o.TaskSleep)
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	v, err := define(ctx, db, spec)
	if err != nil {
		return nil, err
	}
	return run(c, spec, v)
}

// checkFailoverOptions fills the defaults of the failover mode and refuses what cannot run.
func checkFailoverOptions(o *Options) error {
	return checkProcOptions(o, "failover", func(check func(bad bool, format string, args ...any)) {
		check(o.Masters < 1, "--masters %d: want at least 1", o.Masters)
		check(o.Workers < 2, "--workers %d: want at least 2, as one is killed and another must take over its tasks", o.Workers)
		check(o.Slots < 1, "--slots %d: want at least 1", o.Slots)
		check(o.Rate <= 0, "--rate %g: want a positive rate", o.Rate)
		check(o.TaskSleep <= 0, "--sleep %v: want a positive duration", o.TaskSleep)
		check(o.KillAfter <= 0, "--kill-after %v: want a positive duration", o.KillAfter)
		check(o.Duration <= o.KillAfter, "--duration %v: want it longer than --kill-after %v, so the load goes on across the failover", o.Duration, o.KillAfter)
	})
}

// checkProcOptions fills the defaults of a mode that runs processes (mode names it in the
// error) and refuses what cannot run: what checks finds, then the session and failover
// timing the nodes of either mode need. check records a problem when bad is true.
func checkProcOptions(o *Options, mode string, checks func(check func(bad bool, format string, args ...any))) error {
	if err := withProcDefaults(o); err != nil {
		return err
	}
	var problems []string
	check := func(bad bool, format string, args ...any) {
		if bad {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	checks(check)
	check(o.SessionTimeout < time.Second, "--session-timeout %v: want at least 1s", o.SessionTimeout)
	check(o.FailoverDelay < failoverKillGrace+conf.KillGraceMargin,
		"--failover-delay %v: want at least %v (the workers' kill grace %v + %v)", o.FailoverDelay,
		failoverKillGrace+conf.KillGraceMargin, failoverKillGrace, conf.KillGraceMargin)
	if len(problems) > 0 {
		return fmt.Errorf("%s: %s", mode, strings.Join(problems, "; "))
	}
	return nil
}

// writeConfig writes the nodes' config file: the run's ZooKeeper root and schema, the
// failover timing, and nothing else the nodes do not need. Each node gets its port from
// ZKSCHED_MASTER_PORT or ZKSCHED_WORKER_PORT.
func (r *procCluster) writeConfig() error {
	u, err := url.Parse(r.o.DSN)
	if err != nil {
		return fmt.Errorf("database dsn: %w", err)
	}
	q := u.Query()
	q.Set("search_path", r.schema)
	u.RawQuery = q.Encode()
	cfg := map[string]any{
		"registry": map[string]any{"servers": r.o.ZooKeeper, "root": r.root,
			"session-timeout": r.o.SessionTimeout.String(), "on-lost": "stop"},
		"db": map[string]any{"dsn": u.String()},
		// The masters keep the token they generate in the run's folder, not in the user's.
		"node": map[string]any{"host": "127.0.0.1", "state-dir": r.dir},
		// GORACE reaches the task supervisors only through task-env: a race-built binary's
		// supervisor (the tests') would otherwise sleep 1 s at its exit, after every task.
		// The run's tasks are its own sleeps, so a worker run as root may run them as root.
		"worker": map[string]any{"slots": r.o.Slots, "kill-grace": failoverKillGrace.String(),
			"shutdown-timeout": "5s", "task-env": []string{"GORACE"}, "allow-root-tasks": true},
		// The sweep finds a lost node whose watch event was missed; short, as the run is.
		"failover": map[string]any{"delay": r.o.FailoverDelay.String(), "sweep-interval": "5s"},
		"log":      map[string]any{"level": "info", "format": "json"},
	}
	if r.o.usersFile != "" {
		cfg["api"] = map[string]any{"users-file": r.o.usersFile}
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	r.config = filepath.Join(r.dir, "zksched.yaml")
	header := "# written by zksched-bench " + r.mode + " for one run; removed when the run ends\n"
	return os.WriteFile(r.config, append([]byte(header), raw...), 0o600)
}

// ZkschedBinary finds the zksched binary to run as the nodes when none is named: the one
// beside this executable (bin/zksched beside bin/zksched-bench), else the first on PATH.
func ZkschedBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		bin := filepath.Join(filepath.Dir(self), "zksched")
		if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return bin, nil
		}
	}
	if bin, err := exec.LookPath("zksched"); err == nil {
		return bin, nil
	}
	return "", errors.New("no zksched binary beside this one or on PATH: build it (go build -o bin/zksched ./cmd/zksched) or name it with --bin")
}

// startNode starts a master or worker process on a free port, logging to a file of the run.
func (r *procCluster) startNode(name string, role registry.Role) error {
	ports, err := testenv.FreePorts(1)
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	port := ports[0]
	logPath := filepath.Join(r.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.o.Binary, string(role), "--config", r.config)
	// The config file says everything: a ZKSCHED_* variable of this process would beat it.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZKSCHED_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, fmt.Sprintf("ZKSCHED_%s_PORT=%d", strings.ToUpper(string(role)), port))
	cmd.Stdout, cmd.Stderr = f, f
	// A process group of its own keeps a terminal's Ctrl-C for this process, which stops the
	// nodes itself; the death signal stops them if this process dies without doing so.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %s %s: %w", name, r.o.Binary, role, err)
	}
	n := &benchNode{name: name, role: role, cmd: cmd, logPath: logPath, port: port, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(n.done)
	}()
	r.nodes = append(r.nodes, n)
	return nil
}

// waitRegistered waits until every node is registered in ZooKeeper and a master leads, and
// learns each node's identity from its registration (by pid).
func (r *procCluster) waitRegistered(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := r.checkAlive(); err != nil {
			return err
		}
		cl, err := r.reg.Cluster(ctx)
		if err != nil {
			return fmt.Errorf("read the registry: %w", err)
		}
		byPID := map[int]*benchNode{}
		for _, n := range r.nodes {
			byPID[n.cmd.Process.Pid] = n
		}
		for _, e := range append(cl.Masters, cl.Workers...) {
			if e.Info == nil {
				continue
			}
			if n := byPID[e.Info.PID]; n != nil && n.role == e.Info.Role {
				n.id = e.ID
			}
		}
		missing := slices.IndexFunc(r.nodes, func(n *benchNode) bool { return n.id == "" })
		if missing < 0 && cl.Leader != "" {
			if r.o.Progress != nil {
				var names []string
				for _, n := range r.nodes {
					names = append(names, n.String())
				}
				fmt.Fprintf(r.o.Progress, "cluster up in %.1fs: %s; leader %s\n", time.Since(r.start).Seconds(), strings.Join(names, ", "), cl.Leader)
			}
			return nil
		}
		if time.Now().After(deadline) {
			what := "no master leads"
			if missing >= 0 {
				what = r.nodes[missing].name + " is not registered"
			}
			return fmt.Errorf("cluster not ready after 60s: %s (ZooKeeper root %s)", what, r.root)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// checkAlive returns an error if a node other than the victim has exited.
func (r *procCluster) checkAlive() error {
	for _, n := range r.nodes {
		if n == r.victim || !n.exited() {
			continue
		}
		why := ""
		if n.cmd.ProcessState.ExitCode() == exitFenced {
			why = fmt.Sprintf(": it was fenced, having lost its ZooKeeper session; is the machine too loaded for --session-timeout %v?", r.o.SessionTimeout)
		}
		return fmt.Errorf("%s exited during the run (%v)%s; the end of its log:\n%s", n, n.cmd.ProcessState, why, tailFile(n.logPath, 15))
	}
	return nil
}

// load submits single-task workflows at o.Rate for o.Duration and kills a worker o.KillAfter
// into it. When the database falls behind the schedule, the workflows due are created in one
// statement, so the load keeps its rate. It returns when the load started and how many
// workflows it submitted.
func (r *failoverRun) load(ctx context.Context, spec *workflow.Spec, version int) (time.Time, int, error) {
	o := r.o
	total := max(int(o.Duration.Seconds()*o.Rate), 1)
	start := time.Now()
	r.lastPrint = start
	n := 0
	for n < total {
		due := min(int(time.Since(start).Seconds()*o.Rate)+1, total)
		if due > n {
			if err := lifecycle.SubmitMany(ctx, r.db.Queries, lifecycle.Submission{Spec: spec, Version: version}, due-n); err != nil {
				return start, n, err
			}
			n = due
		}
		if r.victim == nil && time.Since(start) >= o.KillAfter {
			if err := r.kill(ctx, start); err != nil {
				return start, n, err
			}
		}
		if err := r.checkAlive(); err != nil {
			return start, n, err
		}
		if err := r.progress(ctx, start, fmt.Sprintf("submitted %d", n)); err != nil {
			return start, n, err
		}
		next := start.Add(time.Duration(float64(n) / o.Rate * float64(time.Second)))
		if err := sleepCtx(ctx, time.Until(next)); err != nil {
			return start, n, err
		}
	}
	if r.victim == nil {
		return start, n, fmt.Errorf("no worker was killed: no task was running on any worker in the %v after --kill-after %v; raise --rate or --sleep",
			o.Duration-o.KillAfter, o.KillAfter)
	}
	return start, n, nil
}

// kill sends SIGKILL to the worker that runs the most tasks, if any runs one.
func (r *failoverRun) kill(ctx context.Context, start time.Time) error {
	running, err := r.running(ctx)
	if err != nil {
		return err
	}
	var victim *benchNode
	for _, n := range r.nodes {
		if n.role == registry.RoleWorker && running[n.id] > 0 && (victim == nil || running[n.id] > running[victim.id]) {
			victim = n
		}
	}
	if victim == nil {
		return nil // nothing to fail over yet; the next submit tries again
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %s: %w", victim, err)
	}
	r.victim = victim
	// Every time the figures compare is the database's; read its clock now that the worker
	// is dead.
	if err := r.db.SQL().GetContext(ctx, &r.killedAt, "SELECT clock_timestamp()"); err != nil {
		return fmt.Errorf("read the database clock: %w", err)
	}
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, "%6.1fs  kill -9 %s, pid %d, running %d task(s)\n",
			time.Since(start).Seconds(), victim, victim.cmd.Process.Pid, running[victim.id])
	}
	return nil
}

// running counts the running task instances by worker identity.
func (r *failoverRun) running(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		Worker string `db:"worker_id"`
		N      int    `db:"n"`
	}
	if err := r.db.SQL().SelectContext(ctx, &rows, `SELECT worker_id, count(*) AS n FROM task_instance
		WHERE state = 'running' AND worker_id IS NOT NULL GROUP BY worker_id`); err != nil {
		return nil, fmt.Errorf("count running tasks: %w", err)
	}
	out := map[string]int{}
	for _, row := range rows {
		out[row.Worker] = row.N
	}
	return out, nil
}

// progress prints a line every 2 s: what, the finished workflows, and the running tasks by
// worker.
func (r *failoverRun) progress(ctx context.Context, start time.Time, what string) error {
	if r.o.Progress == nil || time.Since(r.lastPrint) < 2*time.Second {
		return nil
	}
	r.lastPrint = time.Now()
	finished, err := r.db.WorkflowCountFinished(ctx, "", r.after)
	if err != nil {
		return err
	}
	running, err := r.running(ctx)
	if err != nil {
		return err
	}
	var on []string
	for _, n := range r.nodes {
		if n.role != registry.RoleWorker {
			continue
		}
		s := fmt.Sprintf("%s %d", n.name, running[n.id])
		if n == r.victim {
			s += " (killed)"
		}
		on = append(on, s)
	}
	fmt.Fprintf(r.o.Progress, "%6.1fs  %s, %d finished; running on %s\n",
		time.Since(start).Seconds(), what, finished, strings.Join(on, ", "))
	return nil
}

// waitFinished waits until the n workflows have finished, or gives up after the failover's
// own time plus a minute, leaving the verdict to summarize.
func (r *failoverRun) waitFinished(ctx context.Context, start time.Time, n int) error {
	deadline := time.Now().Add(r.o.SessionTimeout + r.o.FailoverDelay + r.o.TaskSleep + time.Minute)
	for {
		finished, err := r.db.WorkflowCountFinished(ctx, "", r.after)
		if err != nil {
			return err
		}
		if finished >= n {
			if r.o.Progress != nil {
				fmt.Fprintf(r.o.Progress, "%6.1fs  all %d workflows finished\n", time.Since(start).Seconds(), n)
			}
			return nil
		}
		if time.Now().After(deadline) {
			if r.o.Progress != nil {
				fmt.Fprintf(r.o.Progress, "%6.1fs  gave up waiting: %d of %d workflows finished\n", time.Since(start).Seconds(), finished, n)
			}
			return nil
		}
		if err := r.checkAlive(); err != nil {
			return err
		}
		if err := r.progress(ctx, start, fmt.Sprintf("waiting for %d workflows", n)); err != nil {
			return err
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// attemptRow is one attempt of one task of one workflow instance; the task and attempt
// columns are NULL for a workflow instance without them.
type attemptRow struct {
	Workflow      int64      `db:"workflow"`
	WorkflowState string     `db:"workflow_state"`
	Task          *int64     `db:"task"`
	Attempt       *int       `db:"attempt"`
	Worker        *string    `db:"worker_id"`
	StartedAt     *time.Time `db:"started_at"`
	EndedAt       *time.Time `db:"ended_at"`
	Outcome       *string    `db:"outcome"`
}

// summarize reads what happened from the database, judges it and builds the summary; a
// problem makes it return the summary and an error.
func (r *failoverRun) summarize(ctx context.Context, start time.Time, took time.Duration, submitted int) (*Summary, error) {
	var rows []attemptRow
	if err := r.db.SQL().SelectContext(ctx, &rows, `
		SELECT w.id AS workflow, w.state AS workflow_state, t.id AS task, a.attempt, a.worker_id,
			a.started_at, a.ended_at, a.outcome
		FROM workflow_instance w
		LEFT JOIN task_instance t ON t.workflow_instance_id = w.id
		LEFT JOIN task_attempt a ON a.task_instance_id = t.id
		ORDER BY w.id, t.id, a.attempt`); err != nil {
		return nil, fmt.Errorf("read the attempts: %w", err)
	}
	events, err := r.db.FailoverEventList(ctx, 100)
	if err != nil {
		return nil, err
	}
	lat, err := r.db.WorkflowLatency(ctx, "", r.after)
	if err != nil {
		return nil, err
	}
	f, failoverMs, tasks, problems := r.judge(rows, events, submitted)
	f.Rate, f.TaskSleepMs = r.o.Rate, ms(r.o.TaskSleep)
	f.SessionTimeoutMs, f.FailoverDelayMs = ms(r.o.SessionTimeout), ms(r.o.FailoverDelay)
	f.ZKRoot, f.Schema = r.root, r.schema
	s := &Summary{Mode: "failover", Tasks: tasks, Workflows: submitted, Seconds: took.Seconds(),
		TasksPerSec: float64(tasks) / took.Seconds(), Latency: lat, Masters: r.o.Masters, Workers: r.o.Workers,
		Slots: r.o.Slots, FailoverFigures: f}
	slices.Sort(failoverMs)
	s.P50ms, s.P95ms, s.P99ms = percentile(failoverMs, 0.5), percentile(failoverMs, 0.95), percentile(failoverMs, 0.99)
	if len(failoverMs) > 0 {
		f.FailoverMsMin, f.FailoverMsMax = failoverMs[0], failoverMs[len(failoverMs)-1]
	}
	if len(problems) == 0 {
		return s, nil
	}
	f.Problems = problems[:min(len(problems), 20)]
	msg := strings.Join(f.Problems, "\n  ")
	if len(problems) > 20 {
		msg += fmt.Sprintf("\n  … and %d more", len(problems)-20)
	}
	return s, fmt.Errorf("failover: %d problem(s) (lost %d, committed twice %d, overlaps %d):\n  %s",
		len(problems), f.Lost, f.CommittedTwice, f.Overlaps, msg)
}

// judge checks the run's history: every workflow succeeded, every task committed one
// result, no two attempts of a task overlapped, and the killed worker's tasks (and only
// them) were failed over and ran again elsewhere. It returns the figures, each failed-over
// task's time from the kill to its next attempt's start in ms, the number of tasks, and the
// problems found.
func (r *failoverRun) judge(rows []attemptRow, events []dao.FailoverEvent, submitted int) (*FailoverFigures, []float64, int, []string) {
	f := &FailoverFigures{KilledWorker: r.victim.id, KilledAt: r.killedAt}
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	names := map[string]string{}
	for _, n := range r.nodes {
		names[n.id] = n.name
	}
	nameOf := func(id string) string {
		if names[id] != "" {
			return names[id] + " (" + id + ")"
		}
		return id
	}

	type attempt struct {
		n          int
		worker     string
		start, end time.Time // end: far in the future while it has none
		outcome    string
	}
	type task struct {
		id       int64
		attempts []attempt
	}
	type wf struct {
		id    int64
		state string
		tasks []*task
	}
	var wfs []*wf
	for _, row := range rows {
		if len(wfs) == 0 || wfs[len(wfs)-1].id != row.Workflow {
			wfs = append(wfs, &wf{id: row.Workflow, state: row.WorkflowState})
		}
		w := wfs[len(wfs)-1]
		if row.Task == nil {
			continue
		}
		if len(w.tasks) == 0 || w.tasks[len(w.tasks)-1].id != *row.Task {
			w.tasks = append(w.tasks, &task{id: *row.Task})
		}
		t := w.tasks[len(w.tasks)-1]
		if row.Attempt == nil {
			continue
		}
		a := attempt{n: *row.Attempt, worker: *row.Worker, start: *row.StartedAt, end: time.Unix(1<<40, 0)}
		if row.EndedAt != nil {
			a.end = *row.EndedAt
		}
		if row.Outcome != nil {
			a.outcome = *row.Outcome
		}
		t.attempts = append(t.attempts, a)
	}

	if len(wfs) != submitted {
		f.Lost += max(submitted-len(wfs), 0)
		problem("lost: %d workflow instances submitted, %d in the database", submitted, len(wfs))
	}
	var failoverMs []float64
	tasks := 0
	failedOverElsewhere := map[string]int{}
	for _, w := range wfs {
		lost := w.state != string(dao.WorkflowSucceeded)
		if lost {
			problem("lost: workflow instance %d ended %s, want succeeded", w.id, w.state)
		}
		if len(w.tasks) == 0 && !lost {
			lost = true
			problem("lost: workflow instance %d succeeded without a task", w.id)
		}
		for _, t := range w.tasks {
			tasks++
			succeeded := 0
			for _, a := range t.attempts {
				if a.outcome == string(dao.OutcomeSucceeded) {
					succeeded++
				}
			}
			switch {
			case succeeded == 0 && !lost:
				lost = true
				problem("lost: task %d of workflow instance %d has no succeeded attempt", t.id, w.id)
			case succeeded > 1:
				f.CommittedTwice++
				problem("committed twice: task %d has %d succeeded attempts", t.id, succeeded)
			}
			for i, a := range t.attempts {
				switch {
				case a.worker == f.KilledWorker && a.outcome == string(dao.OutcomeFailedOver):
					f.TasksFailedOver++
					next := slices.IndexFunc(t.attempts[i+1:], func(b attempt) bool { return b.n > a.n })
					switch {
					case next < 0:
						problem("task %d: failed over from the killed worker at attempt %d, never started again", t.id, a.n)
					case t.attempts[i+1+next].worker == f.KilledWorker:
						problem("task %d: attempt %d ran on the killed worker after its failover", t.id, t.attempts[i+1+next].n)
					default:
						failoverMs = append(failoverMs, ms(t.attempts[i+1+next].start.Sub(f.KilledAt)))
					}
				case a.worker == f.KilledWorker && a.outcome == "":
					problem("task %d: attempt %d on the killed worker was never ended (not failed over)", t.id, a.n)
				case a.outcome == string(dao.OutcomeFailedOver):
					failedOverElsewhere[a.worker]++
				}
			}
			// Two attempts overlap when each started before the other ended; the killed
			// worker's attempts end at the kill, whatever the failover wrote later.
			end := func(a attempt) time.Time {
				if a.worker == f.KilledWorker && a.end.After(f.KilledAt) {
					return f.KilledAt
				}
				return a.end
			}
			for i, a := range t.attempts {
				for _, b := range t.attempts[i+1:] {
					if a.start.Before(end(b)) && b.start.Before(end(a)) && a.start.Before(end(a)) && b.start.Before(end(b)) {
						f.Overlaps++
						problem("overlap: task %d: attempt %d on %s (%s..%s) and attempt %d on %s (%s..%s)", t.id,
							a.n, nameOf(a.worker), clock(a.start), clock(end(a)), b.n, nameOf(b.worker), clock(b.start), clock(end(b)))
					}
				}
			}
		}
		if lost {
			f.Lost++
		}
	}
	if f.TasksFailedOver == 0 {
		problem("no task was running on the killed worker %s: nothing was failed over; raise --rate or --sleep", nameOf(f.KilledWorker))
	}
	for _, w := range slices.Sorted(maps.Keys(failedOverElsewhere)) {
		problem("%s was failed over too (%d attempts), though only %s was killed: the machine may be too loaded for a session timeout of %v",
			nameOf(w), failedOverElsewhere[w], nameOf(f.KilledWorker), r.o.SessionTimeout)
	}
	found := false
	for _, ev := range events {
		if ev.NodeID != f.KilledWorker {
			problem("unexpected failover of %s %s (lost at %s)", ev.Role, nameOf(ev.NodeID), clock(ev.LostAt))
			continue
		}
		found = true
		f.TasksRequeued = ev.TasksRequeued
		f.LostMs, f.FencedMs = ms(ev.LostAt.Sub(f.KilledAt)), ms(ev.FencedAt.Sub(f.KilledAt))
		if ev.TasksRequeued != f.TasksFailedOver {
			problem("the failover_event of the killed worker says %d tasks requeued, but %d of its attempts ended failed_over",
				ev.TasksRequeued, f.TasksFailedOver)
		}
	}
	if !found {
		problem("no failover_event for the killed worker %s", nameOf(f.KilledWorker))
	}
	return f, failoverMs, tasks, problems
}

// stopNodes stops every node still running with SIGTERM, and with SIGKILL those still
// running 20 s later (a worker's shutdown-timeout is 5 s).
func (r *procCluster) stopNodes() {
	for _, n := range r.nodes {
		if !n.exited() {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for _, n := range r.nodes {
		select {
		case <-n.done:
		case <-timeout.C:
			for _, m := range r.nodes {
				if !m.exited() {
					_ = m.cmd.Process.Signal(syscall.SIGKILL)
				}
			}
			<-n.done
		}
	}
	for _, n := range r.nodes {
		<-n.done
	}
}

// cleanZooKeeper deletes the run's ZooKeeper root with everything under it, in a session of
// its own (the registry client's is closed by now).
func (r *procCluster) cleanZooKeeper() {
	if r.reg == nil {
		return // never created
	}
	conn, events, err := zk.Connect(r.o.ZooKeeper, 10*time.Second, zk.WithLogger(nopZKLogger{}))
	if err != nil {
		r.warn("could not delete the ZooKeeper root %s: %v", r.root, err)
		return
	}
	defer conn.Close()
	timeout := time.After(10 * time.Second)
	for connected := false; !connected; {
		select {
		case ev := <-events:
			connected = ev.State == zk.StateHasSession
		case <-timeout:
			r.warn("could not delete the ZooKeeper root %s: no session within 10s", r.root)
			return
		}
	}
	go func() { // drain, so the client never blocks on a full channel
		for range events {
		}
	}()
	if err := deleteTree(conn, r.root); err != nil {
		r.warn("could not delete the ZooKeeper root %s: %v", r.root, err)
	}
}

// deleteTree deletes p and everything below it; a missing p is not an error.
func deleteTree(c *zk.Conn, p string) error {
	children, _, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ch := range children {
		if err := deleteTree(c, p+"/"+ch); err != nil {
			return err
		}
	}
	if err := c.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// printLogTails shows the end of every node's log, after a failed run.
func (r *procCluster) printLogTails() {
	if r.o.Progress == nil {
		return
	}
	for _, n := range r.nodes {
		fmt.Fprintf(r.o.Progress, "---- the end of the log of %s ----\n%s\n", n, tailFile(n.logPath, 15))
	}
}

func (r *procCluster) warn(format string, args ...any) {
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, "warning: "+format+"\n", args...)
	}
}

// tailFile returns the last lines of a file.
func tailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	parts := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(parts[max(len(parts)-lines, 0):], "\n")
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// percentile is the p-quantile of sorted values, interpolated as PostgreSQL's
// percentile_cont; 0 for none.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	x := p * float64(len(sorted)-1)
	i := int(x)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (x-float64(i))*(sorted[i+1]-sorted[i])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func clock(t time.Time) string { return t.Local().Format("15:04:05.000") }

type nopZKLogger struct{}

func (nopZKLogger) Printf(string, ...any) {}

// sleepSpec is the workflow of the failover and memory modes: one shell task that sleeps.
func sleepSpec(mode string, sleep time.Duration) *workflow.Spec {
	return &workflow.Spec{Name: "bench-" + mode, Tasks: []workflow.Task{{Name: "t", Type: "shell",
		Group: workflow.DefaultGroup, Command: fmt.Sprintf("sleep %g", sleep.Seconds())}}}
}
