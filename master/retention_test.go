package master

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// fakeLeadership is a Leadership the test sets.
type fakeLeadership struct {
	mu      sync.Mutex
	leader  bool
	changed chan struct{}
}

func (l *fakeLeadership) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leader
}

func (l *fakeLeadership) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *fakeLeadership) Set(leader bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leader = leader
	close(l.changed)
	l.changed = make(chan struct{})
}

type retentionBundle struct {
	db      *dao.DB
	clock   *clockwork.FakeClock
	lead    *fakeLeadership
	r       *Retention
	mu      sync.Mutex
	purged  map[string]int64
	onBatch func()
}

// setupRetention starts a Retention that keeps instances, logs and asset events an hour, with
// batches of batch rows, on a fake clock; the leadership starts lost.
func setupRetention(t *testing.T, batch int) *retentionBundle {
	t.Helper()
	db, _ := daotest.New(t)
	b := &retentionBundle{db: db, clock: clockwork.NewFakeClock(), lead: &fakeLeadership{changed: make(chan struct{})},
		purged: map[string]int64{}}
	daotest.Submit(t, db, "wf", map[string]any{"name": "wf"})
	b.r = NewRetention(RetentionConfig{Instances: time.Hour, Logs: time.Hour, AssetEvents: time.Hour, Interval: time.Minute, BatchSize: batch,
		Log: zerolog.Nop(), Clock: b.clock, Purged: func(table string, n int64) {
			b.mu.Lock()
			b.purged[table] += n
			f := b.onBatch
			b.mu.Unlock()
			if f != nil {
				f()
			}
		}}, db, b.lead)
	b.r.waiting.Init()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = b.r.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	b.wait(t)
	return b
}

// wait waits until the Retention has done all it had to and waits.
func (b *retentionBundle) wait(t *testing.T) {
	t.Helper()
	b.r.waiting.Wait(t, "the retention to wait")
}

// finished writes n instances that succeeded two hours ago, each with a task and a log line.
func (b *retentionBundle) finished(t *testing.T, n int) {
	t.Helper()
	for _, stmt := range []string{
		`INSERT INTO workflow_instance (workflow_name, workflow_version, state, ended_at)
		 SELECT 'wf', 1, 'succeeded', now() - interval '2 hours' FROM generate_series(1, $1)`,
		`INSERT INTO task_instance (workflow_instance_id, name, type, state, ended_at)
		 SELECT id, 't', 'noop', 'succeeded', ended_at FROM workflow_instance w
		 WHERE state = 'succeeded' AND NOT EXISTS (SELECT FROM task_instance t WHERE t.workflow_instance_id = w.id) AND $1 > 0`,
		`INSERT INTO task_log (task_instance_id, attempt, seq, data)
		 SELECT id, 1, 0, 'line' FROM task_instance t WHERE NOT EXISTS (SELECT FROM task_log l WHERE l.task_instance_id = t.id) AND $1 > 0`,
	} {
		if _, err := b.db.SQL().Exec(stmt, n); err != nil {
			t.Fatal(err)
		}
	}
}

func (b *retentionBundle) finishedLeft(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.db.SQL().Get(&n, `SELECT count(*) FROM workflow_instance WHERE state = 'succeeded'`); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRetentionPurgesWhileLeading: a master that does not lead purges nothing, whatever the
// time; the leader purges at once when it becomes the leader and at every interval after.
func TestRetentionPurgesWhileLeading(t *testing.T) {
	t.Parallel()
	b := setupRetention(t, 500)
	b.finished(t, 3)
	for range 3 {
		b.clock.Advance(time.Minute)
		b.wait(t)
	}
	if n := b.finishedLeft(t); n != 3 {
		t.Fatalf("%d finished instances left while not leading, want the 3", n)
	}

	b.lead.Set(true)
	b.wait(t)
	if n := b.finishedLeft(t); n != 0 {
		t.Fatalf("%d finished instances left once leading, want none", n)
	}
	b.mu.Lock()
	got := map[string]int64{"workflow_instance": b.purged["workflow_instance"], "task_instance": b.purged["task_instance"],
		"task_log": b.purged["task_log"]}
	b.mu.Unlock()
	if got["workflow_instance"] != 3 || got["task_instance"] != 3 || got["task_log"] != 3 {
		t.Errorf("purged %v, want 3 instances, their 3 tasks and 3 log lines (by the logs' purge)", got)
	}

	b.finished(t, 2)
	b.clock.Advance(time.Minute)
	b.wait(t)
	if n := b.finishedLeft(t); n != 0 {
		t.Fatalf("%d finished instances left an interval later, want none", n)
	}

	b.lead.Set(false)
	b.wait(t)
	b.finished(t, 2)
	b.clock.Advance(time.Minute)
	b.wait(t)
	if n := b.finishedLeft(t); n != 2 {
		t.Fatalf("%d finished instances left after losing the leadership, want the 2 new ones", n)
	}
}

// TestRetentionPurgesAssetEvents: the leader's round purges the asset events past their
// period that no consumer waits on, batch after batch, and keeps the one a consumer waits on.
func TestRetentionPurgesAssetEvents(t *testing.T) {
	t.Parallel()
	b := setupRetention(t, 2)
	for _, stmt := range []string{
		`INSERT INTO asset_event (asset, emitted_by, created_at) SELECT 'a', 'test', now() - interval '2 hours' FROM generate_series(1, 5)`,
		`INSERT INTO asset_consumer (workflow_name, workflow_version, all_of, assets) VALUES ('wf', 1, true, '{a,b}')`,
		`INSERT INTO asset_pending (consumer, asset, event_id) SELECT 'wf', 'a', min(id) FROM asset_event`,
	} {
		if _, err := b.db.SQL().Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	b.lead.Set(true)
	b.wait(t)
	var left []int64
	if err := b.db.SQL().Select(&left, `SELECT event_id FROM asset_pending p JOIN asset_event e ON e.id = p.event_id`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.db.SQL().Get(&n, `SELECT count(*) FROM asset_event`); err != nil || n != 1 || len(left) != 1 {
		t.Fatalf("%d events left (%v), the one waited on still there: %v; want it alone", n, err, left)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if got := b.purged["asset_event"]; got != 4 {
		t.Errorf("purged %d asset events, want 4 in batches of 2", got)
	}
}

// TestRetentionStopsWhenLeadershipIsLost: a round stops at the batch during which the master
// lost the leadership.
func TestRetentionStopsWhenLeadershipIsLost(t *testing.T) {
	t.Parallel()
	b := setupRetention(t, 1)
	b.finished(t, 5)
	var once sync.Once
	b.mu.Lock()
	b.onBatch = func() { once.Do(func() { b.lead.Set(false) }) }
	b.mu.Unlock()
	b.lead.Set(true)
	b.wait(t)
	// The first batch was the logs' (one instance's); no instance was deleted.
	if n := b.finishedLeft(t); n != 5 {
		t.Fatalf("%d finished instances left, want all 5: the round stopped after its first batch", n)
	}
	b.mu.Lock()
	logs := b.purged["task_log"]
	b.mu.Unlock()
	if logs != 1 {
		t.Errorf("purged %d log rows, want the first batch's 1", logs)
	}
}
