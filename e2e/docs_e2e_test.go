package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
)

// TestDocsHTTPAPI runs docs/http-api.md's curl commands as they are printed, in bash, with
// the master's URL for http://127.0.0.1:5678 and an admin's token file for the quickstart's
// ~/.local/state/zksched/api-token: a definition stored, an instance of it run, its failed
// task found and rerun, the instance stopped.
func TestDocsHTTPAPI(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/http-api.md", "The HTTP API", "sh", 1)
	e := setupE2E(t, nil, "")
	users, tokens := usersFile(t, e.dir)
	master := e.Master("master", "ZKSCHED_API_USERS_FILE="+users)
	e.Worker("worker")
	waitReady(t, master.Port)
	token := tokenFile(t, t.TempDir(), "token", tokens["admin"])
	script := strings.NewReplacer("http://127.0.0.1:5678", fmt.Sprintf("http://127.0.0.1:%d", master.Port),
		"~/.local/state/zksched/api-token", token).Replace(block)
	out, _ := e.docScript(t, script)
	for _, want := range []string{`"name": "cli-tour"`, `"name": "count"`, `"state": "failed"`, `"requeued": [`, `"state": "stopped"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the curl commands' output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"error"`) {
		t.Errorf("a curl command got an error:\n%s", out)
	}
}

// TestDocsReadingTheCluster runs docs/cli.md's zkCli.sh commands as they are printed, in bash,
// with the test's ZooKeeper for 127.0.0.1:2181 and its registry root for /zksched, against a
// master and a worker.
func TestDocsReadingTheCluster(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/cli.md", "Reading the cluster", "sh", 1)
	e := setupE2E(t, nil, "")
	e.Master("master").WaitLog(t, 30*time.Second, `"message":"registered"`)
	worker := e.Worker("worker")
	id := worker.ID(t, 30*time.Second)
	worker.WaitLog(t, 30*time.Second, `"message":"registered"`)
	root := envValue(e.Env, "ZKSCHED_REGISTRY_ROOT")
	script := strings.NewReplacer("127.0.0.1:2181", strings.Join(testenv.ZKServers(), ","), " /zksched", " "+root).Replace(block)
	out, stderr := e.docScript(t, script)
	for _, want := range []string{root + "/nodes/workers/" + id + "\n", `"role":"worker"`, "ephemeralOwner = 0x",
		root + "/failover-finish-nodes/worker\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the zkCli.sh commands' output lacks %q:\n%s\nstderr:\n%s", want, out, stderr)
		}
	}
}

// waitReady waits up to 60 s for the node serving on port to answer /readyz with 200: it is
// registered and takes work.
func waitReady(t *testing.T, port int) {
	t.Helper()
	waitUntil(t, 60*time.Second, fmt.Sprintf("the node on port %d to be ready", port), func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// TestDocsRunningNodes runs docs/operations.md's start commands as they are printed, each
// in a mount namespace of its own where /etc is an overlay holding /etc/zksched/zksched.yaml
// (the machine's /etc is not written): the master and the worker start from that file,
// register, and exit 0 on SIGTERM.
func TestDocsRunningNodes(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/operations.md", "Running nodes", "sh", 1)
	lines := strings.Split(strings.TrimSpace(block), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "bin/start-master.sh ") || !strings.HasPrefix(lines[1], "bin/start-worker.sh ") {
		t.Fatalf("the docs' commands are %q: want bin/start-master.sh and bin/start-worker.sh, which this test runs", lines)
	}
	unshare := []string{"unshare", "--mount"}
	if os.Geteuid() != 0 {
		unshare = append(unshare, "--map-root-user")
	}
	e := setupE2E(t, nil, "")
	masterPort, workerPort := testcluster.FreePort(t), testcluster.FreePort(t)
	config := e.file(t, "zksched.yaml", fmt.Sprintf(`registry:
  servers: [%q]
  root: %s
  session-timeout: 2s
db:
  dsn: %q
node:
  host: 127.0.0.1
  state-dir: %s
master:
  port: %d
worker:
  port: %d
  allow-root-tasks: true
`, strings.Join(testenv.ZKServers(), ","), envValue(e.Env, "ZKSCHED_REGISTRY_ROOT"), envValue(e.Env, "ZKSCHED_DB_DSN"),
		t.TempDir(), masterPort, workerPort))
	var procs []*exec.Cmd
	var outs []*syncBuffer
	for _, line := range lines {
		overlay := t.TempDir()
		script := fmt.Sprintf("mount -t overlay overlay -o lowerdir=/etc,upperdir=%[1]s/upper,workdir=%[1]s/work /etc\n"+
			"mkdir -p %[1]s/upper /etc/zksched && cp %[2]s /etc/zksched/zksched.yaml\nexec %[3]s", overlay, config, line)
		if err := os.MkdirAll(filepath.Join(overlay, "upper"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(overlay, "work"), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(unshare[0], append(unshare[1:], "bash", "-euxc", script)...)
		cmd.Dir = repoRoot()
		// The binary under test for bin/zksched, and the test clusters' task supervisor; the
		// settings come from the file alone.
		cmd.Env = append(os.Environ(), "ZKSCHED_BIN="+e.Bin, "GORACE=atexit_sleep_ms=0 halt_on_error=1")
		cmd.Env = append(cmd.Env, testcluster.SupervisorEnv(t)...)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		procs, outs = append(procs, cmd), append(outs, out)
	}
	defer func() {
		if t.Failed() {
			for i, line := range lines {
				t.Logf("==== output of %s ====\n%s", line, outs[i].String())
			}
		}
	}()
	waitReady(t, masterPort)
	waitReady(t, workerPort)
	out, code := e.Run("zk", "nodes", "--json")
	var nodes struct {
		Masters []struct{ ID string } `json:"masters"`
		Workers []struct{ ID string } `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &nodes); code != 0 || err != nil {
		t.Fatalf("zksched zk nodes --json: exit %d, %v\n%s", code, err, out)
	}
	if len(nodes.Masters) != 1 || !strings.HasSuffix(strings.Split(nodes.Masters[0].ID, "_")[0], fmt.Sprintf(":%d", masterPort)) ||
		len(nodes.Workers) != 1 || !strings.HasSuffix(strings.Split(nodes.Workers[0].ID, "_")[0], fmt.Sprintf(":%d", workerPort)) {
		t.Errorf("registered: %s\nwant the master on port %d and the worker on port %d", out, masterPort, workerPort)
	}
	for i, cmd := range procs {
		// unshare and bash exec what they run: the process is the node itself.
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s after SIGTERM: %v, want exit 0", lines[i], err)
		}
	}
}
