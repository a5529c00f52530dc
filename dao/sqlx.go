package dao

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
)

func sqlxSelect(ctx context.Context, q *Queries, dest any, query string, args ...any) error {
	return sqlx.SelectContext(ctx, q.q, dest, query, args...)
}

func sqlxGet(ctx context.Context, q *Queries, dest any, query string, args ...any) error {
	return sqlx.GetContext(ctx, q.q, dest, query, args...)
}

// expectOneRow drains rows and turns "no row" into ErrTokenRefused.
func expectOneRow(rows *sql.Rows, tok Token) error {
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("task %d attempt %d: %w", tok.TaskID, tok.Attempt, err)
	}
	if n == 0 {
		return fmt.Errorf("task %d attempt %d of %s: %w", tok.TaskID, tok.Attempt, tok.WorkerID, ErrTokenRefused)
	}
	return nil
}

// The hot statements run prepared (stmtcache), on the pool or bound to the transaction.
//
// They are left to PostgreSQL's own choice between custom and generic plans, except the task
// claims, which run on connections of their own with generic plans and no sequential or
// bitmap scans (claimSettings in db.go): a generic plan is made once per connection from the
// statistics of that moment and kept until the table is next analyzed, and made on an empty
// task_instance the claim's plan would otherwise be a sequential scan, read whole at every
// claim however long the queue grows. A custom plan sees the live size of the table at every
// call.

// selectHot is sqlxSelect for a hot statement, prepared.
func selectHot(ctx context.Context, q *Queries, dest any, query string, args ...any) error {
	if st, ok := q.prep.For(ctx, q.q, query); ok {
		return st.SelectContext(ctx, dest, args...)
	}
	return sqlxSelect(ctx, q, dest, query, args...)
}

// queryHot runs a hot statement, prepared, for rows to scan by hand.
func queryHot(ctx context.Context, q *Queries, query string, args ...any) (*sql.Rows, error) {
	if st, ok := q.prep.For(ctx, q.q, query); ok {
		return st.QueryContext(ctx, args...)
	}
	return q.q.QueryContext(ctx, query, args...)
}

// getHot is sqlxGet for a hot statement, prepared.
func getHot(ctx context.Context, q *Queries, dest any, query string, args ...any) error {
	if st, ok := q.prep.For(ctx, q.q, query); ok {
		return st.GetContext(ctx, dest, args...)
	}
	return sqlxGet(ctx, q, dest, query, args...)
}
