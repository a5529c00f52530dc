-- A task of type wait is created in a state of its own, waiting: no worker claims it and it
-- holds no slot; it ends when it is signalled (succeeded or failed, with the signal's output)
-- or when a master finds it past its timeout. started_at is when it began to wait, and
-- wait_until when its timeout ends the wait (NULL: it waits for its signal without end).

-- +goose Up
ALTER TABLE task_instance DROP CONSTRAINT task_instance_state_check;
ALTER TABLE task_instance ADD CONSTRAINT task_instance_state_check
    CHECK (state IN ('queued', 'waiting', 'running', 'succeeded', 'failed', 'killed', 'skipped'));
ALTER TABLE task_instance ADD COLUMN wait_until timestamptz;
-- The masters look for the waiting tasks past their timeout at every poll.
CREATE INDEX task_instance_waiting_until ON task_instance (wait_until)
    WHERE state = 'waiting' AND wait_until IS NOT NULL;

-- +goose Down
DROP INDEX task_instance_waiting_until;
ALTER TABLE task_instance DROP COLUMN wait_until;
UPDATE task_instance SET state = 'killed', ended_at = now(),
    error = 'killed: the schema was migrated down past waiting tasks'
WHERE state = 'waiting';
ALTER TABLE task_instance DROP CONSTRAINT task_instance_state_check;
ALTER TABLE task_instance ADD CONSTRAINT task_instance_state_check
    CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'killed', 'skipped'));
