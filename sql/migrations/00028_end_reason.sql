-- end_reason says why a task or workflow instance ended when something other than its own
-- result ended it: the statement that ends it sets it, in the same statement, and every
-- reader (the API, the CLI, the UI, the notifications) shows it. NULL is an end by the
-- instance's own result: a task's success or failure, a workflow's end decided by its
-- tasks. The values (dao.EndReason):
--
--   timeout           its own timeout passed: a task's last attempt timed out, a wait task
--                     (or a paused agent's wait step) had no signal in time, a workflow
--                     instance ran past its workflow timeout
--   workflow-timeout  a task killed, or a child instance stopped, because its workflow
--                     instance (a child's: its parent) ran past its workflow timeout
--   operator-kill     an operator killed the task, or the task that started the child
--   stop              an operator stopped the workflow instance: it, its tasks, its children
--   cancel-oldest     a newer submission of the same concurrency key stopped the instance
--                     (when-full: cancel-oldest): it, its tasks, its children
--   upstream          a task skipped: its dependencies' ends did not trigger it
--   condition         a task skipped: its when: rendered false
--   child-failed      a workflow task whose child instance failed or was stopped
--
-- A kill of a running task is a request (kill_requested) its worker carries out: the request
-- sets end_reason, and the end keeps it, so a task killed by its workflow's timeout says so.
--
-- The workflow's notification event, which 00022 read from its error text, is read from
-- end_reason: timeout for an instance ended by its workflow timeout.
--
-- Rows ended before this migration get what their error text says, where it says it; the
-- others stay NULL.

-- +goose Up
CREATE DOMAIN end_reason AS text CHECK (VALUE IN ('timeout', 'workflow-timeout', 'operator-kill',
    'stop', 'cancel-oldest', 'upstream', 'condition', 'child-failed'));
ALTER TABLE workflow_instance ADD COLUMN end_reason end_reason;
ALTER TABLE task_instance ADD COLUMN end_reason end_reason;

-- +goose StatementBegin
-- killed_error is the error of a running task that ends killed on a request whose reason is
-- r: its worker knows only that the kill was asked for.
CREATE FUNCTION killed_error(r end_reason) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE r WHEN 'workflow-timeout' THEN 'killed: the workflow timed out'
        WHEN 'stop' THEN 'killed: the workflow was stopped'
        WHEN 'cancel-oldest' THEN 'killed: the workflow was stopped (when-full: cancel-oldest)'
        ELSE 'killed by an operator' END
$$;
-- +goose StatementEnd

UPDATE workflow_instance SET end_reason = CASE
        WHEN error LIKE 'workflow timeout % exceeded' THEN 'timeout'
        WHEN error = 'stopped by an operator' THEN 'stop'
        WHEN error LIKE 'stopped: workflow instance % was submitted with the same concurrency key %' THEN 'cancel-oldest'
        WHEN error LIKE 'stopped: its parent task % was killed' THEN 'operator-kill'
        WHEN error LIKE 'stopped: its parent workflow instance % timed out' THEN 'workflow-timeout'
        WHEN error LIKE 'stopped: its parent workflow instance % was stopped' THEN 'stop'
    END
WHERE state IN ('failed', 'stopped') AND error IS NOT NULL;

-- A task killed running said "killed by an operator" whoever asked: its instance's end, where
-- it has one of its own, says who did.
UPDATE task_instance t SET end_reason = CASE
        WHEN t.state = 'killed' AND (t.error LIKE 'killed by an operator %' OR t.error LIKE 'killed by an operator:%') THEN 'operator-kill'
        WHEN t.state = 'killed' AND t.error LIKE 'killed: workflow timeout % exceeded' THEN 'workflow-timeout'
        WHEN t.state = 'killed' AND t.error IN ('killed: the workflow was stopped', 'killed by an operator') THEN
            coalesce((SELECT CASE w.end_reason WHEN 'timeout' THEN 'workflow-timeout' ELSE w.end_reason END
                FROM workflow_instance w
                WHERE w.id = t.workflow_instance_id AND w.end_reason IN ('timeout', 'workflow-timeout', 'operator-kill', 'stop', 'cancel-oldest')),
                CASE WHEN t.error = 'killed by an operator' THEN 'operator-kill' ELSE 'stop' END)
        WHEN t.state = 'failed' AND (t.error LIKE 'timed out after %' OR t.error LIKE 'no signal within its timeout of %'
            OR t.error LIKE 'step %: no signal within its timeout of %') THEN 'timeout'
        WHEN t.state = 'failed' AND t.type = 'workflow' AND t.error LIKE 'child workflow instance % (%) %' THEN 'child-failed'
    END
WHERE t.state IN ('failed', 'killed') AND t.error IS NOT NULL;

-- +goose StatementBegin
-- A workflow instance's end: success, failure, or timeout for one its workflow timeout
-- ended (end_reason). A stop is an operator's act and sends nothing. The payload carries the
-- end's reason.
CREATE OR REPLACE FUNCTION notification_workflow_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Nobody listens to any workflow end: nothing to build.
    IF NOT EXISTS (SELECT 1 FROM notify_rule WHERE event IN ('success', 'failure', 'timeout')) THEN
        RETURN NULL;
    END IF;
    PERFORM notification_queue(
        CASE WHEN NEW.state = 'succeeded' THEN 'success'
             WHEN NEW.end_reason = 'timeout' THEN 'timeout'
             ELSE 'failure' END,
        'workflow ' || NEW.id || ' ended ' || (extract(epoch FROM coalesce(NEW.ended_at, now())) * 1000000)::bigint,
        NEW.workflow_name, NEW.workflow_version, NEW.id, NULL,
        jsonb_build_object('state', NEW.state, 'error', coalesce(NEW.error, ''),
            'end_reason', coalesce(NEW.end_reason, ''), 'time', coalesce(NEW.ended_at, now())));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- A task instance's failure, after its retries, as in 00022, the payload carrying the end's
-- reason.
CREATE OR REPLACE FUNCTION notification_task_failed() RETURNS trigger LANGUAGE plpgsql AS $$
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
            'attempt', NEW.attempt, 'end_reason', coalesce(NEW.end_reason, ''),
            'time', coalesce(NEW.ended_at, now())));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION notification_task_failed() RETURNS trigger LANGUAGE plpgsql AS $$
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
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION notification_workflow_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
DROP FUNCTION killed_error(end_reason);
ALTER TABLE task_instance DROP COLUMN end_reason;
ALTER TABLE workflow_instance DROP COLUMN end_reason;
DROP DOMAIN end_reason;
