package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
)

// e2e is one test's cluster of real zksched processes on its own ZooKeeper root and schema.
type e2e struct {
	*testcluster.Cluster
	db  *dao.DB
	dir string
}

func setupE2E(t *testing.T, zkServers []string, dsnOverride string, env ...string) *e2e {
	t.Helper()
	zk := testenv.ZooKeeper(t)
	db, dsn := daotest.New(t)
	if zkServers == nil {
		zkServers = zk.Servers
	}
	if dsnOverride != "" {
		dsn = dsnOverride
	}
	env = append([]string{"ZKSCHED_REGISTRY_SESSION_TIMEOUT=2s", "ZKSCHED_FAILOVER_DELAY=2s",
		"ZKSCHED_WORKER_KILL_GRACE=500ms", "ZKSCHED_WORKER_POLL_INTERVAL=200ms", "ZKSCHED_MASTER_POLL_INTERVAL=200ms"}, env...)
	return &e2e{Cluster: testcluster.New(t, zkServers, zk.Root, dsn, env...), db: db, dir: t.TempDir()}
}

func (e *e2e) file(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// tasks returns the task instances of a workflow instance by name.
func (e *e2e) tasks(t *testing.T, wf int64) map[string]dao.TaskInstance {
	t.Helper()
	ts, err := e.db.TaskListByWorkflow(context.Background(), wf)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dao.TaskInstance{}
	for _, ti := range ts {
		out[ti.Name] = ti
	}
	return out
}

func (e *e2e) outcomes(t *testing.T, taskID int64) string {
	t.Helper()
	as, err := e.db.AttemptList(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		o := "running"
		if a.Outcome != nil {
			o = string(*a.Outcome)
		}
		out = append(out, o+"@"+a.WorkerID)
	}
	return strings.Join(out, ",")
}

// waitUntil checks cond every 50 ms for up to d, for what the processes under test show only
// in the database, their logs or their HTTP answers.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, d, 50*time.Millisecond, what, cond)
}

func TestEndToEndDAG(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	e.Master("master")
	e.Worker("worker-1")
	e.Worker("worker-2")
	wfFile := e.file(t, "mixed.yaml", `
name: mixed
params: {who: world}
tasks:
  - {name: extract, type: shell, command: 'echo "hello $ZKSCHED_PARAM_who"'}
  - {name: a, type: shell, depends-on: [extract], command: 'sleep 0.3; echo a on $ZKSCHED_WORKER'}
  - {name: b, type: shell, depends-on: [extract], command: 'sleep 0.3; echo b on $ZKSCHED_WORKER'}
  - {name: c, type: noop, depends-on: [extract]}
  - {name: join, type: shell, depends-on: [a, b, c], command: 'echo joined'}
  - {name: flaky, type: shell, command: 'echo attempt $ZKSCHED_ATTEMPT >&2; exit 7', retries: 1, retry-interval: 200ms}
  - {name: below-flaky, type: shell, depends-on: [flaky], command: 'echo never'}
  - {name: sleepy, type: shell, command: 'echo going to sleep; sleep 60', timeout: 5s}
`)
	out, code := e.Run("submit", "--wait", "--param", "who=zksched", wfFile)
	if code != 1 {
		t.Fatalf("submit --wait exit %d, want 1 (the workflow fails); output:\n%s", code, out)
	}
	if !strings.Contains(out, "workflow instance") || !strings.Contains(out, "failed") {
		t.Errorf("submit output does not report the failure:\n%s", out)
	}
	wf := int64(1)
	got, err := e.db.WorkflowGet(context.Background(), wf)
	if err != nil || got.State != dao.WorkflowFailed {
		t.Fatalf("workflow = %+v, %v; want failed", got, err)
	}
	ts := e.tasks(t, wf)
	for name, want := range map[string]dao.TaskState{"extract": dao.TaskSucceeded, "a": dao.TaskSucceeded, "b": dao.TaskSucceeded,
		"c": dao.TaskSucceeded, "join": dao.TaskSucceeded, "flaky": dao.TaskFailed, "below-flaky": dao.TaskSkipped,
		"sleepy": dao.TaskFailed} {
		if ts[name].State != want {
			t.Errorf("%s is %s, want %s", name, ts[name].State, want)
		}
	}
	if o := ts["extract"].Output; o == nil || *o != "hello zksched" {
		t.Errorf("extract output = %v", o)
	}
	if o := e.outcomes(t, ts["flaky"].ID); strings.Count(o, "failed@") != 2 {
		t.Errorf("flaky attempts = %s, want two failures", o)
	}
	if o := e.outcomes(t, ts["sleepy"].ID); !strings.HasPrefix(o, "timed_out@") || strings.Contains(o, ",") {
		t.Errorf("sleepy attempts = %s, want one timeout", o)
	}
	log, _ := e.db.TaskLogRead(context.Background(), ts["flaky"].ID, 2)
	if !strings.Contains(log, "attempt 2") {
		t.Errorf("flaky attempt 2 log = %q", log)
	}
	// Its timeout leaves the task time to start and print, however slowly a busy machine
	// starts the supervisor and bash.
	log, _ = e.db.TaskLogRead(context.Background(), ts["sleepy"].ID, 1)
	if !strings.Contains(log, "going to sleep") || !strings.Contains(log, "SIGTERM") {
		t.Errorf("sleepy log = %q, want its output and the stop notice", log)
	}
	// The fan-out ran in parallel: a and b (0.3 s each) were queued together and overlapped.
	a, b := ts["a"], ts["b"]
	if a.StartedAt == nil || b.StartedAt == nil || a.EndedAt == nil || b.EndedAt == nil ||
		!a.StartedAt.Before(*b.EndedAt) || !b.StartedAt.Before(*a.EndedAt) {
		t.Errorf("a ran %v..%v and b %v..%v: the fan-out did not run in parallel", a.StartedAt, a.EndedAt, b.StartedAt, b.EndedAt)
	}
}

