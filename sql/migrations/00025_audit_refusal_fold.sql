-- Refused attempts are folded: the refusals of one actor, action and outcome within one minute
-- (by the database's clock) are one row whose count says how many there were, so a client
-- that repeats a refused request cannot grow the trail by a row a request. A change's row is
-- never folded: it is inserted in the change's own transaction (00013) and its count stays 1.
--
-- Folding is an upsert on audit_event_refusal_fold, so several masters fold into the same row
-- and a crash loses nothing already answered. It needs an UPDATE, which the trail's trigger
-- refused to everyone: it now lets through exactly one, the count of a folded refusal going
-- up with every other column unchanged. A change's row (fold_minute NULL) stays immutable,
-- as do a refusal's who, what, when and why.
--
-- Target and outcome are clipped by the writer (dao.AuditClip) so that every row fits the
-- indexes' btree entries; this index holds outcome whole for that reason.

-- +goose Up
ALTER TABLE audit_event ADD COLUMN IF NOT EXISTS count integer NOT NULL DEFAULT 1;
ALTER TABLE audit_event ADD COLUMN IF NOT EXISTS fold_minute timestamptz;
CREATE UNIQUE INDEX IF NOT EXISTS audit_event_refusal_fold ON audit_event (actor, action, outcome, fold_minute)
    WHERE fold_minute IS NOT NULL;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_event_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    keep text := current_setting('zksched.audit_retention', true);
BEGIN
    IF TG_OP = 'DELETE' AND coalesce(keep, '') <> '' AND OLD.at < now() - keep::interval THEN
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.fold_minute IS NOT NULL AND NEW.count > OLD.count
        AND (NEW.id, NEW.at, NEW.actor, NEW.role, NEW.action, NEW.target, NEW.params, NEW.client, NEW.outcome, NEW.fold_minute)
            IS NOT DISTINCT FROM
            (OLD.id, OLD.at, OLD.actor, OLD.role, OLD.action, OLD.target, OLD.params, OLD.client, OLD.outcome, OLD.fold_minute) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit_event is append-only: % refused', TG_OP;
END $$;
-- +goose StatementEnd

-- +goose Down
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
DROP INDEX IF EXISTS audit_event_refusal_fold;
ALTER TABLE audit_event DROP COLUMN IF EXISTS fold_minute;
ALTER TABLE audit_event DROP COLUMN IF EXISTS count;
