package dao_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// finish makes workflow instance id end in state at ended, having run for took.
func (b *testBundle) finish(t *testing.T, id int64, state string, ended time.Time, took time.Duration) {
	t.Helper()
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE workflow_instance SET state = $2, owner = NULL,
		started_at = $3, ended_at = $4 WHERE id = $1`, id, state, ended.Add(-took), ended); err != nil {
		t.Fatal(err)
	}
}

// TestWorkflowRunsPerHour: the instances ended since the start of the range are counted by
// the UTC hour they ended in and how; older ones and unfinished ones are not.
func TestWorkflowRunsPerHour(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hour := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	for _, c := range []struct {
		state string
		at    time.Time
	}{
		{"succeeded", hour.Add(5 * time.Minute)},
		{"succeeded", hour.Add(59 * time.Minute)},
		{"failed", hour.Add(30 * time.Minute)},
		{"stopped", hour.Add(2*time.Hour + time.Minute)},
		{"failed", hour.Add(2*time.Hour + 2*time.Minute)},
		{"failed", hour.Add(-25 * time.Hour)}, // before the range
	} {
		b.finish(t, daotest.Submit(t, b.db, "wf", map[string]any{"name": "wf"}), c.state, c.at, time.Second)
	}
	daotest.Submit(t, b.db, "wf", map[string]any{"name": "wf"}) // still submitted
	got, err := b.db.WorkflowRunsPerHour(b.ctx, hour.Add(-21*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []dao.HourRuns{
		{Hour: hour, Succeeded: 2, Failed: 1},
		{Hour: hour.Add(2 * time.Hour), Failed: 1, Stopped: 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("runs per hour = %v, want %v", got, want)
	}
	if got, err := b.db.WorkflowRunsPerHour(b.ctx, time.Now().Add(time.Hour)); err != nil || len(got) != 0 {
		t.Errorf("runs per hour of a range with none = %v, %v; want none", got, err)
	}
}

// TestWorkflowDurationPercentiles: percentiles of started → ended, per workflow, the
// workflows that ran most first and no more than asked; instances that ended before the range
// or never started are not counted.
func TestWorkflowDurationPercentiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now().UTC()
	for i := 1; i <= 10; i++ { // busy: 1 s … 10 s
		b.finish(t, daotest.Submit(t, b.db, "busy", map[string]any{"name": "busy"}), "succeeded", now.Add(-time.Minute), time.Duration(i)*time.Second)
	}
	b.finish(t, daotest.Submit(t, b.db, "busy", map[string]any{"name": "busy"}), "failed", now.Add(-48*time.Hour), time.Hour)
	for i := 0; i < 2; i++ {
		b.finish(t, daotest.Submit(t, b.db, "calm", map[string]any{"name": "calm"}), "failed", now.Add(-time.Hour), 2*time.Minute)
	}
	b.finish(t, daotest.Submit(t, b.db, "rare", map[string]any{"name": "rare"}), "succeeded", now.Add(-time.Hour), time.Second)
	never := daotest.Submit(t, b.db, "calm", map[string]any{"name": "calm"})
	if _, err := b.db.SQL().ExecContext(b.ctx, `UPDATE workflow_instance SET state = 'stopped', ended_at = now() WHERE id = $1`, never); err != nil {
		t.Fatal(err)
	}
	got, err := b.db.WorkflowDurationPercentiles(b.ctx, now.Add(-24*time.Hour), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "busy" || got[1].Name != "calm" || got[0].Runs != 10 || got[1].Runs != 2 {
		t.Fatalf("durations = %+v, want busy (10 runs) then calm (2 runs)", got)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1 }
	// percentile_cont interpolates: of 1 … 10 s, p50 is 5.5 s, p90 9.1 s, p99 9.91 s.
	if busy := got[0]; !near(busy.P50, 5500) || !near(busy.P90, 9100) || !near(busy.P99, 9910) {
		t.Errorf("busy's percentiles = %+v, want 5500, 9100, 9910 ms", busy)
	}
	if calm := got[1]; !near(calm.P50, 120000) || !near(calm.P99, 120000) {
		t.Errorf("calm's percentiles = %+v, want 120000 ms", calm)
	}
}

// TestTaskGroupLoad: each group's queue, counted up to the cap, and its running tasks; a
// group with only running tasks is listed too, and no more groups than asked.
func TestTaskGroupLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.queue(t, 7, "big")
	b.queue(t, 2, "small")
	b.queue(t, 3, "busy")
	if claimed, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"busy"}, 3); err != nil || len(claimed) != 3 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if claimed, err := b.db.TaskClaimQueued(b.ctx, "w2", []string{"small"}, 1); err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	got, err := b.db.TaskGroupLoad(b.ctx, 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []dao.GroupLoad{{Group: "big", Queued: 5}, {Group: "busy", Running: 3}, {Group: "small", Queued: 1, Running: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("group load = %+v, want %+v", got, want)
	}
	if got, err := b.db.TaskGroupLoad(b.ctx, 5, 2); err != nil || len(got) != 2 {
		t.Errorf("group load of 2 groups = %+v, %v", got, err)
	}
}

// TestTaskTimelineOfWorkflow: the tasks in the order they started, those not started last,
// each with its attempts, and no more tasks than asked.
func TestTaskTimelineOfWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.queue(t, 3, "g") // t0, t1, t2, each with one retry
	first, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 1)
	if err != nil || len(first) != 1 {
		t.Fatalf("claim: %v %v", first, err)
	}
	// Its first attempt fails and is retried, the second succeeds on another worker.
	if err := b.db.TaskFinishIfRunning(b.ctx, first[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskQueued}); err != nil {
		t.Fatal(err)
	}
	again, err := b.db.TaskClaimQueued(b.ctx, "w2", []string{"g"}, 1)
	if err != nil || len(again) != 1 {
		t.Fatalf("claim again: %v %v", again, err)
	}
	got, err := b.db.TaskTimelineOfWorkflow(b.ctx, wf, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("timeline = %+v, want 2 tasks", got)
	}
	started := got[0]
	if started.StartedAt == nil || len(started.Attempts) == 0 {
		t.Fatalf("first task of the timeline = %+v, want a started one", started)
	}
	var workers []string
	for _, tt := range got {
		for _, a := range tt.Attempts {
			workers = append(workers, fmt.Sprintf("%s#%d:%v", tt.Name, a.Attempt, a.Outcome != nil))
		}
	}
	if got[1].StartedAt != nil || len(got[1].Attempts) != 0 {
		t.Errorf("second task = %+v, want one not started", got[1])
	}
	if len(workers) != 2 || started.Attempts[0].WorkerID != "w1" || *started.Attempts[0].Outcome != dao.OutcomeFailed ||
		started.Attempts[1].WorkerID == "" || started.Attempts[1].Outcome != nil {
		t.Errorf("attempts = %v (%+v), want a failed one on w1 then a running one", workers, started.Attempts)
	}
}

// TestOverviewReadsUseTheirIndexes checks, with EXPLAIN ANALYZE on a history of 100,000
// instances (all but 5,000 of them ended days ago) and a queue of 10,000 tasks in one instance, that
// the statements of the UI's pictures read their ranges through indexes and never scan a
// whole table.
func TestOverviewReadsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	seedHistory(t, db, 100000, 10, 10000)
	if _, err := db.SQL().Exec(`UPDATE workflow_instance SET ended_at = now() - interval '3 days' WHERE state = 'succeeded' AND id % 20 <> 0;
		UPDATE workflow_instance SET started_at = ended_at - interval '1 second' WHERE state = 'succeeded';
		UPDATE task_instance SET state = 'running', worker_id = 'w1', attempt = 1, started_at = now()
			WHERE id IN (SELECT id FROM task_instance WHERE state = 'queued' ORDER BY id LIMIT 20);
		ANALYZE workflow_instance; ANALYZE task_instance; ANALYZE task_attempt`); err != nil {
		t.Fatal(err)
	}
	var big int64
	if err := db.SQL().Get(&big, `SELECT workflow_instance_id FROM task_instance WHERE state = 'queued' LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-24 * time.Hour)
	for _, c := range []struct {
		name, query string
		args        []any
		indexes     []string // each must be read
	}{
		{"runs per hour", dao.RunsPerHourSQL, []any{since}, []string{"workflow_instance_ended"}},
		{"duration percentiles", dao.DurationPercentilesSQL, []any{since, 10}, []string{"workflow_instance_ended"}},
		{"group load", dao.GroupLoadSQL, []any{100000, 20}, []string{"task_instance_queued", "task_instance_running"}},
		{"timeline", dao.TimelineSQL, []any{big, 50}, []string{"task_instance_workflow_instance_id_name_key", "task_attempt_pkey"}},
	} {
		raw := explainAnalyze(t, db, false, c.query, "", c.args...)
		var nodes []string
		walkPlan(t, raw, func(n node) { nodes = append(nodes, n.Type+"|"+n.Relation+"|"+n.Index) })
		joined := strings.Join(nodes, "\n")
		for _, n := range nodes {
			if strings.HasPrefix(n, "Seq Scan|task_") || strings.HasPrefix(n, "Seq Scan|workflow_instance|") {
				t.Errorf("%s: scans a whole table:\n%s", c.name, joined)
			}
		}
		for _, ix := range c.indexes {
			if !strings.Contains(joined, "|"+ix) {
				t.Errorf("%s: does not read %s:\n%s", c.name, ix, joined)
			}
		}
		var doc []struct {
			Time float64 `json:"Execution Time"`
		}
		if err := json.Unmarshal([]byte(raw), &doc); err == nil && len(doc) > 0 {
			t.Logf("%s: %.1f ms", c.name, doc[0].Time)
		}
	}
}
