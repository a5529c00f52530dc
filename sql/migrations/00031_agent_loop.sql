-- The checkpoints of a tool-calling agent. agent_turn holds each model call of its loop once
-- it has answered: what was asked (a digest of the request) and the answer, its tool calls
-- included, so that a later attempt replays the turn instead of sending it again. tool_call
-- holds each call the model asked for: started under the attempt's fencing token before the
-- tool runs, ended with its result after; a later attempt replays an ended call and applies
-- the tool's on-interrupted policy to one that started and never ended. A call whose fate a
-- person must tell (on-interrupted: ask) is marked interrupted while the task waits.

-- +goose Up
CREATE TABLE agent_turn (
    task_instance_id bigint      NOT NULL REFERENCES task_instance (id) ON DELETE CASCADE,
    turn             integer     NOT NULL,
    attempt          integer     NOT NULL,
    request_digest   text        NOT NULL,
    response         jsonb       NOT NULL,
    usage            jsonb       NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_instance_id, turn)
);

CREATE TABLE tool_call (
    task_instance_id bigint      NOT NULL REFERENCES task_instance (id) ON DELETE CASCADE,
    turn             integer     NOT NULL,
    seq              integer     NOT NULL,
    call_id          text        NOT NULL,
    tool             text        NOT NULL,
    arguments        text        NOT NULL,
    state            text        NOT NULL CHECK (state IN ('started', 'ended', 'interrupted')),
    -- attempt is the attempt that started the call last; ended_attempt the one that ended it.
    attempt          integer     NOT NULL,
    starts           integer     NOT NULL DEFAULT 1,
    result           text,
    is_error         boolean     NOT NULL DEFAULT false,
    ended_attempt    integer,
    started_at       timestamptz NOT NULL DEFAULT now(),
    ended_at         timestamptz,
    PRIMARY KEY (task_instance_id, turn, seq)
);

-- +goose Down
DROP TABLE tool_call;
DROP TABLE agent_turn;
