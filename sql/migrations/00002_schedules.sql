-- Cron schedules and workflow-level policies. A schedule belongs to a workflow name (its file
-- carries it); every fire is one row of schedule_fire, keyed by (workflow, fire time), so a
-- fire is an idempotent insert: two masters, a failover or a restart never create two
-- instances for one fire, and a backfill never repeats one.

-- +goose Up
CREATE TABLE schedule (
    workflow_name    text        PRIMARY KEY,
    -- The definition version fires create instances of: the one submitted with the schedule.
    workflow_version integer     NOT NULL,
    cron             text        NOT NULL,
    timezone         text        NOT NULL,
    start_at         timestamptz NOT NULL,
    end_at           timestamptz,
    enabled          boolean     NOT NULL DEFAULT true,
    misfire          text        NOT NULL CHECK (misfire IN ('skip', 'run-once', 'run-all')),
    misfire_limit    integer     NOT NULL DEFAULT 0,
    -- The earliest fire time not yet handled; NULL once the schedule is past its end.
    next_fire_at     timestamptz,
    last_fire_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (workflow_name, workflow_version) REFERENCES workflow_definition (name, version)
);
-- The masters' firing loop looks here.
CREATE INDEX schedule_due ON schedule (next_fire_at) WHERE enabled AND next_fire_at IS NOT NULL;

CREATE TABLE schedule_fire (
    workflow_name        text        NOT NULL,
    fire_time            timestamptz NOT NULL,
    -- cron: on time; misfire: caught up after no master could fire it; trigger: by hand;
    -- backfill: zksched backfill.
    kind                 text        NOT NULL CHECK (kind IN ('cron', 'misfire', 'trigger', 'backfill')),
    -- NULL when the fire created no instance (outcome skipped).
    workflow_instance_id bigint      REFERENCES workflow_instance (id) ON DELETE SET NULL,
    outcome              text        NOT NULL CHECK (outcome IN ('created', 'skipped')),
    reason               text,
    fired_by             text        NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_name, fire_time)
);

-- max_active is the instance's max-active-instances, copied from its definition: masters
-- start an instance that has one only while fewer of its workflow run. NULL means no cap.
ALTER TABLE workflow_instance ADD COLUMN max_active integer CHECK (max_active > 0);
-- Instances waiting for a slot of their workflow, in admission order.
CREATE INDEX workflow_instance_waiting ON workflow_instance (workflow_name, priority DESC, id)
    WHERE owner IS NULL AND state = 'submitted' AND max_active IS NOT NULL;
-- Counting the running instances of a workflow at admission.
CREATE INDEX workflow_instance_active ON workflow_instance (workflow_name)
    WHERE state IN ('submitted', 'running');

-- +goose Down
DROP INDEX workflow_instance_active;
DROP INDEX workflow_instance_waiting;
ALTER TABLE workflow_instance DROP COLUMN max_active;
DROP TABLE schedule_fire;
DROP TABLE schedule;
