package dao_test

import (
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

// The powers that get a role past the audit trail's trigger without DDL are read as
// PostgreSQL grants them: all of them for a superuser, only SET session_replication_role for a
// role granted it, none for a role with no more than LOGIN.
func TestRolePowersRead(t *testing.T) {
	t.Parallel()
	pg := testenv.NewPGServer(t)
	admin, err := sql.Open("postgres", pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.Exec(`CREATE ROLE plain LOGIN; CREATE ROLE replica_setter LOGIN;
		GRANT SET ON PARAMETER session_replication_role TO replica_setter`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		role string
		want []string
	}{
		{"postgres", []string{"superuser", "bypassrls", "may set session_replication_role"}},
		{"replica_setter", []string{"may set session_replication_role"}},
		{"plain", nil},
	} {
		dsn := strings.Replace(pg.DSN, "postgres://postgres@", "postgres://"+tt.role+"@", 1)
		db, err := dao.Open(t.Context(), dsn, 1, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		p, err := db.RolePowersRead(t.Context())
		db.Close()
		if err != nil {
			t.Fatalf("%s: %v", tt.role, err)
		}
		if p.Role != tt.role || !slices.Equal(p.Held(), tt.want) {
			t.Errorf("%s: powers %+v, held %q; want %q", tt.role, p, p.Held(), tt.want)
		}
		if w := p.Warning(); (w == "") != (tt.want == nil) || (w != "" && !strings.Contains(w, "audit trail")) {
			t.Errorf("%s: warning %q", tt.role, w)
		}
	}
}
