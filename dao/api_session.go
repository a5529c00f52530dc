package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
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
	err := db.db.GetContext(ctx, &exp, `INSERT INTO api_session (id_hash, user_name, credential, expires_at, generation)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4),
			coalesce((SELECT generation FROM api_user WHERE user_name = $2), 0))
		RETURNING expires_at`,
		idHash, user, credential, ttl.Seconds())
	if err != nil {
		return time.Time{}, fmt.Errorf("create session of %s: %w", user, err)
	}
	return exp, nil
}

// APISessionGetIfLive returns the session whose id hashes to idHash, if it has neither
// expired nor been revoked and was started in its user's current generation (see
// APIUserEnd); ErrNoSession otherwise.
func (db *DB) APISessionGetIfLive(ctx context.Context, idHash []byte) (APISession, error) {
	var s APISession
	err := db.db.GetContext(ctx, &s, `SELECT s.user_name, s.credential, s.created_at, s.expires_at
		FROM api_session s LEFT JOIN api_user u ON u.user_name = s.user_name
		WHERE s.id_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()
		  AND s.generation = coalesce(u.generation, 0)`, idHash)
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

// A user's generation (api_user, migration 00026) ends every session of the user started
// before it: sessions carry the generation of their login, and only those of the current one
// hold. Ending a user's sessions bumps the generation and deletes their rows in one
// statement, so it holds even for a login that raced it and whose row the deletion missed,
// and it holds in PostgreSQL, whether or not a master runs: the same users-file line coming
// back later brings the user's token back, never its sessions.

// apiUserEndSQL ends the sessions of the users $1: their generation goes up, their session
// rows go.
const apiUserEndSQL = `
		WITH bumped AS (
			INSERT INTO api_user (user_name, generation) SELECT DISTINCT u, 1 FROM unnest($1::text[]) AS u ORDER BY u
			ON CONFLICT (user_name) DO UPDATE SET generation = api_user.generation + 1
			RETURNING user_name
		)
		DELETE FROM api_session WHERE user_name IN (SELECT user_name FROM bumped)`

// APIUserEnd ends every session of user: `zksched user remove` calls it in the transaction
// that removes the user, so the removal and the end of its sessions commit together.
func (q *Queries) APIUserEnd(ctx context.Context, user string) error {
	if _, err := q.q.ExecContext(ctx, apiUserEndSQL, pq.Array([]string{user})); err != nil {
		return fmt.Errorf("end the sessions of user %s: %w", user, err)
	}
	return nil
}

// apiSessionsEndStaleSQL ends the sessions of every user with a session row that does not
// match the users $1 with credentials $2 (a user not among them, or whose credential is not
// the session's), as apiUserEndSQL does, and returns their names.
const apiSessionsEndStaleSQL = `
		WITH known AS (
			SELECT * FROM unnest($1::text[], $2::text[]) AS k(user_name, credential)
		), stale AS (
			SELECT DISTINCT s.user_name FROM api_session s LEFT JOIN known k ON k.user_name = s.user_name
			WHERE k.credential IS DISTINCT FROM s.credential
		), bumped AS (
			INSERT INTO api_user (user_name, generation) SELECT user_name, 1 FROM stale ORDER BY user_name
			ON CONFLICT (user_name) DO UPDATE SET generation = api_user.generation + 1
			RETURNING user_name
		), gone AS (
			DELETE FROM api_session WHERE user_name IN (SELECT user_name FROM bumped)
		)
		SELECT user_name FROM bumped ORDER BY user_name`

// APISessionsEndStale ends the sessions of every user that has one but is not among users
// with the same credential any more (credentials[i] is users[i]'s), and returns their names:
// a master calls it with the users it has just read, so that a user it sees removed, or whose
// token changed, loses its sessions for good.
func (db *DB) APISessionsEndStale(ctx context.Context, users, credentials []string) ([]string, error) {
	if len(users) != len(credentials) {
		return nil, fmt.Errorf("end stale sessions: %d users and %d credentials", len(users), len(credentials))
	}
	var ended []string
	if err := db.db.SelectContext(ctx, &ended, apiSessionsEndStaleSQL, pq.Array(users), pq.Array(credentials)); err != nil {
		return nil, fmt.Errorf("end stale sessions: %w", err)
	}
	return ended, nil
}
