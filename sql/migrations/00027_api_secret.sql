-- Secrets every master of a cluster shares, by name. "csrf" keys the web UI's CSRF tokens
-- (an HMAC of the session, api/csrf.go): sessions live in PostgreSQL and any master serves
-- any of them, so every master must compute the same token. The first master to need a
-- secret stores a random one of its own; the others read that one
-- (dao.APISecretGetOrCreate). Nothing updates a row: deleting it makes the next master to
-- start draw a new key, which only makes open pages' forms ask for a reload.

-- +goose Up
CREATE TABLE api_secret (
    name       text PRIMARY KEY,
    value      bytea NOT NULL CHECK (length(value) >= 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE api_secret;
