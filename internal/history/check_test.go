package history

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// verdictT stands in for the test that Check judges: it keeps what Check reports instead of
// failing. Anything else (a Fatalf on a broken database) goes to the real test.
type verdictT struct {
	testing.TB
	mu     sync.Mutex
	errors []string
	logs   []string
}

func (v *verdictT) Helper() {}

func (v *verdictT) Errorf(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errors = append(v.errors, fmt.Sprintf(format, args...))
}

func (v *verdictT) Logf(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.logs = append(v.logs, fmt.Sprintf(format, args...))
}

// checkBundle is a migrated zksched schema and a run log to write histories into by hand.
type checkBundle struct {
	db  *dao.DB
	rec *Recorder
}

func setupCheck(t *testing.T) *checkBundle {
	t.Helper()
	t.Parallel()
	db, _ := daotest.New(t)
	return &checkBundle{db: db, rec: New(t)}
}

func (b *checkBundle) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	if _, err := b.db.SQL().Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// workflow submits a workflow instance and sets its state.
func (b *checkBundle) workflow(t *testing.T, state dao.WorkflowState) int64 {
	t.Helper()
	id := daotest.Submit(t, b.db, "wf", map[string]any{"name": "wf", "tasks": []any{}})
	b.exec(t, `UPDATE workflow_instance SET state = $2 WHERE id = $1`, id, string(state))
	return id
}

// task records a task whose attempts ended with outcomes (the last one is its state's), each
// attempt on worker w<n>, 1 s long, starting at base + n s.
func (b *checkBundle) task(t *testing.T, wf int64, name string, base time.Time, outcomes ...dao.Outcome) int64 {
	t.Helper()
	n := len(outcomes)
	state := dao.TaskFailed
	if outcomes[n-1] == dao.OutcomeSucceeded {
		state = dao.TaskSucceeded
	}
	var id int64
	err := b.db.SQL().Get(&id, `INSERT INTO task_instance (workflow_instance_id, name, type, state, worker_id, attempt)
		VALUES ($1, $2, 'shell', $3, $4, $5) RETURNING id`, wf, name, string(state), fmt.Sprintf("w%d", n), n)
	if err != nil {
		t.Fatal(err)
	}
	b.exec(t, `UPDATE task_instance SET output = $2 WHERE id = $1 AND state = 'succeeded'`, id, fmt.Sprintf("ran task %d attempt %d on w%d", id, n, n))
	for i, o := range outcomes {
		start := base.Add(time.Duration(i+1) * time.Second)
		b.exec(t, `INSERT INTO task_attempt (task_instance_id, attempt, worker_id, started_at, ended_at, outcome)
			VALUES ($1, $2, $3, $4, $5, $6)`, id, i+1, fmt.Sprintf("w%d", i+1), start, start.Add(time.Second), string(o))
	}
	return id
}

// run writes the run log of attempt n of a task: alive from start to last, with an end record
// if ended.
func (b *checkBundle) run(t *testing.T, taskID int64, n int, start, last time.Time, ended bool) {
	t.Helper()
	events := []string{EventStart, EventBeat}
	times := []time.Time{start, last}
	if ended {
		events, times = append(events, EventEnd), append(times, last)
	}
	for i := range events {
		if _, err := b.rec.db.Exec(`INSERT INTO run_log (task_instance_id, attempt, worker, event, at) VALUES ($1, $2, $3, $4, $5)`,
			taskID, n, fmt.Sprintf("w%d", n), events[i], times[i]); err != nil {
			t.Fatal(err)
		}
	}
}

// Check passes a clean history and logs its figures.
func TestCheckPasses(t *testing.T) {
	b := setupCheck(t)
	base := time.Now().Add(-time.Minute).Round(time.Millisecond) // PostgreSQL keeps microseconds
	wf := b.workflow(t, dao.WorkflowSucceeded)
	id := b.task(t, wf, "a", base, dao.OutcomeFailedOver, dao.OutcomeSucceeded)
	b.run(t, id, 1, base.Add(time.Second), base.Add(1500*time.Millisecond), false)
	b.run(t, id, 2, base.Add(2*time.Second), base.Add(3*time.Second), true)

	v := &verdictT{TB: t}
	rep := Check(v, b.db, b.rec, Options{Workflows: []int64{wf}, FaultAt: base.Add(1400 * time.Millisecond)})
	if len(v.errors) != 0 {
		t.Fatalf("Check failed a clean history: %q", v.errors)
	}
	if len(rep.Failovers) != 1 || rep.Failovers[0].Elsewhere != 600*time.Millisecond {
		t.Errorf("failovers = %+v, want one, 600ms from the fault to the next start", rep.Failovers)
	}
	logs := strings.Join(v.logs, "\n")
	for _, want := range []string{"timeline", "attempt 2 on w2 started 600 ms after the fault", "history: 1 tasks"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %q:\n%s", want, logs)
		}
	}
}

