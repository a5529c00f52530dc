package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zksched/zksched/internal/testenv"
)

// garbageBundle is a cluster with a leader, a good worker, a fence marker, and znodes of each
// kind holding data that does not parse.
type garbageBundle struct {
	*leaderBundle
	w          *Registration
	badWorker  string
	badMaster  string
	badMarker  string
	goodMarker FenceRecord
}

func setupGarbage(t *testing.T) *garbageBundle {
	t.Helper()
	lb := setupLeader(t)
	info := nodeInfo(RoleWorker, "2")
	info.Running, info.Load = 3, 0.75
	w, err := lb.c.Register(context.Background(), info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	zc := testenv.DialZK(t)
	g := &garbageBundle{leaderBundle: lb, w: w,
		badWorker: "10.0.0.3:1234_1", badMaster: "10.0.0.4:5680_1", badMarker: "10.0.0.5:1234_1"}
	create := func(p string, data []byte) {
		if _, err := zc.Create(lb.zk.Root+p, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	create("/nodes/workers/"+g.badWorker, []byte("\x00\x01 not json at all"))
	create("/nodes/masters/"+g.badMaster, []byte(`{"id":"someone-else","role":"master"}`))
	create("/failover-finish-nodes/worker/"+g.badMarker, []byte("[1,2"))
	create("/stray", []byte(`{"note":"left by an operator"}`))
	g.goodMarker = fenceRecord(RoleWorker, "10.0.0.6:1234_1", lb.m.ID())
	createMarker(t, zc, lb.zk.Root, g.goodMarker)
	return g
}

func TestClusterReportsGarbage(t *testing.T) {
	g := setupGarbage(t)
	cl, err := g.c.Cluster(context.Background())
	if err != nil {
		t.Fatalf("Cluster: %v", err)
	}
	if cl.Leader != g.m.ID() {
		t.Errorf("Leader = %q, want %q", cl.Leader, g.m.ID())
	}
	byID := func(entries []NodeEntry, id string) NodeEntry {
		for _, e := range entries {
			if e.ID == id {
				return e
			}
		}
		t.Fatalf("%s missing from %+v", id, entries)
		return NodeEntry{}
	}
	var de *DataError
	if e := byID(cl.Workers, g.badWorker); e.Info != nil || !errors.As(e.Err, &de) || !bytes.Equal(e.Raw, []byte("\x00\x01 not json at all")) {
		t.Errorf("garbage worker entry = %+v, want Err and Raw", e)
	}
	if e := byID(cl.Masters, g.badMaster); e.Info != nil || !errors.As(e.Err, &de) {
		t.Errorf("master with a foreign id = %+v, want Err", e)
	}
	if e := byID(cl.Workers, g.w.ID()); e.Err != nil || e.Info == nil || e.Info.ID != g.w.ID() {
		t.Errorf("good worker entry = %+v", e)
	}
	if e := byID(cl.Masters, g.m.ID()); e.Err != nil || e.Info == nil {
		t.Errorf("leader entry = %+v", e)
	}
	if len(cl.Fenced) != 2 {
		t.Fatalf("Fenced = %+v, want 2 markers", cl.Fenced)
	}
	for _, m := range cl.Fenced {
		if (m.ID == g.badMarker) != (m.Err != nil) {
			t.Errorf("marker %s: Err %v", m.ID, m.Err)
		}
	}

	var text bytes.Buffer
	if err := WriteCluster(&text, cl, time.Now(), false); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"leader: " + g.m.ID(), "* " + g.m.ID(), "masters (2):", "workers (2):", "fenced (2):",
		"running 3/8", "load 0.75", "heartbeat ", "unparseable data: \"\\x00\\x01 not json at all\"",
		"unparseable data: \"[1,2\"", "by " + g.m.ID(),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("WriteCluster text lacks %q", want)
		}
	}

	var js bytes.Buffer
	if err := WriteCluster(&js, cl, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	var view struct {
		Leader  string `json:"leader"`
		Masters []struct {
			ID     string    `json:"id"`
			Leader bool      `json:"leader"`
			Info   *NodeInfo `json:"info"`
			Error  string    `json:"error"`
		} `json:"masters"`
		Workers []struct {
			ID    string `json:"id"`
			Error string `json:"error"`
			Raw   string `json:"raw"`
		} `json:"workers"`
		Fenced []struct {
			ID     string       `json:"id"`
			Record *FenceRecord `json:"record"`
			Error  string       `json:"error"`
		} `json:"fenced"`
	}
	if err := json.Unmarshal(js.Bytes(), &view); err != nil {
		t.Fatalf("WriteCluster JSON does not parse: %v\n%s", err, js.String())
	}
	if view.Leader != g.m.ID() || len(view.Masters) != 2 || len(view.Workers) != 2 || len(view.Fenced) != 2 {
		t.Fatalf("JSON view = %+v", view)
	}
	for _, m := range view.Masters {
		if (m.ID == g.m.ID()) != m.Leader || (m.ID == g.badMaster) != (m.Error != "") {
			t.Errorf("JSON master %+v", m)
		}
	}
	for _, w := range view.Workers {
		if (w.ID == g.badWorker) != (w.Error != "" && w.Raw != "") {
			t.Errorf("JSON worker %+v", w)
		}
	}
}

func TestWriteClusterEmptyJSON(t *testing.T) {
	t.Parallel()
	var js bytes.Buffer
	if err := WriteCluster(&js, Cluster{}, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(js.String()), "")
	if want := `{"leader":null,"masters":[],"workers":[],"fenced":[],"zookeeper":[]}`; got != want {
		t.Fatalf("empty cluster JSON = %s, want %s", got, want)
	}
}

func TestTreeShowsEverythingReadably(t *testing.T) {
	g := setupGarbage(t)
	nodes, err := g.c.Tree(context.Background())
	if err != nil {
		t.Fatalf("Tree: %v", err)
	}
	if len(nodes) == 0 || nodes[0].Path != g.zk.Root || nodes[0].Depth != 0 {
		t.Fatalf("Tree starts with %+v, want the root", nodes[0])
	}
	kinds := map[string]ZnodeKind{}
	for i, z := range nodes {
		kinds[z.Path] = z.Kind
		if i > 0 && z.Depth > nodes[i-1].Depth+1 {
			t.Errorf("Tree is not depth-first at %s", z.Path)
		}
	}
	for p, want := range map[string]ZnodeKind{
		g.zk.Root + "/nodes/workers/" + g.w.ID():                   KindNode,
		g.zk.Root + "/nodes/workers/" + g.badWorker:                KindNode,
		g.zk.Root + "/failover-finish-nodes/worker/" + g.badMarker: KindMarker,
		g.e.ZnodePath():      KindCandidate,
		g.zk.Root + "/stray": KindOther,
		g.zk.Root + "/nodes": KindOther,
	} {
		if got, ok := kinds[p]; !ok || got != want {
			t.Errorf("kind of %s = %v (present %v), want %v", p, got, ok, want)
		}
	}

	var buf bytes.Buffer
	if err := WriteTree(&buf, nodes, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		g.zk.Root + "  PERSISTENT", "\n  nodes  PERSISTENT", "\n      " + g.w.ID() + "  EPHEMERAL owner 0x",
		"worker  pid 4242", "running 3/8", "candidate \"" + g.m.ID() + "\"",
		g.badWorker + "  PERSISTENT  age ", "unparseable data: \"\\x00\\x01 not json at all\"", "unparseable data: \"[1,2\"",
		"fenced  lost ", `data {"note":"left by an operator"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("WriteTree output lacks %q", want)
		}
	}
}

func TestAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		t    time.Time
		want string
	}{
		{time.Time{}, "-"},
		{now.Add(-1500 * time.Millisecond), "1s"},
		{now.Add(-5*time.Minute - 3*time.Second), "5m3s"},
		{now.Add(-3*time.Hour - 5*time.Minute), "3h5m"},
		{now.Add(-12*24*time.Hour - 4*time.Hour), "12d4h"},
		{now.Add(2 * time.Second), "-2s"},
	}
	for _, tt := range tests {
		if got := age(now, tt.t); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", now.Sub(tt.t), got, tt.want)
		}
	}
}

// Names and data from znodes cannot forge lines or terminal escapes in zk tree and zk nodes:
// what is not printable comes out quoted, so the data's newline makes no line of its own and
// the escape never reaches the terminal.
func TestWriteEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	now := time.Now()
	evil := "\x1b[31mred\nworker 10.0.0.9:1234_1  EPHEMERAL"
	nodes := []Znode{
		{Path: "/zksched", Ctime: now},
		{Path: "/zksched/\u202etxt.exe", Depth: 1, Data: []byte(`{"a":1}` + "\n" + evil), Ctime: now},
		{Path: "/zksched/nodes/workers/w\u200b1", Depth: 1, Kind: KindNode, Role: RoleWorker, Data: []byte(evil), Ctime: now},
	}
	var out bytes.Buffer
	if err := WriteTree(&out, nodes, now); err != nil {
		t.Fatal(err)
	}
	info := &NodeInfo{ID: "w1", Role: RoleWorker, Version: evil, Groups: []string{"\x1b]0;title\x07"}}
	cl := Cluster{Leader: "\u202eleader", Workers: []NodeEntry{{ID: "w1", Info: info}, {ID: "w\u200b2", Raw: []byte(evil), Err: errors.New("bad")}},
		Fenced: []MarkerEntry{{Role: RoleWorker, ID: "x\u202e", Record: FenceRecord{Phase: PhaseFenced, Leader: evil}}},
		// A server's answer (srvr's Mode, Patroni's JSON) is data from the network too.
		ZooKeeper: []Member{{Address: "zk1:2181", Mode: evil}},
		Postgres:  []Member{{Address: evil, Role: "unknown", Note: evil}}}
	if err := WriteCluster(&out, cl, now, false); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\u200b", "\nworker 10.0.0.9"} {
		if strings.Contains(got, bad) {
			t.Errorf("output holds %q unescaped:\n%s", bad, got)
		}
	}
	if lines := strings.Count(got, "\n"); lines != 3+11 {
		t.Errorf("output has %d lines, want 14 (3 znodes, then leader, masters, workers, 2 workers, fenced, 1 marker, "+
			"zookeeper, 1 server, postgres, 1 server):\n%s", lines, got)
	}
	if !strings.Contains(got, `\u202etxt.exe`) || !strings.Contains(got, `\x1b[31mred`) {
		t.Errorf("escaped forms missing:\n%s", got)
	}
}
