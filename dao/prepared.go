package dao

import (
	"context"
	"database/sql"
	"sync"

	"github.com/jmoiron/sqlx"
)

// prepared holds the hot statements, prepared on the pool once: database/sql prepares each on
// a connection the first time it runs there (again after a reconnect), and PostgreSQL then
// parses it once per connection.
//
// They are left to PostgreSQL's own choice between custom and generic plans, except the task
// claims, which run on connections of their own with generic plans and no sequential or
// bitmap scans (claimSettings in db.go): a generic plan is made once per connection from the
// statistics of that moment and kept until the table is next analyzed, and made on an empty
// task_instance the claim's plan would otherwise be a sequential scan, read whole at every
// claim however long the queue grows. A custom plan sees the live size of the table at every
// call.
type prepared struct {
	db *sqlx.DB

	mu    sync.Mutex
	stmts map[string]*sqlx.Stmt
}

func (p *prepared) get(ctx context.Context, query string) (*sqlx.Stmt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.stmts[query]; ok {
		return st, nil
	}
	st, err := p.db.PreparexContext(ctx, query)
	if err != nil {
		return nil, err // not kept: the next call tries again
	}
	p.stmts[query] = st
	return st, nil
}

// stmt returns query prepared for q: on the pool, or bound to q's transaction. ok is false
// when it could not be prepared (the database is away): run it unprepared, which reports why.
func (q *Queries) stmt(ctx context.Context, query string) (st *sqlx.Stmt, ok bool) {
	if q.prep == nil {
		return nil, false
	}
	st, err := q.prep.get(ctx, query)
	if err != nil {
		return nil, false
	}
	if tx, isTx := q.q.(*sqlx.Tx); isTx {
		return tx.StmtxContext(ctx, st), true // closed with the transaction
	}
	return st, true
}

// selectHot is sqlxSelect for a hot statement, prepared.
func selectHot(ctx context.Context, q *Queries, dest any, query string, args ...any) error {
	if st, ok := q.stmt(ctx, query); ok {
		return st.SelectContext(ctx, dest, args...)
	}
	return sqlxSelect(ctx, q, dest, query, args...)
}

// queryHot runs a hot statement, prepared, for rows to scan by hand.
func queryHot(ctx context.Context, q *Queries, query string, args ...any) (*sql.Rows, error) {
	if st, ok := q.stmt(ctx, query); ok {
		return st.QueryContext(ctx, args...)
	}
	return q.q.QueryContext(ctx, query, args...)
}

// getHot is sqlxGet for a hot statement, prepared.
func getHot(ctx context.Context, q *Queries, dest any, query string, args ...any) error {
	if st, ok := q.stmt(ctx, query); ok {
		return st.GetContext(ctx, dest, args...)
	}
	return sqlxGet(ctx, q, dest, query, args...)
}

func (p *prepared) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.stmts {
		st.Close()
	}
	clear(p.stmts)
}