func TestSIGTERMHandsBackAndAnotherWorkerFinishes(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_WORKER_SHUTDOWN_TIMEOUT=500ms")
	e.Master("master")
	w1 := e.Worker("worker-1")
	wfFile := e.file(t, "long.yaml", `
name: long
tasks:
  - {name: long, type: shell, command: 'if [ "$ZKSCHED_ATTEMPT" = 1 ]; then echo first; sleep 60; fi; echo finished by attempt $ZKSCHED_ATTEMPT'}
`)
	if out, code := e.Run("submit", wfFile); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	waitUntil(t, 20*time.Second, "the task to run on worker-1", func() bool {
		return e.tasks(t, 1)["long"].State == dao.TaskRunning
	})
	if err := w1.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w1.Wait(t, 15*time.Second); code != 0 {
		t.Fatalf("worker-1 exit code %d after SIGTERM, want 0", code)
	}
	if s := e.tasks(t, 1)["long"].State; s != dao.TaskQueued {
		t.Fatalf("after worker-1 stopped, the task is %s, want queued", s)
	}
	e.Worker("worker-2")
	waitUntil(t, 20*time.Second, "the workflow to finish", func() bool {
		wf, err := e.db.WorkflowGet(context.Background(), 1)
		return err == nil && wf.State.Terminal()
	})
	long := e.tasks(t, 1)["long"]
	if long.State != dao.TaskSucceeded || long.Retries != 0 || *long.Output != "finished by attempt 2" {
		t.Fatalf("task = %s retries %d output %v", long.State, long.Retries, long.Output)
	}
	if o := e.outcomes(t, long.ID); !strings.HasPrefix(o, "handed_back@") || !strings.Contains(o, ",succeeded@") {
		t.Fatalf("attempts = %s, want handed back then succeeded", o)
	}
	if !strings.Contains(w1.Log(), "handing them back") {
		t.Errorf("worker-1 did not log the hand-back")
	}
}

// cut are ZooKeeper and PostgreSQL behind proxies whose links start cut: the test's schema
// reached directly (dsn) and through the PostgreSQL proxy (cutDSN).
type cut struct {
	zk, pg      *testenv.Proxy
	dsn, cutDSN string
}

func cutServers(t *testing.T) cut {
	t.Helper()
	c := cut{zk: testenv.NewProxy(t, testenv.ZKServers()[0]), pg: testenv.NewProxy(t, "127.0.0.1:5432")}
	c.zk.Cut()
	c.pg.Cut()
	c.dsn = testenv.Postgres(t).DSN
	c.cutDSN = strings.Replace(c.dsn, "127.0.0.1:5432", c.pg.Addr(), 1)
	return c
}

