package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
)

// TestAttackDatabaseOfServices attacks the PostgreSQL of bin/services.sh, the one the tests
// run against, as a local account and as a task would. An account without the password (the
// task user, in psql) is refused as zksched and as postgres over TCP. With zksched's password
// (what a task of the worker's own user could find) the role can neither turn the audit
// trail's trigger off (SET session_replication_role = replica), nor rewrite a row, nor make
// itself a superuser or postgres, nor run a program on the server.
func TestAttackDatabaseOfServices(t *testing.T) {
	t.Parallel()
	u := testenv.TaskUser(t) // skips unless root; CI is root
	dsn, err := url.Parse(testenv.BaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"zksched", "postgres"} {
		try := *dsn
		try.User = url.User(who)
		try.Path = "/postgres"
		// psql as the task user, with nothing of the test's environment (no PGPASSWORD) and -w:
		// never a prompt, only what the server allows without a password.
		cmd := exec.Command("runuser", "-u", u.Username, "--", "psql", "-w", "-X", "-tA", "-d", try.String(), "-c", "SELECT current_user")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.HomeDir}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s connected as %s to %s without a password: %s", u.Username, who, try.Host, out)
		} else if !strings.Contains(string(out), "no password supplied") && !strings.Contains(string(out), "pg_hba.conf rejects") {
			t.Errorf("%s as %s: %v, want a refusal of the connection:\n%s", u.Username, who, err, out)
		}
		t.Logf("%s as %s without a password, %v later: %s", u.Username, who, time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))
	}

	// With the password: a schema with one audit row, and one connection that tries it all.
	db, _ := daotest.New(t)
	ctx := t.Context()
	if err := db.AuditInsert(ctx, dao.AuditEvent{Actor: "alice", Role: "admin", Action: "workflow.submit", Target: "demo",
		Params: dao.AuditParams(map[string]any{}), Client: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	// One transaction, rolled back at the end so that a server that lets a statement through
	// keeps nothing of it; each try in a savepoint of its own, so that one refusal does not
	// abort the next try.
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, stmt := range []string{
		"SET session_replication_role = replica",
		"SET session_replication_role = replica; UPDATE audit_event SET actor = 'mallory'",
		"UPDATE audit_event SET actor = 'mallory'",
		"DELETE FROM audit_event",
		"ALTER ROLE zksched SUPERUSER",
		"ALTER ROLE zksched BYPASSRLS",
		"SET ROLE postgres",
		"COPY (SELECT 1) TO PROGRAM 'true'",
	} {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT try"); err != nil {
			t.Fatal(err)
		}
		_, err := tx.ExecContext(ctx, stmt)
		var pqErr *pq.Error
		if err == nil {
			t.Errorf("%q as zksched with its password succeeded", stmt)
		} else if !errors.As(err, &pqErr) {
			t.Errorf("%q: %v, want an error of the server", stmt, err)
		}
		t.Logf("%q: %v", stmt, err)
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT try"); err != nil {
			t.Fatal(err)
		}
	}
	var actor string
	if err := tx.QueryRowContext(ctx, "SELECT actor FROM audit_event").Scan(&actor); err != nil || actor != "alice" {
		t.Errorf("the audit row's actor is %q (%v), want alice", actor, err)
	}
}

// TestAttackDatabaseRoleIsReported: a master whose role is not a superuser says nothing of it,
// one connected as a superuser warns at start and /readyz says so, and stays ready.
func TestAttackDatabaseRoleIsReported(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master")
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	body := readyz(t, base)
	if body["database_role"] != "zksched" || body["database_role_warning"] != nil {
		t.Errorf("/readyz of a master as zksched = %v, want database_role zksched and no warning", body)
	}
	if strings.Contains(m.Log(), "can rewrite the audit trail") {
		t.Errorf("a master as zksched warned of its role:\n%s", m.Log())
	}

	// The superuser postgres of a server of the test's own.
	pg := testenv.NewPGServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sdb, err := dao.Open(ctx, pg.DSN, 1, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	zk := testenv.ZooKeeper(t)
	su := testcluster.New(t, zk.Servers, zk.Root, pg.DSN)
	sm := su.Master("superuser-master")
	sbase := fmt.Sprintf("http://127.0.0.1:%d", sm.Port)
	serving(t, sm, sbase, nil)
	sm.WaitLog(t, 10*time.Second, "database role postgres is superuser, bypassrls, may set session_replication_role: it can rewrite the audit trail")
	body = readyz(t, sbase)
	if w, _ := body["database_role_warning"].(string); body["database_role"] != "postgres" || !strings.Contains(w, "superuser") {
		t.Errorf("/readyz of a master as postgres = %v, want database_role postgres with a warning", body)
	}
	waitUntil(t, 30*time.Second, "the superuser's master to be ready", func() bool { return readyz(t, sbase)["ready"] == true })
}

// readyz returns the JSON answer of base/readyz, whatever its status.
func readyz(t *testing.T, base string) map[string]any {
	t.Helper()
	r := call(t, client(t, "127.0.0.1", nil), "GET", base+"/readyz", "")
	var body map[string]any
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("/readyz answered %d %q: %v", r.status, r.body, err)
	}
	return body
}
