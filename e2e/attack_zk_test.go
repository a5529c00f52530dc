package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
)

// zkAttack is a cluster of a master and a worker running one long shell task, and a plain
// ZooKeeper client of someone who reaches ZooKeeper without the cluster's credentials.
type zkAttack struct {
	*e2e
	root             string
	master, worker   *testcluster.Proc
	masterID, workID string
	task             dao.TaskInstance
	anyone           *zk.Conn
}

// setupZKAttack starts the cluster, with env added to every process (the auth file, or
// nothing), and waits until the worker runs the task `sleep` (a shell command).
func setupZKAttack(t *testing.T, sleep string, env ...string) *zkAttack {
	t.Helper()
	e := setupE2E(t, nil, "", append([]string{"ZKSCHED_FAILOVER_SWEEP_INTERVAL=500ms"}, env...)...)
	a := &zkAttack{e2e: e}
	for _, kv := range e.Env {
		if v, ok := strings.CutPrefix(kv, "ZKSCHED_REGISTRY_ROOT="); ok {
			a.root = v
		}
	}
	a.master, a.worker = e.Master("master"), e.Worker("worker")
	a.masterID, a.workID = a.master.ID(t, 20*time.Second), a.worker.ID(t, 20*time.Second)
	a.master.WaitLog(t, 20*time.Second, "became the leader")
	wf := e.file(t, "long.yaml", "name: long\ntasks:\n  - {name: long, type: shell, command: '"+sleep+"'}\n")
	if out, code := e.Run("submit", wf); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	waitUntil(t, 20*time.Second, "the task to run on the worker", func() bool {
		ti, ok := e.tasks(t, 1)["long"]
		a.task = ti
		return ok && ti.State == dao.TaskRunning
	})
	a.anyone = testenv.DialZK(t)
	return a
}

// stillRuns checks that the worker has not exited and still runs the task in its first attempt.
func (a *zkAttack) stillRuns(t *testing.T) {
	t.Helper()
	select {
	case <-a.worker.Exited():
		t.Fatalf("the worker exited (code %d); want it running:\n%s", a.worker.Wait(t, time.Second), a.worker.Log())
	default:
	}
	ti := a.tasks(t, 1)["long"]
	if ti.State != dao.TaskRunning || ti.Attempt != 1 || ti.WorkerID == nil || *ti.WorkerID != a.workID {
		t.Fatalf("task %s attempt %d on %v; want running, attempt 1, on %s", ti.State, ti.Attempt, ti.WorkerID, a.workID)
	}
}

