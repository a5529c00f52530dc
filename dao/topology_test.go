package dao_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// A lone PostgreSQL is the primary, at the address the pool reached, with no standby.
func TestReplicationNodesOfALoneServer(t *testing.T) {
	t.Parallel()
	db, dsn := daotest.New(t)
	nodes, err := dao.PostgresNodes(t.Context(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].Role != dao.RolePrimary || !strings.Contains(dsn, strings.Split(nodes[0].Address, ":")[0]) {
		t.Fatalf("nodes = %+v, want the one primary the DSN reaches", nodes)
	}
}

// patroniCluster is what Patroni 3.0.2 answers GET /cluster with, read from bin/cluster.sh's
// topology after its primary's node was killed and before it came back.
const patroniCluster = `{"members": [
 {"name": "pg1", "role": "sync_standby", "state": "running", "api_url": "http://10.77.0.1:8008/patroni", "host": "10.77.0.1", "port": 5432, "timeline": 2, "lag": 0},
 {"name": "pg2", "role": "replica", "state": "stopped", "api_url": "http://10.77.0.2:8008/patroni", "host": "10.77.0.2", "port": 5432, "lag": "unknown"},
 {"name": "pg3", "role": "leader", "state": "running", "api_url": "http://10.77.0.3:8008/patroni", "host": "10.77.0.3", "port": 5432, "timeline": 2}]}`

// With Patroni's REST APIs configured, the roles are Patroni's: its leader is the primary, a
// stopped member's role unknown; a URL that does not answer gives way to the next.
func TestPostgresNodesFromPatroni(t *testing.T) {
	t.Parallel()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cluster" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(patroniCluster))
	}))
	t.Cleanup(ok.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	nodes, err := dao.PostgresNodes(t.Context(), nil, []string{down.URL, ok.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	want := []dao.PostgresNode{
		{Address: "10.77.0.1:5432", Role: dao.RoleStandby, Note: "synchronous"},
		{Address: "10.77.0.2:5432", Role: dao.RoleUnknown, Note: "patroni member pg2 is stopped"},
		{Address: "10.77.0.3:5432", Role: dao.RolePrimary},
	}
	if len(nodes) != len(want) {
		t.Fatalf("nodes = %+v, want %+v", nodes, want)
	}
	for i := range want {
		if nodes[i] != want[i] {
			t.Errorf("node %d = %+v, want %+v", i, nodes[i], want[i])
		}
	}
	if _, err := dao.PostgresNodes(t.Context(), nil, []string{down.URL}); err == nil || !strings.Contains(err.Error(), "no patroni rest api answered") {
		t.Fatalf("every URL down: err = %v, want no patroni rest api answered", err)
	}
}
