-- An agent task whose steps reach a wait step ({name: approve, wait: true}) pauses: its
-- attempt ends with the outcome paused, its task waits in the state waiting like a wait task
-- (no worker, no slot), and paused_step names the step that waits for a signal. A signal
-- that approves stores its output as that step's checkpoint and queues the task again, for
-- any worker to go on from the next step; one that rejects fails it. wait_until, when the
-- step has a timeout, is when the masters end the wait as the step's on-timeout says.
--
-- The outcome check is replaced NOT VALID and validated after, as 00016 did with the state
-- check, so the workers go on writing attempts while it scans the table.

-- +goose Up
ALTER TABLE task_instance ADD COLUMN paused_step text;
ALTER TABLE task_attempt DROP CONSTRAINT task_attempt_outcome_check;
ALTER TABLE task_attempt ADD CONSTRAINT task_attempt_outcome_check
    CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'killed', 'failed_over', 'interrupted',
                       'handed_back', 'paused')) NOT VALID;
ALTER TABLE task_attempt VALIDATE CONSTRAINT task_attempt_outcome_check;

-- +goose Down
-- A paused agent ends killed, as 00016's down does with the waiting tasks: with this column
-- gone no signal could reach it.
UPDATE task_instance SET state = 'killed', ended_at = now(), wait_until = NULL,
    error = 'killed: the schema was migrated down past paused agents'
WHERE state = 'waiting' AND paused_step IS NOT NULL;
UPDATE task_attempt SET outcome = 'handed_back' WHERE outcome = 'paused';
ALTER TABLE task_attempt DROP CONSTRAINT task_attempt_outcome_check;
ALTER TABLE task_attempt ADD CONSTRAINT task_attempt_outcome_check
    CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'killed', 'failed_over', 'interrupted',
                       'handed_back'));
ALTER TABLE task_instance DROP COLUMN paused_step;