// runWithout runs `zksched args…` with the cluster's environment minus the variable drop.
func (a *zkAttack) runWithout(t *testing.T, drop string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(a.Bin, args...)
	for _, kv := range append(os.Environ(), a.Env...) {
		if !strings.HasPrefix(kv, drop+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("run zksched %v: %v", args, err)
	}
	return out.String(), 0
}

func authEnv(t *testing.T) string {
	return "ZKSCHED_REGISTRY_AUTH_FILE=" + testenv.ZKAuthFile(t)
}

// The way in of the issue: `zkCli.sh create /zksched/failover-finish-nodes/worker/<a live
// worker> garbage` stopped the worker (exit 75). With registry.auth-file the create is refused
// (NoAuth), as is deleting the worker's znode, and the worker goes on with its task.
func TestAttackZKForgedMarkerNeedsCredentials(t *testing.T) {
	t.Parallel()
	a := setupZKAttack(t, "sleep 60", authEnv(t))
	marker := a.root + "/failover-finish-nodes/worker/" + a.workID
	if _, err := a.anyone.Create(marker, []byte("garbage"), 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("create the live worker's marker without credentials: %v, want %v", err, zk.ErrNoAuth)
	}
	if err := a.anyone.Delete(a.root+"/nodes/workers/"+a.workID, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("delete the live worker's znode without credentials: %v, want %v", err, zk.ErrNoAuth)
	}
	if _, err := a.anyone.Set(a.root+"/nodes/workers/"+a.workID, []byte("{}"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("overwrite the live worker's node info without credentials: %v, want %v", err, zk.ErrNoAuth)
	}
	if ok, _, err := a.anyone.Exists(marker); err != nil || ok {
		t.Fatalf("marker exists %v (%v) after the refused create", ok, err)
	}
	a.stillRuns(t)
	if strings.Contains(a.worker.Log(), "registry.auth-file is not set") {
		t.Error("the worker warns about a missing registry.auth-file it has")
	}
	// A node without the credentials cannot join the protected cluster: it stops at start
	// with the fix in its message (exit 2, a configuration error: systemd does not loop).
	intruder := a.Worker("intruder", "ZKSCHED_REGISTRY_AUTH_FILE=")
	if code := intruder.Wait(t, 20*time.Second); code != 2 || !strings.Contains(intruder.Log(), "set registry.auth-file") {
		t.Errorf("a worker without the auth file: exit %d, want 2 and a hint at registry.auth-file:\n%s", code, intruder.Log())
	}
	a.stillRuns(t)
}

// Without credentials nobody can take the leadership: neither delete the leader's candidate nor
// add a candidate of their own (in the recipe's name form, or a garbage one).
func TestAttackZKElectionNeedsCredentials(t *testing.T) {
	t.Parallel()
	a := setupZKAttack(t, "sleep 60", authEnv(t))
	dir := a.root + "/election"
	names, _, err := a.anyone.Children(dir)
	if err != nil || len(names) != 1 {
		t.Fatalf("election candidates %v (%v), want the master's one", names, err)
	}
	if err := a.anyone.Delete(dir+"/"+names[0], -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("delete the leader's candidate without credentials: %v, want %v", err, zk.ErrNoAuth)
	}
	for _, name := range []string{"_c_00000000000000000000000000000000-n_", "x"} {
		if _, err := a.anyone.Create(dir+"/"+name, []byte("10.6.6.6:5678_1"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("create candidate %s without credentials: %v, want %v", name, err, zk.ErrNoAuth)
		}
	}
	out, code := a.runWithout(t, "ZKSCHED_REGISTRY_AUTH_FILE", "zk", "nodes", "--json")
	var cl struct {
		Leader *string `json:"leader"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &cl) != nil || cl.Leader == nil || *cl.Leader != a.masterID {
		t.Fatalf("zk nodes --json without credentials: exit %d, leader %v, want %s\n%s", code, cl.Leader, a.masterID, out)
	}
	a.stillRuns(t)
}

// Reading needs no credentials, and what a znode holds cannot forge the output of zk tree: a
// znode (made here with the credentials, as an operator's tool might) whose name and data hold
// a bidi override, a terminal escape and a newline is printed escaped.
func TestAttackZKTreeReadsWithoutCredentialsAndEscapes(t *testing.T) {
	t.Parallel()
	a := setupZKAttack(t, "sleep 60", authEnv(t))
	op := testenv.DialZK(t)
	if err := op.AddAuth("digest", []byte(testenv.ZKUser+":"+testenv.ZKPassword)); err != nil {
		t.Fatal(err)
	}
	evil := "\x1b[2J\x1b[31mowned\nworker 10.6.6.6:5679_1  EPHEMERAL"
	if _, err := op.Create(a.root+"/\u202egpj.exe", []byte(evil), 0, zk.WorldACL(zk.PermRead)); err != nil {
		t.Fatal(err)
	}
	out, code := a.runWithout(t, "ZKSCHED_REGISTRY_AUTH_FILE", "zk", "tree")
	if code != 0 {
		t.Fatalf("zk tree without credentials: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, a.workID) || !strings.Contains(out, a.masterID) {
		t.Errorf("zk tree without credentials does not show the nodes:\n%s", out)
	}
	for _, bad := range []string{"\x1b", "\u202e", "\nworker 10.6.6.6"} {
		if strings.Contains(out, bad) {
			t.Errorf("zk tree prints %q unescaped:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, `"\u202egpj.exe"`) || !strings.Contains(out, `\x1b[2J`) {
		t.Errorf("zk tree does not show the escaped name and data:\n%s", out)
	}
	out, code = a.runWithout(t, "ZKSCHED_REGISTRY_AUTH_FILE", "zk", "nodes")
	if code != 0 || !strings.Contains(out, a.workID) {
		t.Errorf("zk nodes without credentials: exit %d\n%s", code, out)
	}
}

// On a cluster without registry.auth-file anyone can still create a marker for a live worker.
// It is no fence (a leader fences only a node whose znode is gone): the worker reports it and
// keeps running its task, the leader reports it and requeues nothing, and the task ends in its
// first attempt: taken for a fence, the marker would make the worker exit 75 and the
// leader's sweep requeue the task as a failover while it ran.
func TestAttackZKForgedMarkerWithoutCredentialsRequeuesNothing(t *testing.T) {
	t.Parallel()
	a := setupZKAttack(t, "sleep 5")
	a.master.WaitLog(t, 5*time.Second, "registry.auth-file is not set")
	marker := a.root + "/failover-finish-nodes/worker/" + a.workID
	rec := `{"id":"` + a.workID + `","role":"worker","phase":"fenced","leader":"mallory"}`
	if _, err := a.anyone.Create(marker, []byte(rec), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	a.worker.WaitLog(t, 10*time.Second, "a fence marker exists for this node while its znode is held by its live session")
	a.master.WaitLog(t, 10*time.Second, "fence marker of a node that is registered")
	a.stillRuns(t)
	waitUntil(t, 30*time.Second, "the task to end", func() bool {
		return a.tasks(t, 1)["long"].State != dao.TaskRunning
	})
	ti := a.tasks(t, 1)["long"]
	if o := a.outcomes(t, ti.ID); ti.State != dao.TaskSucceeded || o != "succeeded@"+a.workID {
		t.Fatalf("task %s, attempts %s; want succeeded in one attempt on %s", ti.State, o, a.workID)
	}
	evs, err := a.db.FailoverEventList(context.Background(), 10)
	if err != nil || len(evs) != 0 {
		t.Fatalf("failover events %+v (%v), want none", evs, err)
	}
	select {
	case <-a.worker.Exited():
		t.Fatalf("the worker exited (code %d) after a forged marker", a.worker.Wait(t, time.Second))
	default:
	}
}

// A registry.auth-file that is not user:password stops a node at start with a message naming
// the key; so does one that cannot be read.
func TestZKAuthFileMalformedIsAConfigError(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	for body, want := range map[string]string{"no-colon-here\n": "found no colon", ":secret": "the user is empty", "user:": "the password is empty"} {
		f := e.file(t, "auth", body)
		out, code := e.Run("master", "--config", e.file(t, "c.yaml", "registry:\n  auth-file: "+f+"\n"))
		if code != 2 || !strings.Contains(out, "registry.auth-file") || !strings.Contains(out, want) {
			t.Errorf("auth file %q: exit %d, want 2 and %q:\n%s", body, code, want, out)
		}
	}
	out, code := e.Run("zk", "tree", "--auth-file", "/nonexistent/zk-auth")
	if code != 2 || !strings.Contains(out, "read registry auth file") {
		t.Errorf("zk tree --auth-file of a missing file: exit %d, want 2 and a read error:\n%s", code, out)
	}
}

// Someone on the network path to ZooKeeper reads nothing: with registry.tls-ca, tls-cert and
// tls-key the nodes reach a ZooKeeper 3.8 server only through its secureClientPort (client
// certificates required), run a workflow, and zk nodes reads the registry the same way; a node
// without the TLS keys cannot talk to that port at all.
func TestAttackZKOnlyThroughTLS(t *testing.T) {
	t.Parallel()
	pki := testenv.NewPKI(t)
	srv := testenv.NewZKServer(t)
	secure := srv.StartTLS("data", pki.ServerFile, pki.CAFile)
	e := setupE2E(t, []string{secure}, "", authEnv(t), "ZKSCHED_REGISTRY_TLS_CA="+pki.CAFile,
		"ZKSCHED_REGISTRY_TLS_CERT="+pki.ClientCertFile, "ZKSCHED_REGISTRY_TLS_KEY="+pki.ClientKeyFile)
	master, worker := e.Master("master"), e.Worker("worker")
	master.WaitLog(t, 30*time.Second, "became the leader")
	workerID := worker.ID(t, 30*time.Second)
	wf := e.file(t, "hello.yaml", "name: hello\ntasks:\n  - {name: hello, type: shell, command: 'echo over tls'}\n")
	if out, code := e.Run("submit", "--wait", wf); code != 0 {
		t.Fatalf("submit --wait over TLS: exit %d\n%s", code, out)
	}
	out, code := e.Run("zk", "nodes")
	if code != 0 || !strings.Contains(out, workerID) {
		t.Fatalf("zk nodes over TLS: exit %d\n%s", code, out)
	}
	plain := e.Worker("plain", "ZKSCHED_REGISTRY_TLS_CA=", "ZKSCHED_REGISTRY_TLS_CERT=", "ZKSCHED_REGISTRY_TLS_KEY=")
	plain.WaitLog(t, 30*time.Second, "no zookeeper server answers yet")
	if strings.Contains(plain.Log(), `"message":"registered"`) {
		t.Fatalf("a worker without TLS registered through the TLS port:\n%s", plain.Log())
	}
}
