package testenv

import (
	"database/sql"
	"testing"
)

func TestZooKeeperRootIsCreatedAndRemoved(t *testing.T) {
	t.Parallel()
	var root string
	t.Run("inner", func(t *testing.T) {
		z := ZooKeeper(t)
		root = z.Root
		ok, _, err := DialZK(t).Exists(root)
		if err != nil || !ok {
			t.Fatalf("root %s exists = %v, %v; want true", root, ok, err)
		}
	})
	ok, _, err := DialZK(t).Exists(root)
	if err != nil || ok {
		t.Fatalf("after the test, root %s exists = %v, %v; want false", root, ok, err)
	}
}

func TestPostgresSchemaIsIsolated(t *testing.T) {
	t.Parallel()
	var schema string
	t.Run("inner", func(t *testing.T) {
		pg := Postgres(t)
		schema = pg.Schema
		db, err := sql.Open("postgres", pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec("CREATE TABLE x (a int)"); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.QueryRow("SELECT table_schema FROM information_schema.tables WHERE table_name = 'x' AND table_schema = current_schema()").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != schema {
			t.Fatalf("table x is in schema %q, want %q", got, schema)
		}
	})
	db := openAdmin(t)
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema %s still exists after the test", schema)
	}
}
