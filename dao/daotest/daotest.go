// Package daotest gives a test a migrated database of its own.
package daotest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

// New returns a connection to a fresh, migrated schema that is dropped when the test ends,
// and the DSN that reaches it (for processes the test starts).
func New(t testing.TB) (*dao.DB, string) {
	t.Helper()
	pg := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := dao.Open(ctx, pg.DSN, 20, zerolog.Nop())
	if err != nil {
		t.Fatalf("daotest: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("daotest: %v", err)
	}
	return db, pg.DSN
}

// Submit stores spec (JSON) as a definition of name and creates an instance of it.
func Submit(t testing.TB, db *dao.DB, name string, spec any) int64 {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	err = db.Tx(context.Background(), func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(context.Background(), name, raw)
		if err != nil {
			return err
		}
		id, err = q.WorkflowCreate(context.Background(), name, v, nil, 0, false, nil)
		return err
	})
	if err != nil {
		t.Fatalf("daotest: submit %s: %v", name, err)
	}
	return id
}

// RefuseAudit makes every later insert into the audit_event table of db's schema fail, so a
// test can check that a change whose record cannot be written does not commit.
func RefuseAudit(t testing.TB, db *dao.DB) {
	t.Helper()
	_, err := db.SQL().Exec(`
		CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'audit_event refused by the test'; END $$;
		CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_event FOR EACH ROW EXECUTE FUNCTION refuse_audit()`)
	if err != nil {
		t.Fatalf("daotest: refuse audit inserts: %v", err)
	}
}
