-- A tool-calling agent whose workflow tool's child runs waits for it on no worker, at the
-- paused step tool-child:CALL. The child's end queues it again; the masters also look, at each
-- poll, for such an agent whose child ended while it was pausing: this index keeps that look
-- to the agents waiting so, however many other tasks wait.

-- +goose Up
CREATE INDEX task_instance_tool_child_wait ON task_instance (id)
    WHERE state = 'waiting' AND paused_step LIKE 'tool-child:%';

-- +goose Down
DROP INDEX task_instance_tool_child_wait;
