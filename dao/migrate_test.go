package dao

import (
	"context"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/internal/testenv"
)

// TestMigrateOutOfOrder applies migrations 00001 and 00003, then a release that adds 00002
// (as when features land in another order than they were numbered): 00002 is applied, not
// refused as a gap.
func TestMigrateOutOfOrder(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := Open(ctx, pg.DSN, 2, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	file := func(table string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("-- +goose Up\nCREATE TABLE " + table + " (id int);\n-- +goose Down\nDROP TABLE " + table + ";\n")}
	}
	first := fstest.MapFS{"00001_a.sql": file("a"), "00003_c.sql": file("c")}
	if got, err := db.migrate(ctx, first); err != nil || !slices.Equal(got, []string{"00001_a.sql", "00003_c.sql"}) {
		t.Fatalf("first migrate = %v, %v", got, err)
	}
	later := fstest.MapFS{"00001_a.sql": file("a"), "00002_b.sql": file("b"), "00003_c.sql": file("c")}
	got, err := db.migrate(ctx, later)
	if err != nil {
		t.Fatalf("migrate with a new 00002 below the applied 00003: %v", err)
	}
	if want := []string{"00002_b.sql"}; !slices.Equal(got, want) {
		t.Fatalf("applied %v, want %v", got, want)
	}
	if _, err := db.SQL().ExecContext(ctx, "INSERT INTO b VALUES (1)"); err != nil {
		t.Fatalf("table of 00002 missing: %v", err)
	}
	if got, err := db.migrate(ctx, later); err != nil || len(got) != 0 {
		t.Fatalf("migrate again = %v, %v; want nothing to do", got, err)
	}
}
