-- A workflow of one task ends with that task: the worker's statement that records the task's
-- end also ends the instance, when no master drives it (owner NULL), it has no
-- max-active-instances (ending one admits the next: a master's work) and no timeout (its
-- owner enforces it). Until now a master locked the instance after the task's wake-up and
-- ended it in a transaction of its own: a third of a single-task workflow's cost, for a
-- decision the task's result already makes (plan.go: the only task succeeded, or it did not).
--
-- task_count is the number of tasks of the instance's definition, set at creation. NULL
-- (instances created before this migration and already finished) means unknown: a master
-- ends such an instance as before.
--
-- has_timeout is now also set on capped instances created under the admission lock (when-full:
-- skip), which 00006's creation path had left false.

-- +goose Up
ALTER TABLE workflow_instance ADD COLUMN task_count integer CHECK (task_count > 0);
UPDATE workflow_instance w SET
    task_count = CASE jsonb_typeof(d.spec->'tasks') WHEN 'array' THEN nullif(jsonb_array_length(d.spec->'tasks'), 0) END,
    has_timeout = coalesce(d.spec->>'timeout', '') <> ''
FROM workflow_definition d
WHERE d.name = w.workflow_name AND d.version = w.workflow_version
  AND w.state IN ('submitted', 'running');

-- +goose Down
ALTER TABLE workflow_instance DROP COLUMN task_count;
