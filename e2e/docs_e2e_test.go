package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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
	root := ""
	for _, v := range e.Env {
		if r, ok := strings.CutPrefix(v, "ZKSCHED_REGISTRY_ROOT="); ok {
			root = r
		}
	}
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
