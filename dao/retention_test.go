package dao_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// retentionBundle is a schema with a definition "wf" whose instances the tests write by hand,
// with the end times they need.
type retentionBundle struct {
	*testBundle
}

func setupRetention(t *testing.T) *retentionBundle {
	t.Helper()
	b := &retentionBundle{setup(t)}
	daotest.Submit(t, b.db, "wf", map[string]any{"name": "wf"})
	if _, err := b.db.SQL().Exec(`DELETE FROM workflow_instance`); err != nil {
		t.Fatal(err)
	}
	return b
}

// instance writes a workflow instance in state that ended ago (for a finished state) with one
// task "t" that has an attempt, a log line and a checkpoint, and returns its id and its task's.
func (b *retentionBundle) instance(t *testing.T, state string, ago time.Duration) (wf, task int64) {
	t.Helper()
	ended := "NULL"
	taskState := "running"
	if state == "succeeded" || state == "failed" || state == "stopped" {
		ended = fmt.Sprintf("now() - make_interval(secs => %f)", ago.Seconds())
		taskState = map[string]string{"succeeded": "succeeded", "failed": "failed", "stopped": "killed"}[state]
	}
	err := b.db.SQL().QueryRow(`INSERT INTO workflow_instance (workflow_name, workflow_version, state, owner, started_at, ended_at)
		VALUES ('wf', 1, $1, CASE WHEN $1 IN ('submitted', 'running') THEN 'm1' END, now() - interval '400 days', `+ended+`)
		RETURNING id`, state).Scan(&wf)
	if err != nil {
		t.Fatal(err)
	}
	err = b.db.SQL().QueryRow(`INSERT INTO task_instance (workflow_instance_id, name, type, state, worker_id, attempt, ended_at)
		VALUES ($1, 't', 'noop', $2, 'w1', 1, (SELECT ended_at FROM workflow_instance WHERE id = $1)) RETURNING id`,
		wf, taskState).Scan(&task)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO task_attempt (task_instance_id, attempt, worker_id, started_at, outcome) VALUES ($1, 1, 'w1', now(), 'succeeded')`,
		`INSERT INTO task_log (task_instance_id, attempt, seq, data) VALUES ($1, 1, 0, 'line')`,
		`INSERT INTO task_checkpoint (task_instance_id, step, attempt, output) VALUES ($1, 's', 1, 'out')`,
	} {
		if _, err := b.db.SQL().Exec(stmt, task); err != nil {
			t.Fatal(err)
		}
	}
	return wf, task
}

// link makes child the child workflow instance of parent's task.
func (b *retentionBundle) link(t *testing.T, parent, parentTask, child int64) {
	t.Helper()
	if _, err := b.db.SQL().Exec(`UPDATE task_instance SET child_workflow_instance_id = $2 WHERE id = $1`, parentTask, child); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.SQL().Exec(`UPDATE workflow_instance SET parent_task_instance_id = $1, parent_workflow_instance_id = $3
		WHERE id = $2`, parentTask, child, parent); err != nil {
		t.Fatal(err)
	}
}

// ids returns the ids query selects, in order.
func (b *retentionBundle) ids(t *testing.T, query string, args ...any) []int64 {
	t.Helper()
	var ids []int64
	if err := b.db.SQL().Select(&ids, query, args...); err != nil {
		t.Fatal(err)
	}
	return ids
}

func (b *retentionBundle) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := b.db.SQL().Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPurgeFinishedInstances: finished instances past the period go, oldest first, in
// batches, with their tasks, attempts, logs and checkpoints; their fire stays, unlinked.
// Active instances, recent ones, the children of an active parent and the parents of an
// active child stay.
func TestPurgeFinishedInstances(t *testing.T) {
	t.Parallel()
	b := setupRetention(t)
	const keep = time.Hour
	oldest, oldestTask := b.instance(t, "failed", 5*time.Hour)
	older, _ := b.instance(t, "stopped", 4*time.Hour)
	old, _ := b.instance(t, "succeeded", 3*time.Hour)
	recent, _ := b.instance(t, "succeeded", 30*time.Minute)
	running, runningTask := b.instance(t, "running", 0)
	submitted, _ := b.instance(t, "submitted", 0)
	// A finished child of a running parent, and a finished parent of a running child.
	childOfRunning, _ := b.instance(t, "succeeded", 6*time.Hour)
	b.link(t, running, runningTask, childOfRunning)
	parentOfRunning, parentTask := b.instance(t, "failed", 6*time.Hour)
	runningChild, _ := b.instance(t, "running", 0)
	b.link(t, parentOfRunning, parentTask, runningChild)
	// A finished parent and its finished child both go.
	doneParent, doneParentTask := b.instance(t, "succeeded", 2*time.Hour)
	doneChild, _ := b.instance(t, "succeeded", 2*time.Hour)
	b.link(t, doneParent, doneParentTask, doneChild)
	if _, err := b.db.SQL().Exec(`INSERT INTO schedule (workflow_name, workflow_version, cron, timezone, start_at, misfire)
		VALUES ('wf', 1, '* * * * *', 'UTC', now(), 'skip')`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.SQL().Exec(`INSERT INTO schedule_fire (workflow_name, fire_time, kind, workflow_instance_id, outcome, fired_by)
		VALUES ('wf', now(), 'cron', $1, 'created', 'm1')`, oldest); err != nil {
		t.Fatal(err)
	}

	got, err := b.db.PurgeFinishedInstances(b.ctx, keep, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := (dao.Purged{"workflow_instance": 2, "task_instance": 2, "task_attempt": 2, "task_log": 2, "task_checkpoint": 2}); !equalPurged(got, want) {
		t.Errorf("first batch purged %v, want %v", got, want)
	}
	if left := b.ids(t, `SELECT id FROM workflow_instance WHERE id = ANY($1) ORDER BY id`, pq.Array([]int64{oldest, older})); len(left) != 0 {
		t.Errorf("after the first batch instances %v are left; the two oldest should have gone first", left)
	}
	total := dao.Purged{}
	total.Add(got)
	for {
		p, err := b.db.PurgeFinishedInstances(b.ctx, keep, 2)
		if err != nil {
			t.Fatal(err)
		}
		total.Add(p)
		if p["workflow_instance"] < 2 {
			break
		}
	}
	if total["workflow_instance"] != 5 || total["task_instance"] != 5 {
		t.Errorf("purged %v in all, want 5 instances and their 5 tasks", total)
	}
	left := b.ids(t, `SELECT id FROM workflow_instance ORDER BY id`)
	want := []int64{recent, running, submitted, childOfRunning, parentOfRunning, runningChild}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("instances left %v, want %v (old %d should be gone)", left, want, old)
	}
	for _, table := range []string{"task_attempt", "task_log", "task_checkpoint"} {
		if n := b.count(t, `SELECT count(*) FROM `+table); n != int64(len(want)) {
			t.Errorf("%s has %d rows left, want %d: one for each instance left", table, n, len(want))
		}
	}
	if n := b.count(t, `SELECT count(*) FROM task_instance WHERE id = $1`, oldestTask); n != 0 {
		t.Errorf("the oldest instance's task is still there")
	}
	if n := b.count(t, `SELECT count(*) FROM schedule_fire WHERE workflow_instance_id IS NULL`); n != 1 {
		t.Errorf("the purged instance's fire: %d unlinked fire rows, want 1", n)
	}

	// Once the running parent and child end, and the period passes, the rest goes.
	if _, err := b.db.SQL().Exec(`UPDATE workflow_instance SET state = 'succeeded', owner = NULL, ended_at = now() - interval '2 hours'
		WHERE state IN ('submitted', 'running')`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.PurgeFinishedInstances(b.ctx, keep, 100); err != nil {
		t.Fatal(err)
	}
	if left := b.ids(t, `SELECT id FROM workflow_instance ORDER BY id`); !slices.Equal(left, []int64{recent}) {
		t.Errorf("after every instance ended, instances left %v, want only the recent %d", left, recent)
	}
}

func equalPurged(got, want dao.Purged) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	for k, v := range got {
		if want[k] != v {
			return false
		}
	}
	return true
}

// TestPurgeFinishedLogs: the logs of finished instances past the period go, the instances
// and the rest of their tasks stay; logs of active and recent instances stay. A later batch
// goes on past the last, and an instance that ends again (a rerun) has its new logs purged.
func TestPurgeFinishedLogs(t *testing.T) {
	t.Parallel()
	b := setupRetention(t)
	const keep = time.Hour
	var old []int64
	for i := range 5 {
		wf, _ := b.instance(t, "succeeded", time.Duration(10-i)*time.Hour)
		old = append(old, wf)
	}
	recent, _ := b.instance(t, "failed", 10*time.Minute)
	running, _ := b.instance(t, "running", 0)

	rows, instances, err := b.db.PurgeFinishedLogs(b.ctx, keep, 3)
	if err != nil || rows != 3 || instances != 3 {
		t.Fatalf("first batch: %d log rows of %d instances, %v; want 3 of 3", rows, instances, err)
	}
	rows, instances, err = b.db.PurgeFinishedLogs(b.ctx, keep, 3)
	if err != nil || rows != 2 || instances != 2 {
		t.Fatalf("second batch: %d log rows of %d instances, %v; want 2 of 2", rows, instances, err)
	}
	rows, instances, err = b.db.PurgeFinishedLogs(b.ctx, keep, 3)
	if err != nil || rows != 0 || instances != 0 {
		t.Fatalf("third batch: %d log rows of %d instances, %v; want nothing left", rows, instances, err)
	}
	logged := b.ids(t, `SELECT DISTINCT t.workflow_instance_id FROM task_log l JOIN task_instance t ON t.id = l.task_instance_id ORDER BY 1`)
	if want := []int64{recent, running}; !slices.Equal(logged, want) {
		t.Errorf("instances with logs %v, want %v", logged, want)
	}
	if n := b.count(t, `SELECT count(*) FROM workflow_instance`); n != 7 {
		t.Errorf("%d instances left, want all 7: only logs go", n)
	}
	if n := b.count(t, `SELECT count(*) FROM task_attempt`); n != 7 {
		t.Errorf("%d attempts left, want all 7: only logs go", n)
	}

	// The oldest is rerun: it gets a new log line and ends again, 2 hours ago, later than
	// the others.
	task := b.count(t, `SELECT id FROM task_instance WHERE workflow_instance_id = $1`, old[0])
	if _, err := b.db.SQL().Exec(`INSERT INTO task_log (task_instance_id, attempt, seq, data) VALUES ($1, 2, 0, 'again')`, task); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.SQL().Exec(`UPDATE workflow_instance SET ended_at = now() - interval '2 hours' WHERE id = $1`, old[0]); err != nil {
		t.Fatal(err)
	}
	rows, instances, err = b.db.PurgeFinishedLogs(b.ctx, keep, 3)
	if err != nil || rows != 1 || instances != 1 {
		t.Fatalf("after a rerun: %d log rows of %d instances, %v; want its 1 of 1", rows, instances, err)
	}
}

// TestPurgeFailoverEventsFiresAndAudit: each table loses its rows past the period alone;
// an unfinished failover stays whatever its age.
func TestPurgeFailoverEventsFiresAndAudit(t *testing.T) {
	t.Parallel()
	b := setupRetention(t)
	const keep = time.Hour
	for _, stmt := range []string{
		`INSERT INTO failover_event (node_id, role, lost_at, fenced_at, finished_at, leader) VALUES
			('old', 'worker', now() - interval '3 hours', now() - interval '3 hours', now() - interval '3 hours', 'm1'),
			('older', 'master', now() - interval '4 hours', now() - interval '4 hours', now() - interval '4 hours', 'm1'),
			('unfinished', 'worker', now() - interval '5 hours', now() - interval '5 hours', NULL, 'm1'),
			('recent', 'worker', now(), now(), now(), 'm1')`,
		`INSERT INTO schedule (workflow_name, workflow_version, cron, timezone, start_at, misfire)
			VALUES ('wf', 1, '* * * * *', 'UTC', now(), 'skip')`,
		`INSERT INTO schedule_fire (workflow_name, fire_time, kind, outcome, fired_by, created_at)
			SELECT 'wf', now() - make_interval(mins => 50 * g), 'cron', 'skipped', 'm1', now() - make_interval(mins => 50 * g)
			FROM generate_series(0, 4) g`,
		`INSERT INTO audit_event (actor, role, action, target, client, outcome, at)
			SELECT 'alice', 'admin', 'task.kill', 'task-instance/' || g, '127.0.0.1', 'ok', now() - make_interval(mins => 50 * g)
			FROM generate_series(0, 4) g`,
	} {
		if _, err := b.db.SQL().Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}

	if n, err := b.db.PurgeFailoverEvents(b.ctx, keep, 1); err != nil || n != 1 {
		t.Fatalf("failover events, batch 1: %d, %v; want 1", n, err)
	}
	if n, err := b.db.PurgeFailoverEvents(b.ctx, keep, 10); err != nil || n != 1 {
		t.Fatalf("failover events, batch 10: %d, %v; want the 1 left", n, err)
	}
	var nodes []string
	if err := b.db.SQL().Select(&nodes, `SELECT node_id FROM failover_event ORDER BY node_id`); err != nil {
		t.Fatal(err)
	}
	if want := []string{"recent", "unfinished"}; !slices.Equal(nodes, want) {
		t.Errorf("failover events left %v, want %v", nodes, want)
	}

	if n, err := b.db.PurgeFires(b.ctx, keep, 10); err != nil || n != 3 {
		t.Fatalf("fires: %d, %v; want the 3 over an hour old", n, err)
	}
	if n := b.count(t, `SELECT count(*) FROM schedule_fire WHERE created_at > now() - interval '61 minutes'`); n != 2 {
		t.Errorf("%d recent fires left, want 2", n)
	}

	if n, err := b.db.PurgeAudit(b.ctx, keep, 2); err != nil || n != 2 {
		t.Fatalf("audit, batch 2: %d, %v; want 2", n, err)
	}
	if n, err := b.db.PurgeAudit(b.ctx, keep, 10); err != nil || n != 1 {
		t.Fatalf("audit, batch 10: %d, %v; want the 1 left", n, err)
	}
	if n := b.count(t, `SELECT count(*) FROM audit_event`); n != 2 {
		t.Errorf("%d audit rows left, want the 2 under an hour old", n)
	}
	if _, err := b.db.PurgeAudit(b.ctx, 0, 10); err == nil {
		t.Error("PurgeAudit with no retention succeeded; want it refused")
	}
}

// TestPurgeAssetEvents: the events past the period that no consumer has queued go, consumed
// or never waited for, with their consumption rows; an event a consumer still waits on stays
// whatever its age, and so does every recent one.
func TestPurgeAssetEvents(t *testing.T) {
	t.Parallel()
	b := setupRetention(t)
	const keep = time.Hour
	ids := map[string]int64{}
	for _, e := range []struct{ name, asset, age string }{
		{"consumed", "a", "3 hours"}, {"waited-on", "a", "4 hours"}, {"unwanted", "z", "5 hours"},
		{"recent", "a", "1 minute"}, {"other-waited-on", "b", "6 hours"}, {"consumed-later", "b", "2 hours"},
	} {
		var id int64
		if err := b.db.SQL().Get(&id, `INSERT INTO asset_event (asset, output, emitted_by, created_at)
			VALUES ($1, $2, 'test', now() - $3::interval) RETURNING id`, e.asset, e.name, e.age); err != nil {
			t.Fatal(err)
		}
		ids[e.name] = id
	}
	for _, stmt := range []string{
		`INSERT INTO asset_consumer (workflow_name, workflow_version, all_of, assets) VALUES ('wf', 1, true, '{a,b}')`,
		fmt.Sprintf(`INSERT INTO asset_pending (consumer, asset, event_id) VALUES ('wf', 'a', %d), ('wf', 'b', %d)`,
			ids["waited-on"], ids["other-waited-on"]),
		fmt.Sprintf(`INSERT INTO asset_consumption (consumer, event_id, workflow_instance_id) VALUES
			('wf', %d, 100), ('other', %d, 101), ('wf', %d, 102), ('wf', %d, 102)`,
			ids["consumed"], ids["consumed"], ids["recent"], ids["consumed-later"]),
	} {
		if _, err := b.db.SQL().Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	p, err := b.db.PurgeAssetEvents(b.ctx, keep, 2)
	if want := (dao.Purged{"asset_event": 2, "asset_consumption": 2}); err != nil || !equalPurged(p, want) {
		t.Fatalf("batch 2: %v, %v; want the 2 oldest that no one waits on, %v", p, err, want)
	}
	p, err = b.db.PurgeAssetEvents(b.ctx, keep, 10)
	if want := (dao.Purged{"asset_event": 1, "asset_consumption": 1}); err != nil || !equalPurged(p, want) {
		t.Fatalf("batch 10: %v, %v; want the one left, %v", p, err, want)
	}
	var left []string
	if err := b.db.SQL().Select(&left, `SELECT output FROM asset_event ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if want := []string{"waited-on", "recent", "other-waited-on"}; !slices.Equal(left, want) {
		t.Errorf("events left %v, want %v", left, want)
	}
	if got := b.ids(t, `SELECT workflow_instance_id FROM asset_consumption ORDER BY 1`); !slices.Equal(got, []int64{102}) {
		t.Errorf("consumption rows left of runs %v, want the recent event's run 102 alone", got)
	}
	if n := b.count(t, `SELECT count(*) FROM asset_pending`); n != 2 {
		t.Errorf("%d events queued, want the 2 the consumer waits on", n)
	}
}

