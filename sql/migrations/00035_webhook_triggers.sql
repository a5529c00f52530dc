-- Webhook triggers (workflow file: triggers: [{webhook: ...}]).
--
-- trigger_hook indexes the hooks of the stored definitions, written in the transaction that
-- stores one (lifecycle.Define): a hook belongs to one workflow, whose latest stored version
-- declaring it is what a delivery runs. A second workflow claiming the name is refused; a
-- version that no longer declares a hook removes it, as a file without a schedule removes its
-- schedule.
--
-- hook_delivery remembers each delivery whose signature was verified. A delivery id (the
-- hook's dedupe header) is unique per hook: the delivery's row is inserted in the transaction
-- that submits its run, so of two masters given the same delivery at once the second waits on
-- the first's row and, once it commits, finds the id taken and starts nothing. A row older
-- than the dedupe window gives its id up (dao.HookDeliveryRecord). A delivery without an id
-- (a hook with no dedupe header, or one refused before its run) has a NULL id, which the
-- unique index never matches.

-- +goose Up
CREATE TABLE trigger_hook (
    name             text PRIMARY KEY,
    workflow_name    text NOT NULL,
    workflow_version integer NOT NULL,
    signature        text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX trigger_hook_workflow ON trigger_hook (workflow_name);

CREATE TABLE hook_delivery (
    id                   bigserial PRIMARY KEY,
    hook                 text NOT NULL,
    delivery_id          text,
    received_at          timestamptz NOT NULL DEFAULT now(),
    outcome              text NOT NULL,
    workflow_instance_id bigint,
    client               text NOT NULL,
    CONSTRAINT hook_delivery_once UNIQUE (hook, delivery_id)
);
CREATE INDEX hook_delivery_hook_id ON hook_delivery (hook, id);

-- +goose Down
DROP TABLE hook_delivery;
DROP TABLE trigger_hook;
