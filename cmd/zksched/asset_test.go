package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestAssetEmit: `zksched asset emit NAME --output TEXT` writes an event on the database with
// the command line's audit row; --output left out writes one without output; a bad name or a
// missing one is a usage error.
func TestAssetEmit(t *testing.T) {
	t.Parallel()
	db, dsn := daotest.New(t)
	ctx := context.Background()
	config := filepath.Join(t.TempDir(), "zksched.yaml")
	if err := os.WriteFile(config, []byte("db:\n  dsn: '"+dsn+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"asset", "emit", "orders", "--output", "42 rows", "--config", config}, exitOK, "asset orders: event "},
		{[]string{"asset", "emit", "orders", "--json", "--config", config}, exitOK, `"asset": "orders"`},
		{[]string{"asset", "emit", "bad name", "--config", config}, exitUsage, "invalid asset name"},
		{[]string{"asset", "emit", "--config", config}, exitUsage, "want an asset name"},
		{[]string{"asset", "drop", "orders", "--config", config}, exitUsage, "emit"},
	} {
		var out, errOut strings.Builder
		code := run(tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.out) {
			t.Errorf("zksched %s: exit %d, stdout %q, stderr %q; want exit %d saying %q",
				strings.Join(tc.args, " "), code, out.String(), errOut.String(), tc.code, tc.out)
		}
	}
	var evs []struct {
		Output *string `db:"output"`
		By     string  `db:"emitted_by"`
	}
	if err := db.SQL().Select(&evs, `SELECT output, emitted_by FROM asset_event WHERE asset = 'orders' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Output == nil || *evs[0].Output != "42 rows" || evs[1].Output != nil || !strings.HasPrefix(evs[0].By, "cli:") {
		t.Errorf("events = %+v", evs)
	}
	var audited int
	if err := db.SQL().GetContext(ctx, &audited, `SELECT count(*) FROM audit_event WHERE action = $1 AND target = 'asset/orders'`,
		dao.AuditAssetEmit); err != nil || audited != 2 {
		t.Errorf("%d audit rows, %v; want 2", audited, err)
	}
}
