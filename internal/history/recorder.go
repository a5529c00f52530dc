package history

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	_ "github.com/lib/pq" // the PostgreSQL driver

	"github.com/zksched/zksched/internal/testenv"
)

//go:embed run-logged.sh
var script string

// Event kinds in the run log.
const (
	// EventStart is written before the task's body runs.
	EventStart = "start"
	// EventBeat is written every 100 ms while the body runs, by the task's own process group.
	EventBeat = "beat"
	// EventEnd is written once the body has succeeded, before the task prints its result.
	EventEnd = "end"
)

// Recorder is a test's run log: a table in a schema of its own on the shared PostgreSQL, which
// the tasks built with Command write to. It lives apart from the database under test so that
// a scenario may restart or cut that one without losing the record of what ran.
type Recorder struct {
	db     *sql.DB
	table  string
	script string
}

// New creates the test's run log, dropped when the test ends.
func New(t testing.TB) *Recorder {
	t.Helper()
	pg := testenv.Postgres(t)
	db, err := sql.Open("postgres", pg.DSN)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	// at has a default so that a hand-written row (in the checker's own tests) needs none; the
	// task command always gives its shell's time.
	if _, err := db.Exec(`CREATE TABLE run_log (
		id               bigserial   PRIMARY KEY,
		task_instance_id bigint      NOT NULL,
		attempt          integer     NOT NULL,
		worker           text        NOT NULL,
		event            text        NOT NULL CHECK (event IN ('start', 'beat', 'end')),
		at               timestamptz NOT NULL DEFAULT clock_timestamp()
	)`); err != nil {
		t.Fatalf("history: create run_log: %v", err)
	}
	path := filepath.Join(t.TempDir(), "run-logged.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatalf("history: %v", err)
	}
	return &Recorder{db: db, table: pg.Schema + ".run_log", script: path}
}

// Env returns the variables the worker processes need so that their tasks reach the run log:
// the run log's place, and worker.task-env to pass it on to the tasks, which inherit nothing
// else of their worker's (ZKSCHED_* variables never). It replaces testcluster's task-env,
// whose GORACE it keeps.
func (r *Recorder) Env() []string {
	return []string{"RUNLOG_DSN=" + testenv.BaseDSN(), "RUNLOG_TABLE=" + r.table, "ZKSCHED_WORKER_TASK_ENV=GORACE,RUNLOG_*"}
}

// Command returns the shell command of a task whose runs are recorded: start, then body (bash)
// with beats while it runs, then end if it succeeded, and a result line "ran task N attempt A
// on WORKER" that becomes the task's output. A body that fails makes the task fail, with no end.
func (r *Recorder) Command(body string) string {
	return "bash " + shellQuote(r.script) + " " + shellQuote(body)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Event is one row of the run log.
type Event struct {
	TaskID  int64
	Attempt int
	Worker  string
	// Kind is EventStart, EventBeat or EventEnd.
	Kind string
	At   time.Time
}

// Events returns the whole run log in time order.
func (r *Recorder) Events(ctx context.Context) ([]Event, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT task_instance_id, attempt, worker, event, at
		FROM run_log ORDER BY at, id`)
	if err != nil {
		return nil, fmt.Errorf("read run log: %w", err)
	}
	defer rows.Close()
	var evs []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.TaskID, &e.Attempt, &e.Worker, &e.Kind, &e.At); err != nil {
			return nil, fmt.Errorf("read run log: %w", err)
		}
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read run log: %w", err)
	}
	return evs, nil
}

// Runs returns the runs the log shows so far; see RunsOf.
func (r *Recorder) Runs(ctx context.Context) ([]Run, error) {
	evs, err := r.Events(ctx)
	if err != nil {
		return nil, err
	}
	return RunsOf(evs), nil
}

// Run is what the run log says of one attempt of a task: when it was seen alive.
type Run struct {
	TaskID  int64
	Attempt int
	Worker  string
	// Start is the time of its start record, or of its first event if the start is missing
	// (Started false).
	Start time.Time
	// Last is the time of its last beat or of its end, whichever is later: the run was alive
	// from Start to Last.
	Last    time.Time
	Beats   int
	Started bool
	// Ended is set when the body ran to completion.
	Ended bool
}

// Span is how long the run was seen alive.
func (r Run) Span() time.Duration { return r.Last.Sub(r.Start) }

// RunsOf groups events into runs, ordered by task and attempt.
func RunsOf(evs []Event) []Run {
	type key struct {
		task    int64
		attempt int
	}
	idx := map[key]int{}
	var runs []Run
	for _, e := range evs {
		k := key{e.TaskID, e.Attempt}
		i, ok := idx[k]
		if !ok {
			i = len(runs)
			idx[k] = i
			runs = append(runs, Run{TaskID: e.TaskID, Attempt: e.Attempt, Worker: e.Worker, Start: e.At, Last: e.At})
		}
		r := &runs[i]
		switch e.Kind {
		case EventStart:
			// The start record is the start, even if a beat's insert happened to land first.
			r.Start, r.Started = e.At, true
		case EventBeat:
			r.Beats++
		case EventEnd:
			r.Ended = true
		}
		if !r.Started && e.At.Before(r.Start) {
			r.Start = e.At
		}
		if e.At.After(r.Last) {
			r.Last = e.At
		}
	}
	sort.Slice(runs, func(i, j int) bool {
		if runs[i].TaskID != runs[j].TaskID {
			return runs[i].TaskID < runs[j].TaskID
		}
		return runs[i].Attempt < runs[j].Attempt
	})
	return runs
}
