package dao

import (
	"context"
	"io/fs"
	"maps"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/pressly/goose/v3"
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
	var from []string // m and the migrations after it
	files, err := fs.ReadDir(all, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name() >= m {
			from = append(from, f.Name())
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
	if got, err := db.Migrate(ctx); err != nil || !slices.Equal(got, from) {
		t.Fatalf("migrate = %v, %v; want %v", got, err, from)
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

// TestMigrationEndReason: migration 00028 gives the instances ended before it the reason
// their error text says (a task killed running, whose text said an operator whoever asked,
// takes its instance's), leaves the others NULL, and its down step puts 00022's functions
// back and drops the column; up again applies.
func TestMigrationEndReason(t *testing.T) {
	t.Parallel()
	db, ctx := openUnmigrated(t)
	const m = "00028_end_reason.sql"
	all, err := fs.Sub(zsql.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	before, upto := fstest.MapFS{}, fstest.MapFS{}
	files, err := fs.ReadDir(all, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := fs.ReadFile(all, f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if f.Name() <= m {
			upto[f.Name()] = &fstest.MapFile{Data: data}
		}
		if f.Name() < m {
			before[f.Name()] = &fstest.MapFile{Data: data}
		}
	}
	if _, err := db.migrate(ctx, before); err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.ExecContext(ctx, `
		INSERT INTO workflow_definition (name, version, spec, has_timeout, when_full_skip) VALUES ('wf', 1, '{}', false, false);
		INSERT INTO workflow_instance (workflow_name, workflow_version, state, error, started_at, ended_at)
		SELECT 'wf', 1, s, e, now(), now() FROM (VALUES
			(1, 'failed', 'workflow timeout 1s exceeded'),
			(2, 'stopped', 'stopped by an operator'),
			(3, 'stopped', 'stopped: workflow instance 9 was submitted with the same concurrency key "k" (when-full: cancel-oldest)'),
			(4, 'failed', 'tasks did not succeed: a failed')) AS x(n, s, e) ORDER BY n;
		INSERT INTO task_instance (workflow_instance_id, name, type, state, attempt, error, ended_at)
		SELECT (SELECT min(id) FROM workflow_instance) + w - 1, n, 'noop', s, 1, e, now() FROM (VALUES
			(1, 'running-killed', 'killed', 'killed by an operator'),
			(1, 'queued-killed', 'killed', 'killed: workflow timeout 1s exceeded'),
			(2, 'stopped', 'killed', 'killed: the workflow was stopped'),
			(4, 'before-it-ran', 'killed', 'killed by an operator before it ran'),
			(4, 'operator', 'killed', 'killed by an operator'),
			(4, 'timed-out', 'failed', 'timed out after 1s'),
			(4, 'failed', 'failed', 'exit status 1')) AS x(w, n, s, e)`); err != nil {
		t.Fatal(err)
	}
	if got, err := db.migrate(ctx, upto); err != nil || !slices.Equal(got, []string{m}) {
		t.Fatalf("migrate = %v, %v; want %s", got, err, m)
	}
	reasons := func(query string) map[string]string {
		t.Helper()
		var rows []struct {
			Key    string  `db:"key"`
			Reason *string `db:"end_reason"`
		}
		if err := db.db.SelectContext(ctx, &rows, query); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range rows {
			out[r.Key] = "-"
			if r.Reason != nil {
				out[r.Key] = *r.Reason
			}
		}
		return out
	}
	wantWorkflows := map[string]string{"1": "timeout", "2": "stop", "3": "cancel-oldest", "4": "-"}
	if got := reasons(`SELECT (id - (SELECT min(id) FROM workflow_instance) + 1)::text AS key, end_reason FROM workflow_instance`); !maps.Equal(got, wantWorkflows) {
		t.Errorf("workflow reasons = %v; want %v", got, wantWorkflows)
	}
	wantTasks := map[string]string{"running-killed": "workflow-timeout", "queued-killed": "workflow-timeout", "stopped": "stop",
		"before-it-ran": "operator-kill", "operator": "operator-kill", "timed-out": "timeout", "failed": "-"}
	if got := reasons(`SELECT name AS key, end_reason FROM task_instance`); !maps.Equal(got, wantTasks) {
		t.Errorf("task reasons = %v; want %v", got, wantTasks)
	}

	p, err := goose.NewProvider(goose.DialectPostgres, db.db.DB, upto)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := p.Down(ctx); err != nil || r.Source.Path != m {
		t.Fatalf("down = %v, %v; want %s undone", r, err, m)
	}
	var left struct {
		Columns int  `db:"columns"`
		Domain  bool `db:"domain"`
		OldText bool `db:"old_text"`
	}
	if err := db.db.GetContext(ctx, &left, `SELECT
		(SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'end_reason') AS columns,
		EXISTS (SELECT 1 FROM pg_type WHERE typname = 'end_reason' AND typnamespace = current_schema()::regnamespace) AS domain,
		(SELECT prosrc LIKE '%NEW.error LIKE %' FROM pg_proc WHERE proname = 'notification_workflow_ended'
			AND pronamespace = current_schema()::regnamespace) AS old_text`); err != nil {
		t.Fatal(err)
	}
	if left.Columns != 0 || left.Domain || !left.OldText {
		t.Fatalf("after down: %+v; want no end_reason column nor domain, 00022's function back", left)
	}
	if got, err := db.migrate(ctx, upto); err != nil || !slices.Equal(got, []string{m}) {
		t.Fatalf("up again = %v, %v; want %s", got, err, m)
	}
}
