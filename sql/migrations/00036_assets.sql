-- Assets: data-aware runs. A task that declares produces: [A] writes an asset_event of A in
-- the statement that records its success (finishManySQL); `zksched asset emit` and the API
-- write one from outside. A workflow whose definition declares on-assets is an asset_consumer:
-- each event of an asset it names is queued for it in asset_pending, in the statement that
-- writes the event, and a master starts a run once the queue holds an event of each (all) or
-- of any (any) named asset. The run's start deletes the events it takes from the queue and
-- links them to the run in asset_consumption, in one transaction with the run's creation
-- under the consumer's row lock: a master killed before the commit leaves the events queued
-- and no run, and the primary keys refuse an event taken twice.

-- +goose Up
CREATE TABLE asset_event (
    id                   bigserial   PRIMARY KEY,
    asset                text        NOT NULL,
    -- The producing task and its run; NULL for an event from outside (emitted_by says who).
    -- No foreign keys: retention removes runs without looking here, and an event outlives
    -- its producer's run.
    task_instance_id     bigint,
    workflow_instance_id bigint,
    -- The producer's output, its first 65536 characters.
    output               text,
    output_truncated     boolean     NOT NULL DEFAULT false,
    emitted_by           text,
    created_at           timestamptz NOT NULL DEFAULT now()
);
-- The recent events of an asset (the assets page).
CREATE INDEX asset_event_asset ON asset_event (asset, id);

CREATE TABLE asset_consumer (
    workflow_name    text        PRIMARY KEY,
    -- The definition version asset-started runs create instances of: the latest stored.
    workflow_version integer     NOT NULL,
    -- true: a run takes one event of each asset; false: one event of any.
    all_of           boolean     NOT NULL,
    assets           text[]      NOT NULL CHECK (cardinality(assets) > 0),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (workflow_name, workflow_version) REFERENCES workflow_definition (name, version)
);
-- The consumers of an event's asset, when the event is written.
CREATE INDEX asset_consumer_assets ON asset_consumer USING gin (assets);

-- The assets each workflow's latest definition produces (its tasks' produces), for the
-- assets page: written when a definition is stored.
CREATE TABLE asset_producer (
    workflow_name text NOT NULL,
    asset         text NOT NULL,
    PRIMARY KEY (workflow_name, asset)
);

-- The events each consumer has not taken yet, oldest first.
CREATE TABLE asset_pending (
    consumer text   NOT NULL REFERENCES asset_consumer (workflow_name) ON DELETE CASCADE,
    asset    text   NOT NULL,
    event_id bigint NOT NULL REFERENCES asset_event (id) ON DELETE CASCADE,
    PRIMARY KEY (consumer, asset, event_id)
);

-- The events each asset-started run took.
CREATE TABLE asset_consumption (
    consumer             text        NOT NULL,
    event_id             bigint      NOT NULL REFERENCES asset_event (id) ON DELETE CASCADE,
    -- The run the events started (no foreign key, as for asset_event).
    workflow_instance_id bigint      NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);
CREATE INDEX asset_consumption_instance ON asset_consumption (workflow_instance_id);

-- +goose Down
DROP TABLE asset_consumption;
DROP TABLE asset_pending;
DROP TABLE asset_producer;
DROP TABLE asset_consumer;
DROP TABLE asset_event;
