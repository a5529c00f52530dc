// Package daotest gives a test a migrated database of its own.
package daotest

import (
	"context"
	"encoding/json"
	"io/fs"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/lifecycle"
	zsql "github.com/zksched/zksched/sql"
	"github.com/zksched/zksched/workflow"
)

// New returns a connection to a fresh, migrated schema that is dropped when the test ends,
// and the DSN that reaches it (for processes the test starts).
func New(t testing.TB) (*dao.DB, string) {
	t.Helper()
	db, dsn := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("daotest: %v", err)
	}
	return db, dsn
}

// NewAtVersion returns a connection to a fresh schema, dropped when the test ends, migrated
// only up to migration version (inclusive): a test of a later migration fills it as older
// code did, then applies the rest with Migrate.
func NewAtVersion(t testing.TB, version int64) *dao.DB {
	t.Helper()
	db, _ := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fsys, err := fs.Sub(zsql.Migrations, "migrations")
	if err != nil {
		t.Fatalf("daotest: %v", err)
	}
	// As Migrate runs them, but without its lock: the schema is the test's alone.
	p, err := goose.NewProvider(goose.DialectPostgres, db.SQL().DB, fsys, goose.WithAllowOutofOrder(true))
	if err != nil {
		t.Fatalf("daotest: %v", err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatalf("daotest: migrate to version %d: %v", version, err)
	}
	return db
}

// open connects to a fresh, empty schema of the test's own.
func open(t testing.TB) (*dao.DB, string) {
	t.Helper()
	pg := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := dao.Open(ctx, pg.DSN, 20, zerolog.Nop())
	if err != nil {
		t.Fatalf("daotest: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db, pg.DSN
}

// Facts returns the facts of the definition whose spec is raw (JSON), read as the masters
// read a stored definition: decoded into a workflow.Spec. Tests that store hand-written
// specs pass them to DefinitionEnsure.
func Facts(t testing.TB, raw []byte) dao.DefinitionFacts {
	t.Helper()
	var spec workflow.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatalf("daotest: decode spec %s: %v", raw, err)
	}
	return lifecycle.Facts(&spec)
}

// Submit stores spec (JSON) as a definition of name, with its Facts, and creates an instance
// of it.
func Submit(t testing.TB, db *dao.DB, name string, spec any) int64 {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	facts := Facts(t, raw)
	var id int64
	err = db.Tx(context.Background(), func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(context.Background(), name, raw, facts)
		if err != nil {
			return err
		}
		id, err = q.WorkflowCreate(context.Background(), dao.Submission{Name: name, Version: v})
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
