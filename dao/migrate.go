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
// several processes run it at once: a PostgreSQL advisory lock lets one apply while the others
// wait and then find nothing to do.
func (db *DB) Migrate(ctx context.Context) ([]string, error) {
	fsys, err := fs.Sub(zsql.Migrations, "migrations")
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db.db.DB, fsys, goose.WithSessionLocker(locker))
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