// TestAuditRetentionDeletesOnlyOldRows: declaring a retention lets a transaction delete the
// audit rows older than it, and no other; without one every delete is refused.
func TestAuditRetentionDeletesOnlyOldRows(t *testing.T) {
	t.Parallel()
	b := setupRetention(t)
	if _, err := b.db.SQL().Exec(`INSERT INTO audit_event (actor, role, action, target, client, outcome, at) VALUES
		('alice', 'admin', 'task.kill', 'task-instance/1', '127.0.0.1', 'ok', now() - interval '2 hours'),
		('alice', 'admin', 'task.kill', 'task-instance/2', '127.0.0.1', 'ok', now())`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, declare, delete string
	}{
		{"no retention", ``, `DELETE FROM audit_event WHERE target = 'task-instance/1'`},
		{"a recent row", `SELECT set_config('zksched.audit_retention', '1 hour', true)`, `DELETE FROM audit_event`},
		{"an update", `SELECT set_config('zksched.audit_retention', '1 hour', true)`, `UPDATE audit_event SET actor = 'mallory'`},
	} {
		tx, err := b.db.SQL().BeginTx(b.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.declare != "" {
			if _, err := tx.Exec(c.declare); err != nil {
				t.Fatal(err)
			}
		}
		_, err = tx.Exec(c.delete)
		_ = tx.Rollback()
		if err == nil || !strings.Contains(err.Error(), "audit_event is append-only") {
			t.Errorf("%s: %v, want it refused", c.name, err)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM audit_event`); n != 2 {
		t.Errorf("%d audit rows left, want both", n)
	}
}

// TestMaxIssuedID: the highest id issued, which deleting rows does not lower.
func TestMaxIssuedID(t *testing.T) {
	t.Parallel()
	b := setupRetention(t)
	ctx := context.Background()
	wf, task := b.instance(t, "succeeded", 2*time.Hour)
	if _, err := b.db.PurgeFinishedInstances(ctx, time.Hour, 10); err != nil {
		t.Fatal(err)
	}
	for table, want := range map[string]int64{"workflow_instance": wf, "task_instance": task} {
		if got, err := b.db.MaxIssuedID(ctx, table); err != nil || got != want {
			t.Errorf("MaxIssuedID(%s) = %d, %v; want %d", table, got, err, want)
		}
	}
	if _, err := b.db.MaxIssuedID(ctx, "audit_event"); err == nil {
		t.Error("MaxIssuedID(audit_event) succeeded; want an error")
	}
}

// TestPurgesReadARange: on tables of a long history, where half the finished instances are past
// the period, a batch of each purge reads its batch through its index, not the history; with
// statistics and without.
func TestPurgesReadARange(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	const history, batch = 100000, 500
	seedHistory(t, db, history, 100, 0)
	for _, stmt := range []string{
		`UPDATE workflow_instance SET ended_at = now() - interval '2 days' WHERE state = 'succeeded' AND id % 2 = 0`,
		`INSERT INTO task_log (task_instance_id, attempt, seq, data) SELECT id, 1, 0, 'line' FROM task_instance`,
		`INSERT INTO schedule (workflow_name, workflow_version, cron, timezone, start_at, misfire)
			VALUES ('wf', 1, '* * * * *', 'UTC', now(), 'skip')`,
		`INSERT INTO schedule_fire (workflow_name, fire_time, kind, outcome, fired_by, created_at, workflow_instance_id)
			SELECT 'wf', now() - make_interval(mins => g), 'cron', 'created', 'm1', now() - make_interval(mins => g), g
			FROM generate_series(1, 100000) g`,
		`INSERT INTO failover_event (node_id, role, lost_at, fenced_at, finished_at, leader)
			SELECT 'w' || g, 'worker', now(), now(), now() - make_interval(mins => g), 'm1' FROM generate_series(1, 100000) g`,
		`INSERT INTO audit_event (actor, role, action, target, client, outcome, at)
			SELECT 'alice', 'admin', 'task.kill', 'task-instance/' || g, '127.0.0.1', 'ok', now() - make_interval(mins => g)
			FROM generate_series(1, 100000) g`,
		// Every other event consumed; one in ten of the last day's still queued for its
		// consumer.
		`INSERT INTO asset_event (asset, emitted_by, created_at)
			SELECT 'a' || (g % 10), 'test', now() - make_interval(mins => g) FROM generate_series(1, 100000) g`,
		`INSERT INTO asset_consumer (workflow_name, workflow_version, all_of, assets) VALUES ('wf', 1, false, '{a1,a2}')`,
		`INSERT INTO asset_consumption (consumer, event_id, workflow_instance_id) SELECT 'wf', id, id FROM asset_event WHERE id % 2 = 0`,
		`INSERT INTO asset_pending (consumer, asset, event_id) SELECT 'wf', asset, id FROM asset_event
			WHERE id % 10 = 1 AND created_at > now() - interval '1 day'`,
	} {
		if _, err := db.SQL().Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	keep := (24 * time.Hour).Seconds()
	big := []string{"workflow_instance", "task_instance", "task_attempt", "task_log", "schedule_fire", "failover_event", "audit_event",
		"asset_event", "asset_pending", "asset_consumption"}
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			// Its own tables only: a database-wide ANALYZE reaches other tests' schemas, and
			// fails on a table one of them drops meanwhile.
			if _, err := db.SQL().Exec(`ANALYZE ` + strings.Join(big, ", ")); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name  string
			query string
			table string
			index string
		}{
			{"instances", dao.PurgeInstancesSQL, "workflow_instance", "workflow_instance_ended"},
			{"logs", dao.PurgeLogsSQL, "workflow_instance", "workflow_instance_ended"},
			{"fires", dao.PurgeFiresSQL, "schedule_fire", "schedule_fire_created"},
			{"failover events", dao.PurgeFailoverEventsSQL, "failover_event", "failover_event_finished"},
			{"audit", dao.PurgeAuditSQL, "audit_event", "audit_event_at"},
			{"asset events", dao.PurgeAssetEventsSQL, "asset_event", "asset_event_created"},
		} {
			raw := explainAnalyzeWith(t, db, dao.AuditRetentionSQL, keep, c.query, keep, batch)
			joined := strings.Join(flatten(t, raw), "\n")
			if read := examined(t, raw, c.table); read > 2*batch || !strings.Contains(joined, "|"+c.index) {
				t.Errorf("%s (analyzed: %v) read %v rows of %s, want at most %d through %s:\n%s",
					c.name, analyzed, read, c.table, 2*batch, c.index, joined)
			}
			for _, table := range big {
				if strings.Contains(joined, "Seq Scan|"+table+"|") {
					t.Errorf("%s (analyzed: %v) scans %s:\n%s", c.name, analyzed, table, joined)
				}
			}
		}
	}
}

// explainAnalyzeWith runs first (with firstArg) and then query under EXPLAIN (ANALYZE, FORMAT
// JSON) in one transaction, rolled back, and returns the plan.
func explainAnalyzeWith(t *testing.T, db *dao.DB, first string, firstArg any, query string, args ...any) string {
	t.Helper()
	tx, err := db.SQL().Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(first, firstArg); err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := tx.QueryRow("EXPLAIN (ANALYZE, FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	return raw
}
