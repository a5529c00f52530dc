package dao

import (
	"context"
	"fmt"
	"time"
)

// This file holds the statements of retention (conf.Retention, migration 00021): the leader
// deletes the history of finished work past its period, oldest first, a batch a statement.
// Each statement is its own short transaction, and takes its rows FOR UPDATE SKIP LOCKED, so
// it never waits on a row another transaction holds (a rerun reopening an instance) and holds
// its own locks for one batch alone. Every period is measured on the database's clock.

// Purged counts the rows a purge deleted, by table.
type Purged map[string]int64

// Add adds the counts of o to p.
func (p Purged) Add(o Purged) {
	for table, n := range o {
		p[table] += n
	}
}

// purgeInstancesSQL is PurgeFinishedInstances' statement: $1 the retention in seconds, $2 the
// batch. It takes the finished instances that ended before the period, oldest first through
// workflow_instance_ended, but neither the child of a parent that is still active nor the
// parent of a child that is (a child links to its parent by parent_workflow_instance_id, a
// parent to its children through its tasks' child_workflow_instance_id). Those two checks are
// scalar subqueries so that they run for each candidate, by index, rather than as anti-joins
// that would read every task instance. The instances' task instances, attempts, logs and
// checkpoints go with them (ON DELETE CASCADE); the counts are read in the statement's
// snapshot, before the deletion, by index.
const purgeInstancesSQL = `
		WITH doomed AS (
			SELECT w.id FROM workflow_instance w
			WHERE w.state IN ('succeeded', 'failed', 'stopped')
				AND w.ended_at < now() - make_interval(secs => $1)
				AND NOT coalesce((
					SELECT p.state IN ('submitted', 'running') FROM workflow_instance p
					WHERE p.id = w.parent_workflow_instance_id), false)
				AND NOT coalesce((
					SELECT bool_or(c.state IN ('submitted', 'running'))
					FROM task_instance t JOIN workflow_instance c ON c.id = t.child_workflow_instance_id
					WHERE t.workflow_instance_id = w.id AND t.child_workflow_instance_id IS NOT NULL), false)
			ORDER BY w.ended_at, w.id
			LIMIT $2
			FOR UPDATE OF w SKIP LOCKED
		), tasks AS (
			SELECT t.id FROM task_instance t WHERE t.workflow_instance_id = ANY(ARRAY(SELECT id FROM doomed))
		), gone AS (
			DELETE FROM workflow_instance WHERE id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING id
		)
		SELECT
			(SELECT count(*) FROM gone) AS workflow_instance,
			(SELECT count(*) FROM tasks) AS task_instance,
			(SELECT count(*) FROM task_attempt WHERE task_instance_id = ANY(ARRAY(SELECT id FROM tasks))) AS task_attempt,
			(SELECT count(*) FROM task_log WHERE task_instance_id = ANY(ARRAY(SELECT id FROM tasks))) AS task_log,
			(SELECT count(*) FROM task_checkpoint WHERE task_instance_id = ANY(ARRAY(SELECT id FROM tasks))) AS task_checkpoint`

// purgedInstances is purgeInstancesSQL's row: the rows deleted by table.
type purgedInstances struct {
	Instances   int64 `db:"workflow_instance"`
	Tasks       int64 `db:"task_instance"`
	Attempts    int64 `db:"task_attempt"`
	Logs        int64 `db:"task_log"`
	Checkpoints int64 `db:"task_checkpoint"`
}

// PurgeFinishedInstances deletes up to batch finished workflow instances that ended more
// than keep ago, with everything of theirs, and returns what it deleted by table. Fewer
// than batch instances means none is left to purge now.
func (db *DB) PurgeFinishedInstances(ctx context.Context, keep time.Duration, batch int) (Purged, error) {
	var n purgedInstances
	if err := db.db.GetContext(ctx, &n, purgeInstancesSQL, keep.Seconds(), batch); err != nil {
		return nil, fmt.Errorf("purge finished workflow instances: %w", err)
	}
	return Purged{"workflow_instance": n.Instances, "task_instance": n.Tasks, "task_attempt": n.Attempts,
		"task_log": n.Logs, "task_checkpoint": n.Checkpoints}, nil
}