// TestStartsBeforeItsServers starts a master and a worker while neither ZooKeeper nor
// PostgreSQL is reachable (their links are cut): they retry, and work once the links heal.
func TestStartsBeforeItsServers(t *testing.T) {
	t.Parallel()
	c := cutServers(t)
	zkProxy, pgProxy := c.zk, c.pg
	e := setupE2E(t, []string{zkProxy.Addr()}, c.cutDSN)
	m := e.Master("master")
	w := e.Worker("worker")
	waitUntil(t, 20*time.Second, "both to report PostgreSQL unreachable", func() bool {
		return strings.Contains(m.Log(), "postgresql not reachable") && strings.Contains(w.Log(), "postgresql not reachable")
	})
	pgProxy.Heal()
	// Each has reached the cut link and waited for an answer that did not come, and is still
	// trying: the registry says so once a whole second has passed without one.
	for _, p := range []*testcluster.Proc{m, w} {
		p.WaitLog(t, 20*time.Second, "no zookeeper server answers yet; still trying")
		if strings.Contains(p.Log(), `"message":"registered"`) {
			t.Fatalf("%s registered through a cut link", p.Name)
		}
	}
	zkProxy.Heal()
	if out, code := e.Run("migrate"); code != 0 {
		t.Fatalf("migrate: %d %s", code, out)
	}
	out, code := e.Run("submit", "--wait", e.file(t, "one.yaml", "name: one\ntasks:\n  - {name: t, type: shell, command: 'echo ok'}\n"))
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
}

// TestStopWhileStarting: a master and a worker stopped (SIGTERM) while they wait for
// PostgreSQL, and another pair while they wait for ZooKeeper, exit 0 and take no further step
// of their start.
func TestStopWhileStarting(t *testing.T) {
	t.Parallel()
	c := cutServers(t)
	for _, tc := range []struct{ waitsFor, dsn, line string }{
		{"postgresql", c.cutDSN, "postgresql not reachable"},
		{"zookeeper", c.dsn, "no zookeeper server answers yet; still trying"},
	} {
		e := setupE2E(t, []string{c.zk.Addr()}, tc.dsn)
		for _, p := range []*testcluster.Proc{e.Master("master"), e.Worker("worker")} {
			p.WaitLog(t, 20*time.Second, tc.line)
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.Wait(t, 20*time.Second); code != 0 || strings.Contains(p.Log(), "panic") {
				t.Errorf("%s stopped while it waited for %s: exit %d; want 0 and no panic:\n%s", p.Name, tc.waitsFor, code, p.Log())
			}
		}
	}
}

// TestBadInputIsRejectedClearly: a bad workflow file stores nothing, and a bad setting stops a
// node at start with a message naming the key.
func TestBadInputIsRejectedClearly(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	for name, tc := range map[string]struct {
		body, want string
	}{
		"cycle":        {"name: c\ntasks:\n  - {name: a, type: noop, depends-on: [b]}\n  - {name: b, type: noop, depends-on: [a]}\n", "dependency cycle: a -> b -> a"},
		"unknown type": {"name: u\ntasks:\n  - {name: a, type: python}\n", `unknown type "python"`},
		"malformed":    {"name: m\ntasks: [\n", "line"},
		"empty":        {"name: e\ntasks: []\n", "no tasks"},
	} {
		out, code := e.Run("submit", e.file(t, name+".yaml", tc.body))
		if code == 0 || !strings.Contains(out, tc.want) || !strings.Contains(out, "nothing stored") {
			t.Errorf("submit %s: exit %d, output %q; want a failure saying %q and nothing stored", name, code, out, tc.want)
		}
	}
	var n int
	if err := e.db.SQL().Get(&n, "SELECT count(*) FROM workflow_definition"); err != nil || n != 0 {
		t.Fatalf("definitions stored after rejected submits: %d, %v", n, err)
	}
	p := e.Start("bad-config", []string{"ZKSCHED_REGISTRY_SESSION_TIMEOUT=10x"}, "worker")
	if code := p.Wait(t, 10*time.Second); code != 2 || !strings.Contains(p.Log(), "registry.session-timeout") {
		t.Fatalf("worker with a bad duration: exit %d, log %q; want exit 2 naming the key", code, p.Log())
	}
}
