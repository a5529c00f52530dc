package dao

import (
	"context"
	"fmt"
)

// APISecretGetOrCreate returns the secret named name, storing value as it when there is none
// yet: of masters that ask at once, the first to insert wins and every one returns its value.
func (db *DB) APISecretGetOrCreate(ctx context.Context, name string, value []byte) ([]byte, error) {
	// Two statements: an INSERT that loses the race waits for the winner to commit, but a
	// SELECT in the same statement would read the snapshot taken before it.
	if _, err := db.db.ExecContext(ctx, `INSERT INTO api_secret (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
		name, value); err != nil {
		return nil, fmt.Errorf("store secret %s: %w", name, err)
	}
	var v []byte
	if err := db.db.GetContext(ctx, &v, `SELECT value FROM api_secret WHERE name = $1`, name); err != nil {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	return v, nil
}
