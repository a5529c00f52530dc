-- Retention (conf.Retention): the leader deletes the history of finished work past its period,
-- oldest first, in batches of a few hundred rows, each its own short transaction.
--
-- workflow_instance_ended holds the finished instances in the order they ended: a batch of the
-- purge of instances, and of the purge of their logs, is a range at its start, whatever the
-- size of the table. A finished instance's task instances, attempts, logs and checkpoints go
-- with it through the ON DELETE CASCADE of 00001. Its schedule fire keeps its row with the
-- link set NULL (00002), which schedule_fire_instance finds by index; without it each
-- instance deleted would read the whole of schedule_fire. schedule_fire_created and
-- failover_event_finished order the purges of those two tables.
--
-- retention_progress holds how far the purge of logs has gone in workflow_instance_ended's
-- order: the instances before it have no logs left, so a batch starts where the last one
-- ended rather than walking again over every instance whose logs are gone.
--
-- The audit trail stays append-only (00013) except for one writer: a transaction that
-- declares a retention period in zksched.audit_retention (set_config(…, true), for that
-- transaction alone) may delete rows older than the period, and no other. UPDATE, TRUNCATE
-- and any other DELETE are refused as before.
--
-- Like 00004, plain CREATE INDEX holds a write lock on the table while it builds. On a large
-- live table, create the indexes by hand with CREATE INDEX CONCURRENTLY under these names
-- first; IF NOT EXISTS then skips them.

-- +goose Up
CREATE INDEX IF NOT EXISTS workflow_instance_ended ON workflow_instance (ended_at, id)
    WHERE state IN ('succeeded', 'failed', 'stopped');
CREATE INDEX IF NOT EXISTS schedule_fire_instance ON schedule_fire (workflow_instance_id)
    WHERE workflow_instance_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS schedule_fire_created ON schedule_fire (created_at);
CREATE INDEX IF NOT EXISTS failover_event_finished ON failover_event (finished_at);

CREATE TABLE retention_progress (
    -- What the purge walks: "logs".
    what     text        PRIMARY KEY,
    -- The last instance done, in workflow_instance_ended's order.
    ended_at timestamptz NOT NULL,
    id       bigint      NOT NULL
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_event_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    keep text := current_setting('zksched.audit_retention', true);
BEGIN
    IF TG_OP = 'DELETE' AND coalesce(keep, '') <> '' AND OLD.at < now() - keep::interval THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_event is append-only: % refused', TG_OP;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_event_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_event is append-only: % refused', TG_OP;
END $$;
-- +goose StatementEnd
DROP TABLE retention_progress;
DROP INDEX failover_event_finished;
DROP INDEX schedule_fire_created;
DROP INDEX schedule_fire_instance;
DROP INDEX workflow_instance_ended;
