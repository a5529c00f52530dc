package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// APISession is a row of api_session: one login to the web UI.
type APISession struct {
	UserName   string    `db:"user_name"`
	Credential string    `db:"credential"`
	CreatedAt  time.Time `db:"created_at"`
	ExpiresAt  time.Time `db:"expires_at"`
}

// ErrNoSession is returned for a session that does not exist, has expired or was revoked.
var ErrNoSession = errors.New("no such session: expired, revoked or never started")

// sessionKeep is how long an ended session's row is kept before a login deletes it.
const sessionKeep = 24 * time.Hour

// APISessionCreate stores a new session lasting ttl, by the database's clock, and deletes the
// rows of sessions that ended over a day ago.
func (db *DB) APISessionCreate(ctx context.Context, idHash []byte, user, credential string, ttl time.Duration) (time.Time, error) {
	if _, err := db.db.ExecContext(ctx, `DELETE FROM api_session WHERE expires_at < now() - make_interval(secs => $1)`,
		sessionKeep.Seconds()); err != nil {
		return time.Time{}, fmt.Errorf("delete ended sessions: %w", err)
	}
	var exp time.Time
	err := db.db.GetContext(ctx, &exp, `INSERT INTO api_session (id_hash, user_name, credential, expires_at)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4)) RETURNING expires_at`,
		idHash, user, credential, ttl.Seconds())
	if err != nil {
		return time.Time{}, fmt.Errorf("create session of %s: %w", user, err)
	}
	return exp, nil
}

// APISessionGetIfLive returns the session whose id hashes to idHash, if it has neither
// expired nor been revoked; ErrNoSession otherwise.
func (db *DB) APISessionGetIfLive(ctx context.Context, idHash []byte) (APISession, error) {
	var s APISession
	err := db.db.GetContext(ctx, &s, `SELECT user_name, credential, created_at, expires_at FROM api_session
		WHERE id_hash = $1 AND revoked_at IS NULL AND expires_at > now()`, idHash)
	if errors.Is(err, sql.ErrNoRows) {
		return s, ErrNoSession
	}
	if err != nil {
		return s, fmt.Errorf("read session: %w", err)
	}
	return s, nil
}

// APISessionRevoke ends the session whose id hashes to idHash. Revoking a session that does
// not exist or has already ended is not an error.
func (db *DB) APISessionRevoke(ctx context.Context, idHash []byte) error {
	if _, err := db.db.ExecContext(ctx, `UPDATE api_session SET revoked_at = now()
		WHERE id_hash = $1 AND revoked_at IS NULL`, idHash); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}
