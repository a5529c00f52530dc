-- Tracing (package tracing): one trace per workflow instance, whose context is decided once,
-- when the instance is submitted, and stored with it, because its spans come from several
-- processes: the workers that run its attempts, the leader that fails an attempt over, the
-- master or worker that ends it.
--
-- trace_context holds that context in the W3C form
-- 00-<trace id>-<span id of the instance's own span>-<flags>, flags 01 when the trace is
-- sampled, for the instances submitted by a process with tracing on; the others have no row.
-- Attempt spans take their parent from it, and their own id from (trace id, task instance,
-- attempt) (tracing.AttemptSpanID), so any process can name an attempt's span without
-- storing it. It is a table of its own, not a text column of workflow_instance: planned
-- without statistics, a wider row makes the planner think the table smaller than it is and
-- scan it whole (TestHotStatementsUseTheirIndexes). workflow_instance.trace_sampled, a
-- boolean (true: a sampled trace, false: one not sampled, NULL: none), is what the triggers
-- below test.
--
-- The spans no single process can emit when it ends the work go through an outbox, as
-- notifications do (00022) and for the same reason: every end of an instance, whatever
-- statement makes it (a master's finish, a timeout, a stop and the stops of its children, the
-- worker's end of a one-task instance), passes through an UPDATE of state, and the one
-- failover statement is the only other writer of an attempt's end, so a trigger per table
-- sees them all. trace_outbox holds, for a sampled instance, a row for its end
-- (task_instance_id and attempt 0) and one per attempt the leader failed over; any master
-- with tracing on emits them (dao.TraceOutboxTakeUnsent) and marks them sent. A row is kept,
-- sent, until retention deletes its instance, so that the end of a rerun instance, which
-- ends a second time, does not emit its span twice. Each trigger's WHEN tests the row's own
-- columns: with tracing off (trace_sampled NULL) an end calls no function, and an attempt's
-- end calls one only when it was failed over.

-- +goose Up
ALTER TABLE workflow_instance ADD COLUMN trace_sampled boolean;

CREATE TABLE trace_context (
    workflow_instance_id bigint PRIMARY KEY REFERENCES workflow_instance (id) ON DELETE CASCADE,
    traceparent          text   NOT NULL CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$')
);

CREATE TABLE trace_outbox (
    workflow_instance_id bigint  NOT NULL REFERENCES workflow_instance (id) ON DELETE CASCADE,
    -- 0 and 0: the instance's own span; otherwise an attempt the leader failed over.
    task_instance_id     bigint  NOT NULL DEFAULT 0,
    attempt              integer NOT NULL DEFAULT 0,
    sent                 boolean NOT NULL DEFAULT false,
    PRIMARY KEY (workflow_instance_id, task_instance_id, attempt)
);
-- The exporters' take: only rows still to send are in it.
CREATE INDEX trace_outbox_unsent ON trace_outbox (workflow_instance_id) WHERE NOT sent;

-- +goose StatementBegin
CREATE FUNCTION trace_workflow_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO trace_outbox (workflow_instance_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER trace_workflow_ended AFTER UPDATE OF state ON workflow_instance
    FOR EACH ROW WHEN (NEW.trace_sampled AND NEW.state IN ('succeeded', 'failed', 'stopped')
        AND OLD.state NOT IN ('succeeded', 'failed', 'stopped'))
    EXECUTE FUNCTION trace_workflow_ended();

-- +goose StatementBegin
CREATE FUNCTION trace_attempt_failed_over() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO trace_outbox (workflow_instance_id, task_instance_id, attempt)
    SELECT w.id, NEW.task_instance_id, NEW.attempt
    FROM task_instance t JOIN workflow_instance w ON w.id = t.workflow_instance_id
    WHERE t.id = NEW.task_instance_id AND w.trace_sampled
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER trace_attempt_failed_over AFTER UPDATE OF outcome ON task_attempt
    FOR EACH ROW WHEN (NEW.outcome = 'failed_over' AND OLD.outcome IS NULL)
    EXECUTE FUNCTION trace_attempt_failed_over();

-- +goose Down
DROP TRIGGER trace_attempt_failed_over ON task_attempt;
DROP TRIGGER trace_workflow_ended ON workflow_instance;
DROP FUNCTION trace_attempt_failed_over();
DROP FUNCTION trace_workflow_ended();
DROP TABLE trace_outbox;
DROP TABLE trace_context;
ALTER TABLE workflow_instance DROP COLUMN trace_sampled;
