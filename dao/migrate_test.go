package dao

import (
	"context"
	"io/fs"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/internal/testenv"
	zsql "github.com/zksched/zksched/sql"
)

// openUnmigrated opens a schema of the test's own with no migration applied.
func openUnmigrated(t *testing.T) (*DB, context.Context) {
	t.Helper()
	pg := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	db, err := Open(ctx, pg.DSN, 2, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, ctx
}

// TestMigrateOutOfOrder applies migrations 00001 and 00003, then a release that adds 00002
// (as when features land in another order than they were numbered): 00002 is applied, not
// refused as a gap.
func TestMigrateOutOfOrder(t *testing.T) {
	t.Parallel()
	db, ctx := openUnmigrated(t)
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

// TestMigrationEndsQueuedKillRequestedTasks: migration 00012 ends killed the queued tasks
// older code left with a kill request (requeued after a kill, a stop or a timeout), which the
// claim no longer takes and which would otherwise wait for ever; other queued tasks stay.
func TestMigrationEndsQueuedKillRequestedTasks(t *testing.T) {
	t.Parallel()
	db, ctx := openUnmigrated(t)
	const m = "00012_kill_requested_never_queued.sql"
	all, err := fs.Sub(zsql.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	files, err := fs.ReadDir(all, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name() >= m {
			continue
		}
		data, err := fs.ReadFile(all, f.Name())
		if err != nil {
			t.Fatal(err)
		}
		before[f.Name()] = &fstest.MapFile{Data: data}
	}
	if _, err := db.migrate(ctx, before); err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.ExecContext(ctx, `
		INSERT INTO workflow_definition (name, version, spec) VALUES ('wf', 1, '{}');
		INSERT INTO workflow_instance (workflow_name, workflow_version, state, started_at) VALUES ('wf', 1, 'running', now());
		INSERT INTO task_instance (workflow_instance_id, name, type, state, attempt, kill_requested)
		SELECT id, n, 'noop', 'queued', 1, n = 'killed' FROM workflow_instance, unnest(ARRAY['killed', 'kept']) n`); err != nil {
		t.Fatal(err)
	}
	// The migrations after m run too; m must be the first.
	if got, err := db.Migrate(ctx); err != nil || len(got) == 0 || got[0] != m {
		t.Fatalf("migrate = %v, %v; want %s first", got, err, m)
	}
	var tasks []struct {
		Name  string  `db:"name"`
		State string  `db:"state"`
		Error *string `db:"error"`
		Ended bool    `db:"ended"`
	}
	if err := db.db.SelectContext(ctx, &tasks, `SELECT name, state, error, ended_at IS NOT NULL AS ended
		FROM task_instance ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 || tasks[0].State != "queued" || tasks[0].Ended ||
		tasks[1].State != "killed" || !tasks[1].Ended || tasks[1].Error == nil || *tasks[1].Error != "killed by an operator" {
		t.Fatalf("tasks after the migration = %+v; want kept queued, killed ended by an operator", tasks)
	}
}
