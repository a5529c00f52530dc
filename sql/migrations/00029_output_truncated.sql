-- output_truncated marks a task's output as the first bytes of a longer one: the task's
-- output was over its output-limit and the task said output-overflow: truncate (a for-each
-- task's array of its items' outputs, over the limit, keeps the items that fit). The API,
-- the CLI and the UI show the mark beside the output. A task rerun loses it with its output.

-- +goose Up
ALTER TABLE task_instance ADD COLUMN output_truncated boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE task_instance DROP COLUMN output_truncated;
