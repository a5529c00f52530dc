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
