package dao

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	zsql "github.com/zksched/zksched/sql"
)

// Migrate applies every pending migration in sql/migrations. It is idempotent, and safe when
// several processes run it at once: a PostgreSQL advisory lock, one per schema, lets one apply
// while the others wait and then find nothing to do.
//
// Migrations are numbered by feature as they are planned, and may land in another order: a
// database that has 00003 already still gets 00002 when it appears (goose's out-of-order
// mode). Each migration therefore depends only on 00001 and on those below it that were
// released together with it.
func (db *DB) Migrate(ctx context.Context) ([]string, error) {
	fsys, err := fs.Sub(zsql.Migrations, "migrations")
	if err != nil {
		return nil, err
	}
	return db.migrate(ctx, fsys)
}

func (db *DB) migrate(ctx context.Context, fsys fs.FS) ([]string, error) {
	// The lock is the schema's own: processes migrating one schema take turns, while
	// deployments (and tests) in other schemas of the same database do not wait for them.
	var lockID int64
	if err := db.db.GetContext(ctx, &lockID, `SELECT hashtextextended('zksched.migrate.' || current_schema(), 0)`); err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID))
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db.db.DB, fsys, goose.WithSessionLocker(locker),
		goose.WithAllowOutofOrder(true))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	applied := make([]string, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Path)
	}
	return applied, nil
}
