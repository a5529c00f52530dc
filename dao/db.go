package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao/internal/groupcommit"
	"github.com/zksched/zksched/dao/internal/notify"
	"github.com/zksched/zksched/dao/internal/stmtcache"
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
	nf       *notify.Batcher
	// notifyConn is the notifier's own connection (see Open).
	notifyConn *sqlx.DB
	sub        *groupcommit.Committer[Submission, int64]
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
	nf   *notify.Batcher
	prep *stmtcache.Cache
	// notes collects a transaction's wake-ups, sent once it has committed; nil on the pool.
	notes *[]notify.Note
}

// Open connects to dsn and waits until PostgreSQL answers, retrying with a growing interval
// (1 s doubling to 30 s) and logging each failure, so a node started before its database comes
// up starts working once it does. It returns early only when ctx ends or dsn is malformed.
func Open(ctx context.Context, dsn string, maxConns int, log zerolog.Logger) (*DB, error) {
	dsn = withConnectTimeout(dsn)
	if _, err := pq.NewConnector(dsn); err != nil {
		return nil, fmt.Errorf("database dsn: %w", err)
	}
	sdb, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	sdb.SetMaxOpenConns(maxConns)
	sdb.SetMaxIdleConns(maxConns)
	sdb.SetConnMaxIdleTime(5 * time.Minute)
	wait := time.Second
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = sdb.PingContext(pctx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			sdb.Close()
			return nil, fmt.Errorf("connect to postgresql: %w (last error: %v)", ctx.Err(), err)
		}
		log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", wait).Msg("postgresql not reachable, retrying")
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		wait = min(2*wait, 30*time.Second)
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
	ndb, err := sqlx.Open("postgres", dsn)
	if err != nil {
		sdb.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	ndb.SetMaxOpenConns(1)
	ndb.SetMaxIdleConns(1)
	nf := notify.NewBatcher(sendNotes(ndb))
	cdsn := dsn
	for _, kv := range claimSettings {
		cdsn = withParam(cdsn, kv[0], kv[1])
	}
	cdb, err := sqlx.Open("postgres", cdsn) // connects at its first claim
	if err != nil {
		sdb.Close()
		nf.Close()
		ndb.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	cdb.SetMaxOpenConns(claimConns)
	cdb.SetMaxIdleConns(claimConns)
	cdb.SetConnMaxIdleTime(5 * time.Minute)
	claims := &Queries{q: cdb, ch: ch, nf: nf, prep: stmtcache.New(cdb)}
	db := &DB{Queries: &Queries{q: sdb, ch: ch, nf: nf, prep: stmtcache.New(sdb)}, db: sdb, dsn: dsn, channels: ch,
		nf: nf, notifyConn: ndb, claims: claims}
	db.sub = groupcommit.New(submitWriters, submitBatch, db.createGrouped)
	return db, nil
}

// withParam sets a run-time parameter in dsn (a URL or key=value pairs), which lib/pq sends
// to the server when it connects.
func withParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value
}

// withConnectTimeout bounds connection establishment at 5 s unless the DSN says otherwise:
// without it lib/pq waits forever on a server that accepts TCP but never answers, and the
// retry loop of Open (and every reconnect) would hang with it.
func withConnectTimeout(dsn string) string {
	if strings.Contains(dsn, "connect_timeout") {
		return dsn
	}
	return withParam(dsn, "connect_timeout", "5")
}

// Close fails the submissions still waiting (DB.WorkflowCreateGrouped), sends the wake-ups still pending
// and closes the pool.
func (db *DB) Close() error {
	db.sub.Close()
	db.nf.Close()
	_ = db.notifyConn.Close()
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
	var notes []notify.Note
	if err := fn(&Queries{q: tx, ch: db.channels, nf: db.nf, prep: db.Queries.prep, notes: &notes}); err != nil {
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
