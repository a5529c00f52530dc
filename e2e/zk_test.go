package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/registry"
)

// TestZKInspection reads a live cluster with `zksched zk tree` and `zk nodes`: a master, a
// worker, a worker killed with kill -9 and failed over (its fence marker), and znodes an
// operator or a bug left with garbage data, which are shown as such and break nothing.
func TestZKInspection(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	var root string
	for _, kv := range e.Env {
		if v, ok := strings.CutPrefix(kv, "ZKSCHED_REGISTRY_ROOT="); ok {
			root = v
		}
	}
	master := e.Master("master")
	worker := e.Worker("worker")
	doomed := e.Worker("doomed")
	masterID, workerID, doomedID := master.ID(t, 20*time.Second), worker.ID(t, 20*time.Second), doomed.ID(t, 20*time.Second)
	master.WaitLog(t, 20*time.Second, "became the leader")
	doomed.WaitLog(t, 20*time.Second, `"message":"registered"`)
	worker.WaitLog(t, 20*time.Second, `"message":"registered"`)

	conn := testenv.DialZK(t)
	for p, data := range map[string]string{
		root + "/nodes/workers/10.9.9.9:5679_1700000000000":                "\x00\x01 not json at all",
		root + "/failover-finish-nodes/worker/10.9.9.8:5679_1700000000000": "[1,2",
		root + "/nodes/masters/not-an-identity":                            `{"id": "someone-else"}`,
		root + "/stray":                                                    "left by an operator",
	} {
		if _, err := conn.Create(p, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	if err := doomed.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Session timeout (2 s) plus failover delay (2 s), then the marker is finished.
	var cl struct {
		Leader  *string `json:"leader"`
		Masters []struct {
			ID     string             `json:"id"`
			Leader bool               `json:"leader"`
			Info   *registry.NodeInfo `json:"info"`
			Error  string             `json:"error"`
		} `json:"masters"`
		Workers []struct {
			ID    string             `json:"id"`
			Info  *registry.NodeInfo `json:"info"`
			Error string             `json:"error"`
			Raw   string             `json:"raw"`
		} `json:"workers"`
		Fenced []struct {
			ID     string                `json:"id"`
			Record *registry.FenceRecord `json:"record"`
			Error  string                `json:"error"`
		} `json:"fenced"`
		ZooKeeper []registry.Member `json:"zookeeper"`
		Postgres  []registry.Member `json:"postgres"`
	}
	waitUntil(t, 30*time.Second, "the killed worker's marker to finish", func() bool {
		out, code := e.Run("zk", "nodes", "--json")
		if code != 0 {
			t.Fatalf("zk nodes --json: exit %d\n%s", code, out)
		}
		if err := json.Unmarshal([]byte(out), &cl); err != nil {
			t.Fatalf("zk nodes --json is not JSON: %v\n%s", err, out)
		}
		for _, f := range cl.Fenced {
			if f.ID == doomedID && f.Record != nil && f.Record.Phase == registry.PhaseFinished {
				return true
			}
		}
		return false
	})
	if len(cl.ZooKeeper) != 1 || cl.ZooKeeper[0].Mode != "standalone" {
		t.Errorf("zookeeper = %+v, want the test's one standalone server", cl.ZooKeeper)
	}
	if len(cl.Postgres) != 1 || cl.Postgres[0].Role != "primary" {
		t.Errorf("postgres = %+v, want the test's one primary", cl.Postgres)
	}
	if cl.Leader == nil || *cl.Leader != masterID {
		t.Errorf("leader = %v, want %s", cl.Leader, masterID)
	}
	masters := map[string]string{}
	for _, m := range cl.Masters {
		masters[m.ID] = m.Error
		if m.ID == masterID && (!m.Leader || m.Info == nil || m.Info.HTTPAddr == "") {
			t.Errorf("the master's entry = %+v", m)
		}
	}
	if len(masters) != 2 || masters[masterID] != "" || masters["not-an-identity"] == "" {
		t.Errorf("masters = %v, want the master and the foreign entry with an error", masters)
	}
	workers := map[string]string{}
	for _, w := range cl.Workers {
		workers[w.ID] = w.Error
		if w.ID == workerID && (w.Info == nil || w.Info.Slots != 16 || len(w.Info.Groups) != 1) {
			t.Errorf("the worker's entry = %+v", w)
		}
		if w.ID == "10.9.9.9:5679_1700000000000" && w.Raw != "\x00\x01 not json at all" {
			t.Errorf("the garbage worker's raw data = %q", w.Raw)
		}
	}
	if _, ok := workers[doomedID]; ok || len(workers) != 2 || workers[workerID] != "" || workers["10.9.9.9:5679_1700000000000"] == "" {
		t.Errorf("workers = %v, want the live worker and the garbage one, not the killed one", workers)
	}
	for _, f := range cl.Fenced {
		switch f.ID {
		case doomedID:
			if f.Record.Leader != masterID || f.Record.Role != registry.RoleWorker {
				t.Errorf("the killed worker's record = %+v", f.Record)
			}
		case "10.9.9.8:5679_1700000000000":
			if f.Error == "" || f.Record != nil {
				t.Errorf("the garbage marker = %+v, want an error", f)
			}
		default:
			t.Errorf("unexpected marker %s", f.ID)
		}
	}

	out, code := e.Run("zk", "nodes")
	if code != 0 {
		t.Fatalf("zk nodes: exit %d\n%s", code, out)
	}
	for _, want := range []string{"leader: " + masterID, "* " + masterID, "masters (2):", "workers (2):", "fenced (2):",
		"running 0/16", `unparseable data: "\x00\x01 not json at all"`, `unparseable data: "[1,2"`, "finished  lost ", "by " + masterID} {
		if !strings.Contains(out, want) {
			t.Errorf("zk nodes lacks %q:\n%s", want, out)
		}
	}

	out, code = e.Run("zk", "tree")
	if code != 0 {
		t.Fatalf("zk tree: exit %d\n%s", code, out)
	}
	for _, want := range []string{root + "  PERSISTENT", "\n  election  PERSISTENT", `candidate "` + masterID + `"`,
		"\n      " + workerID + "  EPHEMERAL owner 0x", "worker  pid ", "\n      " + masterID + "  EPHEMERAL owner 0x",
		"10.9.9.9:5679_1700000000000  PERSISTENT", `unparseable data: "\x00\x01 not json at all"`,
		"\n      " + doomedID + "  PERSISTENT  age ", "finished  lost ", "\n  stray  PERSISTENT  age ", `data "left by an operator"`} {
		if !strings.Contains(out, want) {
			t.Errorf("zk tree lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\n      "+doomedID+"  EPHEMERAL") {
		t.Errorf("zk tree still shows the killed worker's znode")
	}
	// The nodes ignore the garbage: both live ones still work.
	for _, p := range []interface{ Log() string }{master, worker} {
		if strings.Contains(p.Log(), `"level":"error"`) {
			t.Errorf("a node logged an error after the garbage appeared:\n%s", p.Log())
		}
	}
}
