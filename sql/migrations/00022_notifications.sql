-- Notifications go through an outbox: a notification row is written in the transaction that
-- makes its event, and any master sends it later (dao.NotificationClaimDue), so an event is
-- never lost to a crash between the change and the send, nor sent for a change that rolled
-- back.
--
-- notify_rule holds who hears what: one row per (event, channel target) of a definition's
-- notify: list, written with the definition (dao.DefinitionEnsure), and the masters'
-- notify.default under workflow_name NULL (dao.NotifyDefaultReplace), which applies to the
-- definitions without rules of their own and to the cluster's events. A webhook's target is
-- the name of the environment variable holding its URL, read by the master that sends: the
-- URL is never stored.
--
-- Rows are queued by triggers, not by the statements that end instances: every end, whatever
-- statement makes it (a master's finish, a timeout, a stop, a child's end, the worker's end
-- of a one-task instance, a CTE of the failover step), passes through an UPDATE of state, so
-- one trigger per table sees them all and no future statement can forget one. Each trigger's
-- WHEN tests the row's own columns, so an update that ends nothing (a claim, a retry, a
-- heartbeat) never calls a function, and a task's trigger fires only for a failed one. An
-- ended workflow instance costs one look at notify_rule, which finds nothing for a
-- workflow without notify: when no default is configured.
--
-- (event, subject, channel, target) is unique and every insert is ON CONFLICT DO NOTHING: an
-- event is queued once per target whoever queues it, which is what lets two masters find the
-- same passed deadline. subject names what the event is about, once: a workflow end by its
-- instance and end time (a rerun reopens an instance, which can end again), a failed task by
-- its attempt, a fenced node by its failover event.
--
-- A row is pending, then sending while a master holds it (next_attempt_at is then when its
-- hold lapses, after which any master may take it again: a sender that died mid-send leaves
-- it to another, with the same idempotency_key), then sent, or dead after its last try.

-- +goose Up
CREATE TABLE notify_rule (
    workflow_name    text,
    workflow_version integer,
    event            text    NOT NULL
                     CHECK (event IN ('failure', 'success', 'timeout', 'deadline', 'task-failed', 'node-fenced', 'failover')),
    channel          text    NOT NULL CHECK (channel IN ('webhook', 'email')),
    target           text    NOT NULL,
    slack            boolean NOT NULL DEFAULT false,
    CHECK ((workflow_name IS NULL) = (workflow_version IS NULL)),
    UNIQUE NULLS NOT DISTINCT (workflow_name, workflow_version, event, channel, target)
);

ALTER TABLE workflow_definition ADD COLUMN deadline_ms bigint CHECK (deadline_ms > 0);
-- task_deadlines_ms maps a task's name to its deadline in milliseconds, computed in Go from
-- the parsed spec (lifecycle.Facts); NULL when no task has one.
ALTER TABLE workflow_definition ADD COLUMN task_deadlines_ms jsonb;

CREATE TABLE notification (
    id                   bigserial   PRIMARY KEY,
    event                text        NOT NULL,
    subject              text        NOT NULL,
    workflow_name        text,
    workflow_instance_id bigint,
    task_instance_id     bigint,
    channel              text        NOT NULL,
    target               text        NOT NULL,
    slack                boolean     NOT NULL,
    -- What the message says of the event: state, error, the node, the time it happened.
    payload              jsonb       NOT NULL,
    state                text        NOT NULL DEFAULT 'pending'
                         CHECK (state IN ('pending', 'sending', 'sent', 'dead')),
    attempts             integer     NOT NULL DEFAULT 0,
    next_attempt_at      timestamptz NOT NULL DEFAULT now(),
    last_error           text,
    idempotency_key      text        NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    sent_at              timestamptz,
    UNIQUE (event, subject, channel, target)
);
-- The senders' claim: only rows still to send are in it.
CREATE INDEX notification_due ON notification (next_attempt_at) WHERE state IN ('pending', 'sending');
-- The deadline look: has this instance's (or task's) deadline been queued?
CREATE INDEX notification_instance ON notification (workflow_instance_id, event);
CREATE INDEX notification_created ON notification (id DESC);

