package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao/internal/connpool"
	"github.com/zksched/zksched/dao/internal/groupcommit"
	"github.com/zksched/zksched/dao/internal/stmtcache"
	"github.com/zksched/zksched/dao/internal/wakeup"
)

// ErrTokenRefused is returned by a worker's write about a task when the task is no longer
// running under that worker's attempt: it was failed over, handed back, killed or finished by
// someone else. The caller stops the task and records nothing more for it.
var ErrTokenRefused = errors.New("fencing token refused: the task no longer belongs to this attempt")

// ErrNotOwner is returned by a master's write about a workflow instance it no longer owns.
var ErrNotOwner = errors.New("workflow instance is not owned by this master")

// DB is a pool of connections to zksched's database.
type DB struct {
	*Queries
	db       *sqlx.DB
	dsn      string
	channels channels
	nf       *wakeup.Batcher
	// wakeConn is the notifier's own connection (see Open).
	wakeConn *sqlx.DB
	sub      *groupcommit.Committer[Submission, int64]
	// claims runs the workers' task claims outside transactions (see claimSettings).
	claims *Queries
}

// claimSettings are the run-time parameters of the connections the task claims run on. A
// claim is a statement of five parts that PostgreSQL, left to itself, re-plans at every call
// (its generic plan cannot know the LIMIT), and on the hottest statement the planning is a
// good part of the work. Its generic plan is made once per connection, from the statistics
// of that moment, and kept until the table is next vacuumed or analyzed: made on an empty
// task_instance it would be a sequential scan, read whole at every claim however long the
// queue grows, unless sequential and bitmap scans are ruled out, which leaves the index scan
// of task_instance_queued in claim order whatever the statistics say
// (TestClaimPlanMadeOnAnEmptyTable). Only the claims run with these settings.
var claimSettings = [][2]string{
	{"plan_cache_mode", "force_generic_plan"},
	{"enable_seqscan", "off"},
	{"enable_bitmapscan", "off"},
}

// claimConns bounds the claim connections: a worker claims one batch at a time.
const claimConns = 2

// poolIdleTime closes a connection of the pool or of the claims' that has been idle this long.
const poolIdleTime = 5 * time.Minute

// channels are the NOTIFY channel names. They carry the schema name, so that deployments (and
// tests) sharing one database in different schemas do not wake each other.
type channels struct {
	master string // payload: a workflow instance id whose tasks changed, or "" for "look"
	task   string // payload: a worker group with newly queued tasks
	kill   string // payload: the id of a worker asked to kill one of its running tasks
}

// Queries runs zksched's statements on a pool or inside one transaction.
type Queries struct {
	q    sqlx.ExtContext
	ch   channels
	nf   *wakeup.Batcher
	prep *stmtcache.Cache
	// notes collects a transaction's wake-ups, sent once it has committed; nil on the pool.
	notes *[]wakeup.Note
	// traceStart gives new workflow instances their traceparent; nil while tracing is off.
	traceStart TraceStart
}

// TraceStart returns the W3C traceparent a new workflow instance is stored with: the trace of
// the instance, decided once for every process that will emit its spans (package tracing).
type TraceStart func() string

// SetTraceStart makes every workflow instance created through db from now on get its
// traceparent from start. Without it (tracing off) instances are created with none. Call it
// before the DB is used.
func (db *DB) SetTraceStart(start TraceStart) {
	db.Queries.traceStart = start
}

// Open connects to dsn and waits until PostgreSQL answers, retrying with a growing interval
// (1 s doubling to 30 s) and logging each failure, so a node started before its database comes
// up starts working once it does. It returns early only when ctx ends or dsn is malformed.
func Open(ctx context.Context, dsn string, maxConns int, log zerolog.Logger) (*DB, error) {
	return OpenReplyLimited(ctx, dsn, maxConns, 0, log)
}

