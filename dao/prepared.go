package dao

import (
	"context"
	"sync"

	"github.com/jmoiron/sqlx"
)

// prepared holds the hot statements, prepared once on connections of their own: database/sql
// prepares each on a connection the first time it runs there (again after a reconnect), and
// PostgreSQL parses it once per connection. Those connections set plan_cache_mode to
// force_generic_plan, so each statement is also planned once per connection: left to itself
// PostgreSQL found the generic plans of the claim and the task listing dearer than custom ones
// and planned them at every run, 0.5 ms each, three times the claim's execution at 100
// workflows/s. Their generic plans use the partial indexes whatever the parameters
// (plan_test.go checks), and the statements take their parameters as arrays and limits, where
// a custom plan gains nothing. Other statements stay on the main pool, planned as usual.
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
		if !q.hot {
			return nil, false // a transaction on the main pool: the statement lives elsewhere
		}
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
