package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/zksched/zksched/dao/internal/groupcommit"
)

// The submissions on a pool (DB.WorkflowCreateGrouped) are created submitBatch to a statement
// (createSQL) by submitWriters writers of a groupcommit.Committer, so that submissions that
// arrive together share one statement and one commit, the way the workers' completer shares
// its finishes; submitWriters statements run at once, so a submission arriving during a
// statement's commit need not wait for it.
const (
	submitBatch   = 200
	submitWriters = 2
)

// errClosed is the error of a submission to a closed DB.
var errClosed = errors.New("database closed")

// WorkflowCreateGrouped creates a workflow instance as WorkflowCreate does, in a statement (and a
// commit) shared with the other submissions on this pool at the same moment: the way to
// submit many instances from one process. It returns once the instance is committed and the
// wake-ups are on their way. When ctx ends first it returns ctx's error, and the instance may
// still be created.
func (db *DB) WorkflowCreateGrouped(ctx context.Context, sub Submission) (int64, error) {
	id, err := db.sub.Do(ctx, sub)
	switch {
	case errors.Is(err, groupcommit.ErrClosed):
		return 0, errClosed
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return 0, fmt.Errorf("submit %q: %w", sub.Name, err)
	}
	return id, err
}

// createGrouped creates a batch of submissions in one statement, and in the same transaction
// the audit rows of those that carry one: the Committer's commit. When PostgreSQL rejects a
// statement (a bad params document, say), nothing was created, and each submission is tried
// alone so only the bad one fails; any other error (the connection, a timeout) may have come
// after the commit, so it is every submission's answer: trying again could create an
// instance twice.
func (db *DB) createGrouped(batch []Submission) []groupcommit.Result[int64] {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	audited := false
	for _, s := range batch {
		audited = audited || s.Audit != nil
	}
	var got []*created
	var err error
	if audited {
		got, err = db.createManyAudited(ctx, batch)
	} else {
		got, err = db.createMany(ctx, batch)
	}
	out := make([]groupcommit.Result[int64], len(batch))
	var pqErr *pq.Error
	if err != nil && len(batch) > 1 && errors.As(err, &pqErr) {
		for i := range batch {
			out[i] = db.createGrouped(batch[i : i+1])[0]
		}
		return out
	}
	for i, s := range batch {
		r := &out[i]
		switch {
		case err != nil:
			r.Err = fmt.Errorf("create workflow instance of %q version %d: %w", s.Name, s.Version, err)
		case got[i] == nil:
			r.Err = fmt.Errorf("create workflow instance of %q version %d: no such definition stored: %w", s.Name, s.Version, sql.ErrNoRows)
		case got[i].ID == nil:
			// A capped definition with when-full: skip, or a key whose when-full is skip or
			// cancel-oldest: counted under the admission lock, in a transaction of its own.
			r.Value, r.Err = db.createCapped(ctx, s)
		default:
			r.Value = *got[i].ID
			db.notifyCreated(got[i], s.Roots)
		}
	}
	return out
}

// createCapped creates sub, with its audit row, as WorkflowCreate does in a transaction of
// its own: a submission whose count needs its workflow's or its key's lock.
func (db *DB) createCapped(ctx context.Context, sub Submission) (int64, error) {
	var id int64
	err := db.Tx(ctx, func(q *Queries) error {
		var err error
		id, err = q.WorkflowCreate(ctx, sub)
		return err
	})
	return id, err
}

// createManyAudited is createMany with the audit rows of the submissions that carry one, in
// one transaction: an instance commits only with its row. A submission counted under an
// admission lock creates nothing here (createCapped does, with its row).
func (db *DB) createManyAudited(ctx context.Context, subs []Submission) ([]*created, error) {
	var got []*created
	err := db.Tx(ctx, func(q *Queries) error {
		var err error
		if got, err = q.createMany(ctx, subs); err != nil {
			return err
		}
		var evs []AuditEvent
		for i, sub := range subs {
			if sub.Audit != nil && got[i] != nil && got[i].ID != nil {
				ev := *sub.Audit
				ev.Target = fmt.Sprintf("workflow-instance/%d", *got[i].ID)
				evs = append(evs, ev)
			}
		}
		return q.auditInsertMany(ctx, evs)
	})
	return got, err
}