// OpenReplyLimited is Open whose statements fail when the server has not answered within
// replyLimit (0: never), as a node's must: a context's end does not end a statement whose
// connection went silent (see connpool.Options.ReplyLimit), and a node blocked on one for
// ever would keep its session and its work.
func OpenReplyLimited(ctx context.Context, dsn string, maxConns int, replyLimit time.Duration, log zerolog.Logger) (*DB, error) {
	dsn = connpool.WithConnectTimeout(dsn)
	sdb, err := connpool.Open(ctx, dsn, connpool.Options{MaxConns: maxConns, IdleTime: poolIdleTime, ReplyLimit: replyLimit}, log)
	if err != nil {
		return nil, err
	}
	var schema string
	if err := sdb.GetContext(ctx, &schema, "SELECT current_schema()"); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("read current schema: %w", err)
	}
	ch := channels{master: "zksched_master", task: "zksched_task", kill: "zksched_kill"}
	if schema != "public" {
		ch.master += "." + schema
		ch.task += "." + schema
		ch.kill += "." + schema
	}
	// The notifier has a connection of its own: a wake-up must not wait for a connection
	// behind the very work it announces (a pool busy with claims, or with submissions).
	ndb, err := connpool.OpenLazy(dsn, connpool.Options{MaxConns: 1, ReplyLimit: replyLimit})
	if err != nil {
		sdb.Close()
		return nil, err
	}
	nf := wakeup.NewBatcher(sendNotes(ndb))
	cdb, err := connpool.OpenLazy(dsn, connpool.Options{MaxConns: claimConns, IdleTime: poolIdleTime, Params: claimSettings, ReplyLimit: replyLimit})
	if err != nil {
		sdb.Close()
		nf.Close()
		ndb.Close()
		return nil, err
	}
	claims := &Queries{q: cdb, ch: ch, nf: nf, prep: stmtcache.New(cdb)}
	db := &DB{Queries: &Queries{q: sdb, ch: ch, nf: nf, prep: stmtcache.New(sdb)}, db: sdb, dsn: dsn, channels: ch,
		nf: nf, wakeConn: ndb, claims: claims}
	db.sub = groupcommit.New(submitWriters, submitBatch, db.createGrouped)
	return db, nil
}

// Close fails the submissions still waiting (DB.WorkflowCreateGrouped), sends the wake-ups still pending
// and closes the pool.
func (db *DB) Close() error {
	db.sub.Close()
	db.nf.Close()
	_ = db.wakeConn.Close()
	db.Queries.prep.Close()
	db.claims.prep.Close()
	_ = db.claims.q.(*sqlx.DB).Close()
	return db.db.Close()
}

// TaskClaimQueued is Queries.TaskClaimQueued on the claim connections (claimSettings).
func (db *DB) TaskClaimQueued(ctx context.Context, worker string, groups []string, limit int) ([]TaskInstance, error) {
	return db.claims.TaskClaimQueued(ctx, worker, groups, limit)
}

// TaskClaimQueuedUnpooled is Queries.TaskClaimQueuedUnpooled on the claim connections (claimSettings).
func (db *DB) TaskClaimQueuedUnpooled(ctx context.Context, worker string, groups []string, limit int) ([]TaskInstance, error) {
	return db.claims.TaskClaimQueuedUnpooled(ctx, worker, groups, limit)
}

// TaskClaimQueuedShare is Queries.TaskClaimQueuedShare on the claim connections (claimSettings).
func (db *DB) TaskClaimQueuedShare(ctx context.Context, worker string, groups []string, limit int, share Share) ([]TaskInstance, error) {
	return db.claims.TaskClaimQueuedShare(ctx, worker, groups, limit, share)
}

// TaskClaimQueuedUnpooledShare is Queries.TaskClaimQueuedUnpooledShare on the claim connections
// (claimSettings).
func (db *DB) TaskClaimQueuedUnpooledShare(ctx context.Context, worker string, groups []string, limit int, share Share) ([]TaskInstance, error) {
	return db.claims.TaskClaimQueuedUnpooledShare(ctx, worker, groups, limit, share)
}

// SQL returns the underlying pool, for tests and tools that need plain database/sql.
func (db *DB) SQL() *sqlx.DB { return db.db }

// DSN is the data source the DB was opened with, for another pool on the same schema.
func (db *DB) DSN() string { return db.dsn }

// Tx runs fn in one transaction, committed when fn returns nil and rolled back otherwise.
func (db *DB) Tx(ctx context.Context, fn func(q *Queries) error) error {
	tx, err := db.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	var notes []wakeup.Note
	if err := fn(&Queries{q: tx, ch: db.channels, nf: db.nf, prep: db.Queries.prep, notes: &notes,
		traceStart: db.Queries.traceStart}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	db.nf.Send(notes...)
	return nil
}

// IsUnavailable reports whether err says the database could not be reached or went away, as
// opposed to a statement that PostgreSQL refused.
func IsUnavailable(err error) bool {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		// Class 08: connection exception; 57P01..57P03: admin shutdown, crash shutdown, cannot
		// connect now.
		return pqErr.Code.Class() == "08" || pqErr.Code == "57P01" || pqErr.Code == "57P02" || pqErr.Code == "57P03"
	}
	return err != nil && !errors.Is(err, sql.ErrNoRows) && !errors.Is(err, ErrTokenRefused) &&
		!errors.Is(err, ErrNotOwner) && !errors.Is(err, ErrWorkflowFull) && !errors.Is(err, ErrNoSchedule) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
