package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lib/pq"
)

// submitter creates the workflow instances submitted on the pool (DB.WorkflowCreateGrouped) many to a
// statement: a writer goroutine takes the submissions waiting and creates them with createSQL, so
// submissions that arrive together share one statement and one commit, the way the workers'
// completer shares its finishes.
//
// With its root tasks every submission inserts into task_instance and its indexes: many
// backends inserting at once, beside the workers' claims and finishes of the same rows, would
// queue on the same few pages' locks (LWLock:BufferContent) and on WAL writes, and each
// submission's statement would take many times as long. The submitWriters writers have next
// to nothing to queue on.
type submitter struct {
	db *DB

	mu      sync.Mutex
	pending []*submission
	closed  bool
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

type submission struct {
	ctx context.Context
	s   Submission
	id  int64
	err error
	// done is closed once id or err is set.
	done chan struct{}
}

// submitBatch is the most submissions one statement creates; submitWriters statements run at
// once, so a submission arriving during a statement's commit need not wait for it.
const (
	submitBatch   = 200
	submitWriters = 2
)

// errClosed is the error of a submission to a closed DB.
var errClosed = errors.New("database closed")

func newSubmitter(db *DB) *submitter {
	s := &submitter{db: db, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *submitter) submit(ctx context.Context, sub Submission) (int64, error) {
	p := &submission{ctx: ctx, s: sub, done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, errClosed
	}
	s.pending = append(s.pending, p)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case <-p.done:
		return p.id, p.err
	case <-ctx.Done():
		// The instance may still be created: the statement may be on its way already.
		return 0, fmt.Errorf("submit %q: %w", sub.Name, ctx.Err())
	}
}

func (s *submitter) run() {
	defer close(s.done)
	var wg sync.WaitGroup
	for range submitWriters {
		wg.Go(func() {
			for {
				select {
				case <-s.wake:
				case <-s.stop:
					return
				}
				for s.flush() {
				}
			}
		})
	}
	wg.Wait()
	s.mu.Lock()
	left := s.pending
	s.pending, s.closed = nil, true
	s.mu.Unlock()
	for _, p := range left {
		p.err = errClosed
		close(p.done)
	}
}

// flush creates up to submitBatch waiting submissions and reports whether it took any.
func (s *submitter) flush() bool {
	s.mu.Lock()
	n := min(len(s.pending), submitBatch)
	batch := s.pending[:n:n]
	s.pending = s.pending[n:]
	s.mu.Unlock()
	if n == 0 {
		return false
	}
	live := batch[:0:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err = err
			close(p.done)
			continue
		}
		live = append(live, p)
	}
	if len(live) > 0 {
		s.create(live)
	}
	return true
}

// create creates the batch in one statement, and in the same transaction the audit rows of
// the submissions that carry one. When PostgreSQL rejects a statement (a bad params document,
// say), nothing was created, and each submission is tried alone so only the bad one fails;
// any other error (the connection, a timeout) may have come after the commit, so it is every
// submission's answer: trying again could create an instance twice.
func (s *submitter) create(batch []*submission) {
	subs := make([]Submission, len(batch))
	audited := false
	for i, p := range batch {
		subs[i] = p.s
		audited = audited || p.s.Audit != nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*created
	var err error
	if audited {
		got, err = s.db.createManyAudited(ctx, subs)
	} else {
		got, err = s.db.createMany(ctx, subs)
	}
	var pqErr *pq.Error
	if err != nil && len(batch) > 1 && errors.As(err, &pqErr) {
		for _, p := range batch {
			s.create([]*submission{p})
		}
		return
	}
	for i, p := range batch {
		switch {
		case err != nil:
			p.err = fmt.Errorf("create workflow instance of %q version %d: %w", p.s.Name, p.s.Version, err)
		case got[i] == nil:
			p.err = fmt.Errorf("create workflow instance of %q version %d: no such definition stored: %w", p.s.Name, p.s.Version, sql.ErrNoRows)
		case got[i].ID == nil:
			// A capped definition with when-full: skip: counted under the admission lock, in
			// a transaction of its own.
			p.id, p.err = s.createCapped(ctx, p.s)
		default:
			p.id = *got[i].ID
			s.db.notifyCreated(got[i], p.s.Roots)
		}
		close(p.done)
	}
}

func (s *submitter) createCapped(ctx context.Context, sub Submission) (int64, error) {
	var id int64
	err := s.db.Tx(ctx, func(q *Queries) error {
		var err error
		if id, err = q.WorkflowCreate(ctx, sub.Name, sub.Version, sub.Params, sub.Priority, sub.Queue, sub.Roots); err != nil {
			return err
		}
		if sub.Audit == nil {
			return nil
		}
		ev := *sub.Audit
		ev.Target = fmt.Sprintf("workflow-instance/%d", id)
		return q.AuditInsert(ctx, ev)
	})
	return id, err
}

// createManyAudited is createMany with the audit rows of the submissions that carry one, in
// one transaction: an instance commits only with its row. A capped submission with when-full:
// skip creates nothing here (createCapped does, with its row).
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

func (s *submitter) close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// WorkflowCreateGrouped creates a workflow instance as WorkflowCreate does, in a statement (and a
// commit) shared with the other submissions on this pool at the same moment: the way to
// submit many instances from one process. It returns once the instance is committed and the
// wake-ups are on their way. When ctx ends first it returns ctx's error, and the instance may
// still be created.
func (db *DB) WorkflowCreateGrouped(ctx context.Context, sub Submission) (int64, error) {
	return db.sub.submit(ctx, sub)
}