// purgeLogsSQL is PurgeFinishedLogs' statement: $1 the retention in seconds, $2 the batch.
// It takes the next finished instances, in workflow_instance_ended's order from where
// retention_progress says the last batch ended, that ended before the period; deletes their
// tasks' logs; and moves retention_progress to the last of them. An instance reopened by a
// rerun ends again later in that order, so its new logs are purged in their turn. ended_at
// is its transaction's start: one that commits an end already behind the cursor (a
// transaction open for longer than the period) leaves that instance's logs to go with it.
const purgeLogsSQL = `
		WITH since AS (
			SELECT coalesce(max(p.ended_at), '-infinity') AS ended_at, coalesce(max(p.id), 0) AS id
			FROM retention_progress p WHERE p.what = 'logs'
		), batch AS (
			SELECT w.ended_at, w.id FROM workflow_instance w, since s
			WHERE w.state IN ('succeeded', 'failed', 'stopped')
				AND (w.ended_at, w.id) > (s.ended_at, s.id)
				AND w.ended_at < now() - make_interval(secs => $1)
			ORDER BY w.ended_at, w.id
			LIMIT $2
		), gone AS (
			DELETE FROM task_log WHERE task_instance_id = ANY(ARRAY(
				SELECT t.id FROM task_instance t WHERE t.workflow_instance_id = ANY(ARRAY(SELECT id FROM batch))))
			RETURNING 1
		), moved AS (
			INSERT INTO retention_progress (what, ended_at, id)
			SELECT 'logs', b.ended_at, b.id FROM batch b ORDER BY b.ended_at DESC, b.id DESC LIMIT 1
			ON CONFLICT (what) DO UPDATE SET ended_at = excluded.ended_at, id = excluded.id
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM batch) AS instances, (SELECT count(*) FROM gone) AS task_log`

// purgedLogs is purgeLogsSQL's row.
type purgedLogs struct {
	Instances int64 `db:"instances"`
	Logs      int64 `db:"task_log"`
}

// PurgeFinishedLogs deletes the task logs of up to batch finished workflow instances that
// ended more than keep ago and returns how many log rows it deleted and how many instances it
// went past. Fewer than batch instances means none is left to purge now.
func (db *DB) PurgeFinishedLogs(ctx context.Context, keep time.Duration, batch int) (rows, instances int64, err error) {
	var n purgedLogs
	if err := db.db.GetContext(ctx, &n, purgeLogsSQL, keep.Seconds(), batch); err != nil {
		return 0, 0, fmt.Errorf("purge task logs of finished workflow instances: %w", err)
	}
	return n.Logs, n.Instances, nil
}

// purgeFailoverEventsSQL is PurgeFailoverEvents' statement: $1 the retention in seconds, $2
// the batch. An event not finished yet is the record of a failover under way, and stays.
const purgeFailoverEventsSQL = `
		WITH doomed AS (
			SELECT id FROM failover_event
			WHERE finished_at < now() - make_interval(secs => $1)
			ORDER BY finished_at
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		), gone AS (
			DELETE FROM failover_event WHERE id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING 1
		)
		SELECT count(*) FROM gone`

// PurgeFailoverEvents deletes up to batch failover events that finished more than keep ago
// and returns how many it deleted.
func (db *DB) PurgeFailoverEvents(ctx context.Context, keep time.Duration, batch int) (int64, error) {
	return db.purgeBatch(ctx, purgeFailoverEventsSQL, "purge failover events", keep, batch)
}

// purgeFiresSQL is PurgeFires' statement: $1 the retention in seconds, $2 the batch.
const purgeFiresSQL = `
		WITH doomed AS (
			SELECT ctid FROM schedule_fire
			WHERE created_at < now() - make_interval(secs => $1)
			ORDER BY created_at
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		), gone AS (
			-- The rows are locked: their ctid holds until the statement ends.
			DELETE FROM schedule_fire WHERE ctid = ANY(ARRAY(SELECT ctid FROM doomed))
			RETURNING 1
		)
		SELECT count(*) FROM gone`

// PurgeFires deletes up to batch schedule fire records made more than keep ago and returns
// how many it deleted.
func (db *DB) PurgeFires(ctx context.Context, keep time.Duration, batch int) (int64, error) {
	return db.purgeBatch(ctx, purgeFiresSQL, "purge schedule fires", keep, batch)
}

