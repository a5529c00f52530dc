-- A session is bound to its user's generation as well as to the token it logged in with
-- (00014): the same users-file line coming back (a restore, a config-management run) brings
-- the same token back, so the token alone would revive the sessions of a removed user.
-- api_user holds each user's generation. `zksched user remove`, and every master that finds
-- sessions not matching the users file it reads (at start and whenever the file changes),
-- bump the generation of their users and delete their session rows in one transaction. A
-- session carries the generation of its login and holds only while it is its user's current
-- one: a login that raced the removal, and whose row the deletion did not see, is dead too.
-- The removal is recorded here, in PostgreSQL, so it holds whether or not a master ran.

-- +goose Up
CREATE TABLE api_user (
    user_name  text PRIMARY KEY,
    generation bigint NOT NULL
);
ALTER TABLE api_session ADD COLUMN generation bigint NOT NULL DEFAULT 0;
CREATE INDEX api_session_user ON api_session (user_name);

-- +goose Down
DROP INDEX api_session_user;
ALTER TABLE api_session DROP COLUMN generation;
DROP TABLE api_user;
