-- Cross-workflow waits: a sensor with workflow: {name, state, since} waits on no worker, at
-- the paused step workflow-run:NAME, until a run of the workflow NAME ends in one of its states
-- at or after its since. workflow_run_wait holds what it waits for, written with the task
-- (dao.TaskCreateWaitingOnRun); it goes with its task (ON DELETE CASCADE).
--
-- The end of a run ends the sensors it satisfies in its own transaction: a trigger, as for
-- notifications (00022), since every end, whatever statement makes it (a master's finish, a
-- timeout, a stop, a child's stop, the worker's end of a one-task instance), passes through an
-- UPDATE of state. Its WHEN tests the row's own columns, so only an end calls it, and an end
-- of a workflow no sensor waits for costs one look at task_instance_run_wait, which holds the
-- waiting workflow sensors alone. The trigger's statements see what committed before they
-- run, after the end's own row lock: a sensor that a master created meanwhile is either seen
-- here or, once committed, finds the run ended itself (dao.TaskEndIfRunEnded, which first
-- waits for the ends in flight). The sensor's workflow instance is woken as by any task's
-- end, on the masters' channel of dao.Open (its schema's).
--
-- workflow_instance_name_ended finds a workflow's runs that ended since a time, for a sensor
-- created after the run it waits for ended, and for the masters' poll. Like 00021, on a large
-- live table create it by hand with CREATE INDEX CONCURRENTLY under this name first.

-- +goose Up
CREATE TABLE workflow_run_wait (
    task_instance_id bigint      PRIMARY KEY REFERENCES task_instance (id) ON DELETE CASCADE,
    workflow_name    text        NOT NULL,
    -- The ends that satisfy it: succeeded, failed, stopped (state: ended is all three).
    states           text[]      NOT NULL CHECK (cardinality(states) > 0),
    since            timestamptz NOT NULL
);

CREATE INDEX task_instance_run_wait ON task_instance (paused_step)
    WHERE state = 'waiting' AND paused_step LIKE 'workflow-run:%';

CREATE INDEX IF NOT EXISTS workflow_instance_name_ended ON workflow_instance (workflow_name, ended_at)
    WHERE state IN ('succeeded', 'failed', 'stopped');

-- +goose StatementBegin
-- workflow_run_output is the output of a sensor a run satisfied: the run as JSON, its end time
-- in RFC 3339 (UTC).
CREATE FUNCTION workflow_run_output(p_id bigint, p_name text, p_state text, p_ended_at timestamptz)
    RETURNS text LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', p_id, 'workflow', p_name, 'state', p_state,
        'ended_at', to_char(p_ended_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION workflow_run_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    woken bigint;
BEGIN
    -- No sensor waits for this workflow: nothing more to read.
    IF NOT EXISTS (SELECT 1 FROM task_instance
                   WHERE state = 'waiting' AND paused_step = 'workflow-run:' || NEW.workflow_name) THEN
        RETURN NULL;
    END IF;
    FOR woken IN
        UPDATE task_instance s SET state = 'succeeded', ended_at = now(), paused_step = NULL, wait_until = NULL,
            output = workflow_run_output(NEW.id, NEW.workflow_name, NEW.state, NEW.ended_at)
        FROM workflow_run_wait r
        WHERE s.state = 'waiting' AND s.paused_step = 'workflow-run:' || NEW.workflow_name
          AND r.task_instance_id = s.id AND NEW.state = ANY (r.states) AND NEW.ended_at >= r.since
          -- A run never satisfies a sensor of its own (a stop ends the instance before it
          -- kills its tasks).
          AND s.workflow_instance_id <> NEW.id
        RETURNING s.workflow_instance_id
    LOOP
        PERFORM pg_notify('zksched_master' || CASE WHEN current_schema() = 'public' THEN '' ELSE '.' || current_schema() END,
            woken::text);
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER workflow_run_ended AFTER UPDATE OF state ON workflow_instance
    FOR EACH ROW WHEN (NEW.state IN ('succeeded', 'failed', 'stopped') AND OLD.state IN ('submitted', 'running'))
    EXECUTE FUNCTION workflow_run_ended();

-- +goose Down
DROP TRIGGER workflow_run_ended ON workflow_instance;
DROP FUNCTION workflow_run_ended();
DROP FUNCTION workflow_run_output(bigint, text, text, timestamptz);
DROP INDEX workflow_instance_name_ended;
DROP INDEX task_instance_run_wait;
DROP TABLE workflow_run_wait;
