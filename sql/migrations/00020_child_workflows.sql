-- A task of type workflow starts an instance of another workflow, its child, and waits for it
-- (state waiting, on no worker) until the child ends. The task and the child are linked both
-- ways, written in the master's advance that creates them: the task's
-- child_workflow_instance_id, and the child's parent_task_instance_id with the parent task's
-- own workflow instance, parent_workflow_instance_id.
--
-- Every lookup goes by primary key (from a child to its parent task when it ends, from a
-- killed task to its child, up the parents to measure how deep a child would nest), so there
-- is no index. There is no foreign key either: a rerun deletes a failed workflow task to
-- create it again, with a new child, and the old child, which has ended, keeps its link to
-- the parent instance while its parent_task_instance_id names a task that is gone.

-- +goose Up
ALTER TABLE task_instance ADD COLUMN child_workflow_instance_id bigint;
ALTER TABLE workflow_instance ADD COLUMN parent_task_instance_id bigint;
ALTER TABLE workflow_instance ADD COLUMN parent_workflow_instance_id bigint;

-- +goose Down
UPDATE task_instance SET state = 'killed', ended_at = now(),
    error = 'killed: the schema was migrated down past child workflows'
WHERE state = 'waiting' AND type = 'workflow';
ALTER TABLE workflow_instance DROP COLUMN parent_workflow_instance_id;
ALTER TABLE workflow_instance DROP COLUMN parent_task_instance_id;
ALTER TABLE task_instance DROP COLUMN child_workflow_instance_id;
