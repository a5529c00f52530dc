-- A workflow tool's call of a tool-calling agent starts a child instance, linked to the agent's
-- task as a workflow task's child is (parent_task_instance_id, parent_workflow_instance_id)
-- and to the call by its id: a later attempt of the agent finds the child the call started
-- instead of starting another.

-- +goose Up
ALTER TABLE workflow_instance ADD COLUMN parent_call_id text;
CREATE UNIQUE INDEX workflow_instance_parent_call ON workflow_instance (parent_task_instance_id, parent_call_id)
    WHERE parent_call_id IS NOT NULL;

-- +goose Down
DROP INDEX workflow_instance_parent_call;
ALTER TABLE workflow_instance DROP COLUMN parent_call_id;
