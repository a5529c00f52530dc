-- The audit trail: one row per change made through the API, the UI or the CLI, inserted in
-- the transaction that makes the change (dao.AuditInsert), so a change without its record
-- cannot commit; and one row per refused attempt (outcome "refused: …"), written apart since
-- the refused change rolled back. Nothing in zksched updates or deletes a row of it, and a
-- trigger refuses UPDATE, DELETE and TRUNCATE to everyone: rewriting the trail takes DDL
-- (disabling the trigger, as the table's owner), which PostgreSQL logs with log_statement =
-- ddl. An operator who prunes old rows does it that way, on purpose.
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_event_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_event is append-only: % refused', TG_OP;
END $$;
-- +goose StatementEnd
DROP TRIGGER IF EXISTS audit_event_append_only ON audit_event;
CREATE TRIGGER audit_event_append_only BEFORE UPDATE OR DELETE ON audit_event
    FOR EACH ROW EXECUTE FUNCTION audit_event_append_only();
DROP TRIGGER IF EXISTS audit_event_no_truncate ON audit_event;
CREATE TRIGGER audit_event_no_truncate BEFORE TRUNCATE ON audit_event
    FOR EACH STATEMENT EXECUTE FUNCTION audit_event_append_only();

-- +goose Down
DROP TABLE IF EXISTS audit_event;
DROP FUNCTION IF EXISTS audit_event_append_only();