// Check fails the test on each kind of problem, read from the real tables.
func TestCheckFails(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, b *checkBundle, base time.Time) int64
		want  string
	}{
		{"lost", func(t *testing.T, b *checkBundle, base time.Time) int64 {
			wf := b.workflow(t, dao.WorkflowRunning)
			var id int64
			if err := b.db.SQL().Get(&id, `INSERT INTO task_instance (workflow_instance_id, name, type, state, worker_id, attempt)
				VALUES ($1, 'a', 'shell', 'running', 'w1', 1) RETURNING id`, wf); err != nil {
				t.Fatal(err)
			}
			b.exec(t, `INSERT INTO task_attempt (task_instance_id, attempt, worker_id, started_at) VALUES ($1, 1, 'w1', $2)`, id, base)
			b.run(t, id, 1, base, base.Add(time.Second), false)
			return wf
		}, "lost: workflow instance 1 (wf) is running, not finished by the deadline"},
		{"committed twice", func(t *testing.T, b *checkBundle, base time.Time) int64 {
			wf := b.workflow(t, dao.WorkflowSucceeded)
			id := b.task(t, wf, "a", base, dao.OutcomeSucceeded, dao.OutcomeSucceeded)
			b.run(t, id, 1, base.Add(time.Second), base.Add(2*time.Second), true)
			b.run(t, id, 2, base.Add(2*time.Second), base.Add(3*time.Second), true)
			return wf
		}, "committed twice"},
		{"overlap", func(t *testing.T, b *checkBundle, base time.Time) int64 {
			wf := b.workflow(t, dao.WorkflowSucceeded)
			id := b.task(t, wf, "a", base, dao.OutcomeFailedOver, dao.OutcomeSucceeded)
			b.run(t, id, 1, base.Add(time.Second), base.Add(2250*time.Millisecond), false)
			b.run(t, id, 2, base.Add(2*time.Second), base.Add(3*time.Second), true)
			return wf
		}, "overlap of 250 ms"},
		{"still beating", func(t *testing.T, b *checkBundle, base time.Time) int64 {
			wf := b.workflow(t, dao.WorkflowSucceeded)
			id := b.task(t, wf, "a", base, dao.OutcomeFailedOver, dao.OutcomeSucceeded)
			b.run(t, id, 1, base.Add(time.Second), time.Now().Add(time.Hour), false)
			b.run(t, id, 2, base.Add(2*time.Second), base.Add(3*time.Second), true)
			return wf
		}, "outlived its attempt: task 1 attempt 1 on w1 still beating"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setupCheck(t)
			base := time.Now().Add(-time.Minute).Round(time.Millisecond) // PostgreSQL keeps microseconds
			wf := tt.setup(t, b, base)
			v := &verdictT{TB: t}
			Check(v, b.db, b.rec, Options{Workflows: []int64{wf}, Deadline: 300 * time.Millisecond})
			errs := strings.Join(v.errors, "\n")
			if !strings.Contains(errs, tt.want) {
				t.Fatalf("Check reported %q, want a failure containing %q", v.errors, tt.want)
			}
			if logs := strings.Join(v.logs, "\n"); !strings.Contains(logs, "timeline") {
				t.Errorf("no timeline was logged:\n%s", logs)
			}
		})
	}
}

func TestLoadReadsEveryWorkflowByDefault(t *testing.T) {
	b := setupCheck(t)
	base := time.Now().Add(-time.Minute).Round(time.Millisecond) // PostgreSQL keeps microseconds
	for range 2 {
		wf := b.workflow(t, dao.WorkflowSucceeded)
		id := b.task(t, wf, "a", base, dao.OutcomeSucceeded)
		b.run(t, id, 1, base.Add(time.Second), base.Add(2*time.Second), true)
	}
	h, err := Load(context.Background(), b.db, b.rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Workflows) != 2 || len(h.Tasks) != 2 || len(h.Attempts) != 2 || len(h.Events) != 6 {
		t.Fatalf("loaded %d workflows, %d tasks, %d attempts, %d events; want 2, 2, 2, 6",
			len(h.Workflows), len(h.Tasks), len(h.Attempts), len(h.Events))
	}
	if rep := h.Judge(Options{}); len(rep.Problems) != 0 {
		t.Errorf("problems: %q", rep.Problems)
	}
}
