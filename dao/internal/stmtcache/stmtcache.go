// Package stmtcache keeps dao's hot statements prepared on a pool, each once: database/sql
// then prepares a statement on a connection the first time it runs there (again after a
// reconnect), and PostgreSQL parses it once per connection instead of at every call.
package stmtcache

import (
	"context"
	"sync"

	"github.com/jmoiron/sqlx"
)

// Cache holds the statements prepared on one pool, by their text.
type Cache struct {
	db *sqlx.DB

	mu    sync.Mutex
	stmts map[string]*sqlx.Stmt
}

// New returns an empty Cache of statements on db.
func New(db *sqlx.DB) *Cache {
	return &Cache{db: db, stmts: map[string]*sqlx.Stmt{}}
}

// Get returns query prepared on the pool, preparing it at its first call. A statement that
// could not be prepared (the database is away) is not kept: the next call tries again.
func (c *Cache) Get(ctx context.Context, query string) (*sqlx.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	st, err := c.db.PreparexContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.stmts[query] = st
	return st, nil
}

// For returns query prepared for q: on the pool, or bound to q when it is a transaction
// (closed with it). ok is false when it could not be prepared, or c is nil: run the statement
// unprepared, which reports why.
func (c *Cache) For(ctx context.Context, q sqlx.ExtContext, query string) (st *sqlx.Stmt, ok bool) {
	if c == nil {
		return nil, false
	}
	st, err := c.Get(ctx, query)
	if err != nil {
		return nil, false
	}
	if tx, isTx := q.(*sqlx.Tx); isTx {
		return tx.StmtxContext(ctx, st), true
	}
	return st, true
}

// Close closes every statement prepared.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	clear(c.stmts)
}
