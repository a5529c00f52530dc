-- The audit trail: one row per change made through the API, the UI or the CLI, inserted in
-- the transaction that makes the change (dao.AuditInsert), so a change without its record
-- cannot commit; and one row per refused attempt (outcome "refused: …"), written apart since
-- the refused change rolled back. Nothing in zksched updates or deletes a row of it.
--
-- The list is newest first, paged by id (the primary key, walked backwards from the cursor);
-- each filter gets an index that ends in id, as the task list's do (00004). target is
-- filtered by prefix ("workflow-instance/", "schedule/nightly"), so its index compares bytes
-- (COLLATE "C"), which lets a LIKE 'prefix%' use it whatever the database's collation.

-- +goose Up
CREATE TABLE IF NOT EXISTS audit_event (
    id      bigserial PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text NOT NULL,
    role    text NOT NULL,
    action  text NOT NULL,
    target  text COLLATE "C" NOT NULL,
    params  jsonb NOT NULL DEFAULT '{}',
    client  text NOT NULL,
    outcome text NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_event_actor_id ON audit_event (actor, id);
CREATE INDEX IF NOT EXISTS audit_event_action_id ON audit_event (action, id);
CREATE INDEX IF NOT EXISTS audit_event_target_id ON audit_event (target, id);
CREATE INDEX IF NOT EXISTS audit_event_at ON audit_event (at);

-- +goose Down
DROP TABLE IF EXISTS audit_event;