// purgeAssetEventsSQL is PurgeAssetEvents' statement: $1 the retention in seconds, $2 the
// batch (migration 00037). It takes the events written before the period, oldest first
// through asset_event_created, that no consumer has queued (asset_pending): each consumer
// that names its asset has taken it, or none did when it was written. An event queued for a
// consumer stays whatever its age: the consumer still waits on it. An event is queued in the
// statement that writes it, never later, so one found queued for no one stays so. Its
// consumption rows go with it (ON DELETE CASCADE), counted in the statement's snapshot.
const purgeAssetEventsSQL = `
		WITH doomed AS (
			SELECT e.id FROM asset_event e
			WHERE e.created_at < now() - make_interval(secs => $1)
				AND NOT EXISTS (SELECT 1 FROM asset_pending p WHERE p.event_id = e.id)
			ORDER BY e.created_at
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		), gone AS (
			DELETE FROM asset_event WHERE id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING 1
		)
		SELECT (SELECT count(*) FROM gone) AS asset_event,
			(SELECT count(*) FROM asset_consumption WHERE event_id = ANY(ARRAY(SELECT id FROM doomed))) AS asset_consumption`

// purgedAssetEvents is purgeAssetEventsSQL's row.
type purgedAssetEvents struct {
	Events       int64 `db:"asset_event"`
	Consumptions int64 `db:"asset_consumption"`
}

// PurgeAssetEvents deletes up to batch asset events written more than keep ago that no
// consumer still waits on, with their consumption rows, and returns what it deleted by table.
// Fewer than batch events means none is left to purge now.
func (db *DB) PurgeAssetEvents(ctx context.Context, keep time.Duration, batch int) (Purged, error) {
	var n purgedAssetEvents
	if err := db.db.GetContext(ctx, &n, purgeAssetEventsSQL, keep.Seconds(), batch); err != nil {
		return nil, fmt.Errorf("purge asset events: %w", err)
	}
	return Purged{"asset_event": n.Events, "asset_consumption": n.Consumptions}, nil
}

// auditRetentionSQL declares the audit retention to audit_event's trigger for the rest of the
// transaction (migration 00021): $1 the retention in seconds.
const auditRetentionSQL = `SELECT set_config('zksched.audit_retention', make_interval(secs => $1)::text, true)`

// purgeAuditSQL is PurgeAudit's statement: $1 the retention in seconds, $2 the batch. The
// trigger lets it delete only rows older than the retention declared by auditRetentionSQL.
const purgeAuditSQL = `
		WITH doomed AS (
			SELECT id FROM audit_event
			WHERE at < now() - make_interval(secs => $1)
			ORDER BY at
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		), gone AS (
			DELETE FROM audit_event WHERE id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING 1
		)
		SELECT count(*) FROM gone`

// PurgeAudit deletes up to batch rows of the audit trail recorded more than keep ago and
// returns how many it deleted. keep must be positive: the trail is kept for ever otherwise.
func (db *DB) PurgeAudit(ctx context.Context, keep time.Duration, batch int) (int64, error) {
	if keep <= 0 {
		return 0, fmt.Errorf("purge the audit trail: retention %v is not positive", keep)
	}
	var n int64
	err := db.Tx(ctx, func(q *Queries) error {
		if _, err := q.q.ExecContext(ctx, auditRetentionSQL, keep.Seconds()); err != nil {
			return err
		}
		return sqlxGet(ctx, q, &n, purgeAuditSQL, keep.Seconds(), batch)
	})
	if err != nil {
		return 0, fmt.Errorf("purge the audit trail: %w", err)
	}
	return n, nil
}

// maxIssuedSQL is MaxIssuedID's statements, by sequence: the last id the sequence handed out,
// 0 before the first.
var maxIssuedSQL = map[string]string{
	"workflow_instance": `SELECT coalesce(pg_sequence_last_value('workflow_instance_id_seq'), 0)`,
	"task_instance":     `SELECT coalesce(pg_sequence_last_value('task_instance_id_seq'), 0)`,
}

// MaxIssuedID returns the highest id ever issued to a row of table, workflow_instance or
// task_instance: an id at or below it that is not found was deleted (by retention, a rerun or
// a rolled-back submission), one above it was never issued.
func (q *Queries) MaxIssuedID(ctx context.Context, table string) (int64, error) {
	query, ok := maxIssuedSQL[table]
	if !ok {
		return 0, fmt.Errorf("highest id of %s: not a table with instance ids", table)
	}
	var id int64
	if err := sqlxGet(ctx, q, &id, query); err != nil {
		return 0, fmt.Errorf("highest id of %s: %w", table, err)
	}
	return id, nil
}

// purgeBatch runs one purge statement, whose $1 is the retention in seconds and $2 the batch,
// and returns how many rows it deleted; what names the purge in an error.
func (db *DB) purgeBatch(ctx context.Context, stmt, what string, keep time.Duration, batch int) (int64, error) {
	var n int64
	if err := db.db.GetContext(ctx, &n, stmt, keep.Seconds(), batch); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}
