-- The four list indexes of task_instance (00004) leave out running rows. A claim makes a new
-- version of each task row it takes, and every index of the table gets an entry for it: seven,
-- four of them these. Running rows are few (no more than the workers' slots), so the lists
-- read them through task_instance_running and merge them, by id, with the others read through
-- these indexes (dao.TaskListPage); a claim now writes three index entries a task: its
-- execution fell from 27.5-29.8 to 20.0-21.7 us a task (batches of 100, one connection).
--
-- Like 00004, plain CREATE INDEX holds a write lock on the table while it builds. On a large
-- live table, create the new indexes by hand with CREATE INDEX CONCURRENTLY under the names
-- below first (then drop the old ones concurrently); the IF NOT EXISTS skips them.

-- +goose Up
DROP INDEX IF EXISTS task_instance_state_id;
DROP INDEX IF EXISTS task_instance_name_id;
DROP INDEX IF EXISTS task_instance_worker_id;
DROP INDEX IF EXISTS task_instance_queued_at;
CREATE INDEX IF NOT EXISTS task_instance_listed_state_id ON task_instance (state, id) WHERE state <> 'running';
CREATE INDEX IF NOT EXISTS task_instance_listed_name_id ON task_instance (name, id) WHERE state <> 'running';
CREATE INDEX IF NOT EXISTS task_instance_listed_worker_id ON task_instance (worker_id, id) WHERE state <> 'running';
CREATE INDEX IF NOT EXISTS task_instance_listed_queued_at ON task_instance (queued_at) WHERE state <> 'running';

-- +goose Down
DROP INDEX IF EXISTS task_instance_listed_queued_at;
DROP INDEX IF EXISTS task_instance_listed_worker_id;
DROP INDEX IF EXISTS task_instance_listed_name_id;
DROP INDEX IF EXISTS task_instance_listed_state_id;
CREATE INDEX IF NOT EXISTS task_instance_state_id ON task_instance (state, id);
CREATE INDEX IF NOT EXISTS task_instance_name_id ON task_instance (name, id);
CREATE INDEX IF NOT EXISTS task_instance_worker_id ON task_instance (worker_id, id);
CREATE INDEX IF NOT EXISTS task_instance_queued_at ON task_instance (queued_at);
