-- A for-each task is created as a parent task instance under the task's own name, waiting
-- (no worker claims it), and one task instance per item, named name[0], name[1], ... The
-- parent records how many items it has (item_count, NULL for every other task instance: it
-- is what makes a row a parent) and the items themselves (items, a JSON array of strings), so
-- that whichever master advances the instance next can create the items max-parallel held
-- back, in index order. A master ends the parent once all its items have ended.

-- +goose Up
ALTER TABLE task_instance ADD COLUMN item_count integer CHECK (item_count >= 0);
ALTER TABLE task_instance ADD COLUMN items jsonb;

-- +goose Down
UPDATE task_instance SET state = 'killed', ended_at = now(),
    error = 'killed: the schema was migrated down past for-each tasks'
WHERE state = 'waiting' AND item_count IS NOT NULL;
ALTER TABLE task_instance DROP COLUMN items;
ALTER TABLE task_instance DROP COLUMN item_count;
