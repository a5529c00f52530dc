-- The web UI's sessions live in PostgreSQL, so that every master accepts a session another
-- one started and a logout ends it everywhere: the cookie alone no longer proves anything.
-- id_hash is the SHA-256 of the cookie's random value (a reader of this table cannot use a
-- row as a cookie); credential ties the session to the token it logged in with, so a user
-- whose token changes or who is removed from the users file loses the session.

-- +goose Up
CREATE TABLE api_session (
    id_hash    bytea PRIMARY KEY,
    user_name  text NOT NULL,
    credential text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX api_session_expires ON api_session (expires_at);

-- +goose Down
DROP TABLE api_session;