-- +goose StatementBegin
-- notification_queue queues event about subject for every rule that hears it: the rules of
-- the definition (name, version), or the default rules when it has none (name NULL: the
-- cluster's events hear the default rules alone).
CREATE FUNCTION notification_queue(p_event text, p_subject text, p_name text, p_version integer,
    p_workflow bigint, p_task bigint, p_payload jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- PL/pgSQL keeps the statement's plan for the session, where an SQL function would plan
    -- it again at every call.
    INSERT INTO notification (event, subject, workflow_name, workflow_instance_id, task_instance_id,
        channel, target, slack, payload, idempotency_key)
    SELECT p_event, p_subject, p_name, p_workflow, p_task, r.channel, r.target, r.slack, p_payload,
        'zksched-' || md5(p_event || ' ' || p_subject || ' ' || r.channel || ' ' || r.target)
    FROM notify_rule r
    WHERE r.event = p_event
      AND ((r.workflow_name = p_name AND r.workflow_version = p_version)
        OR (r.workflow_name IS NULL AND NOT EXISTS (
            SELECT 1 FROM notify_rule o WHERE o.workflow_name = p_name AND o.workflow_version = p_version)))
    ON CONFLICT DO NOTHING;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- A workflow instance's end: success, failure, or timeout for one failed by its workflow
-- timeout (WorkflowTimeOutIfOwned's error). A stop is an operator's act and sends nothing.
CREATE FUNCTION notification_workflow_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Nobody listens to any workflow end: nothing to build.
    IF NOT EXISTS (SELECT 1 FROM notify_rule WHERE event IN ('success', 'failure', 'timeout')) THEN
        RETURN NULL;
    END IF;
    PERFORM notification_queue(
        CASE WHEN NEW.state = 'succeeded' THEN 'success'
             WHEN NEW.error LIKE 'workflow timeout % exceeded' THEN 'timeout'
             ELSE 'failure' END,
        'workflow ' || NEW.id || ' ended ' || (extract(epoch FROM coalesce(NEW.ended_at, now())) * 1000000)::bigint,
        NEW.workflow_name, NEW.workflow_version, NEW.id, NULL,
        jsonb_build_object('state', NEW.state, 'error', coalesce(NEW.error, ''),
            'time', coalesce(NEW.ended_at, now())));
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER notification_workflow_ended AFTER UPDATE OF state ON workflow_instance
    FOR EACH ROW WHEN (NEW.state IN ('succeeded', 'failed') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION notification_workflow_ended();

-- +goose StatementBegin
-- A task instance's failure, after its retries: a retry puts the task back in the queue, so
-- failed is its last state. A task created failed (its when: could not be decided) counts.
CREATE FUNCTION notification_task_failed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    wf workflow_instance%ROWTYPE;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM notify_rule WHERE event = 'task-failed') THEN
        RETURN NULL;
    END IF;
    SELECT * INTO wf FROM workflow_instance WHERE id = NEW.workflow_instance_id;
    PERFORM notification_queue('task-failed', 'task ' || NEW.id || ' attempt ' || NEW.attempt,
        wf.workflow_name, wf.workflow_version, NEW.workflow_instance_id, NEW.id,
        jsonb_build_object('state', NEW.state, 'error', coalesce(NEW.error, ''), 'task', NEW.name,
            'attempt', NEW.attempt, 'time', coalesce(NEW.ended_at, now())));
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER notification_task_failed AFTER UPDATE OF state ON task_instance
    FOR EACH ROW WHEN (NEW.state = 'failed' AND OLD.state IS DISTINCT FROM 'failed')
    EXECUTE FUNCTION notification_task_failed();
CREATE TRIGGER notification_task_created_failed AFTER INSERT ON task_instance
    FOR EACH ROW WHEN (NEW.state = 'failed')
    EXECUTE FUNCTION notification_task_failed();

-- +goose StatementBegin
-- The failover step of a lost node: node-fenced once per identity, when its failover is
-- first recorded; failover each time the step moved work (a later leader's repeat that
-- finds more adds to the counts).
CREATE FUNCTION notification_failover() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    payload jsonb := jsonb_build_object('state', 'fenced', 'error', '', 'node', NEW.node_id,
        'role', NEW.role, 'leader', NEW.leader, 'tasks_requeued', NEW.tasks_requeued,
        'workflows_released', NEW.workflows_released, 'time', coalesce(NEW.finished_at, now()));
    moved_before integer := 0;
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM notification_queue('node-fenced', 'node ' || NEW.node_id, NULL, NULL, NULL, NULL, payload);
    END IF;
    IF TG_OP = 'UPDATE' THEN
        moved_before := OLD.tasks_requeued + OLD.workflows_released;
    END IF;
    IF NEW.tasks_requeued + NEW.workflows_released > moved_before THEN
        PERFORM notification_queue('failover',
            'node ' || NEW.node_id || ' moved ' || (NEW.tasks_requeued + NEW.workflows_released),
            NULL, NULL, NULL, NULL, payload);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER notification_failover AFTER INSERT OR UPDATE ON failover_event
    FOR EACH ROW EXECUTE FUNCTION notification_failover();

-- +goose Down
DROP TRIGGER notification_failover ON failover_event;
DROP TRIGGER notification_task_created_failed ON task_instance;
DROP TRIGGER notification_task_failed ON task_instance;
DROP TRIGGER notification_workflow_ended ON workflow_instance;
DROP FUNCTION notification_failover();
DROP FUNCTION notification_task_failed();
DROP FUNCTION notification_workflow_ended();
DROP FUNCTION notification_queue(text, text, text, integer, bigint, bigint, jsonb);
DROP TABLE notification;
ALTER TABLE workflow_definition DROP COLUMN task_deadlines_ms;
ALTER TABLE workflow_definition DROP COLUMN deadline_ms;
DROP TABLE notify_rule;
