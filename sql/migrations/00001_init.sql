-- The first schema: workflow definitions and instances, task instances with their fencing
-- token (worker_id, attempt), attempts, logs, agent checkpoints and failover events.

-- +goose Up
CREATE TABLE workflow_definition (
    name       text        NOT NULL,
    version    integer     NOT NULL CHECK (version > 0),
    spec       jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version)
);

CREATE TABLE workflow_instance (
    id               bigserial   PRIMARY KEY,
    workflow_name    text        NOT NULL,
    workflow_version integer     NOT NULL,
    state            text        NOT NULL DEFAULT 'submitted'
                     CHECK (state IN ('submitted', 'running', 'succeeded', 'failed', 'stopped')),
    -- owner is the identity of the master driving the instance; NULL means waiting for one.
    -- Every write a master makes about the instance is conditioned on it.
    owner            text,
    params           jsonb       NOT NULL DEFAULT '{}',
    priority         integer     NOT NULL DEFAULT 0,
    error            text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    ended_at         timestamptz,
    FOREIGN KEY (workflow_name, workflow_version) REFERENCES workflow_definition (name, version)
);
-- Masters claim from here; finished instances never enter the index.
CREATE INDEX workflow_instance_unowned ON workflow_instance (priority DESC, id)
    WHERE owner IS NULL AND state IN ('submitted', 'running');
CREATE INDEX workflow_instance_owned ON workflow_instance (owner)
    WHERE owner IS NOT NULL AND state IN ('submitted', 'running');
CREATE INDEX workflow_instance_created ON workflow_instance (created_at DESC, id DESC);

CREATE TABLE task_instance (
    id                   bigserial   PRIMARY KEY,
    workflow_instance_id bigint      NOT NULL REFERENCES workflow_instance (id) ON DELETE CASCADE,
    name                 text        NOT NULL,
    type                 text        NOT NULL,
    params               jsonb       NOT NULL DEFAULT '{}',
    state                text        NOT NULL
                         CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'killed', 'skipped')),
    priority             integer     NOT NULL DEFAULT 0,
    worker_group         text        NOT NULL DEFAULT 'default',
    pool                 text,
    -- (worker_id, attempt) is the fencing token: attempt grows by one at every claim, and every
    -- write a worker makes about the task requires both to match and state = 'running'.
    worker_id            text,
    attempt              integer     NOT NULL DEFAULT 0,
    -- retries counts the failed attempts that were retried; failovers and hand-backs do not count.
    retries              integer     NOT NULL DEFAULT 0,
    max_retries          integer     NOT NULL DEFAULT 0,
    retry_interval       interval    NOT NULL DEFAULT '0',
    timeout              interval,
    not_before           timestamptz,
    failover_count       integer     NOT NULL DEFAULT 0,
    kill_requested       boolean     NOT NULL DEFAULT false,
    output               text,
    error                text,
    exit_code            integer,
    queued_at            timestamptz NOT NULL DEFAULT now(),
    started_at           timestamptz,
    ended_at             timestamptz,
    UNIQUE (workflow_instance_id, name)
);
-- The claim query's index: only queued rows, in claim order.
CREATE INDEX task_instance_queued ON task_instance (worker_group, priority DESC, id)
    WHERE state = 'queued';
-- Failover finds a lost worker's running tasks here.
CREATE INDEX task_instance_running ON task_instance (worker_id) WHERE state = 'running';

CREATE TABLE task_attempt (
    task_instance_id bigint      NOT NULL REFERENCES task_instance (id) ON DELETE CASCADE,
    attempt          integer     NOT NULL,
    worker_id        text        NOT NULL,
    started_at       timestamptz NOT NULL,
    ended_at         timestamptz,
    -- NULL while running.
    outcome          text CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'killed',
                                             'failed_over', 'interrupted', 'handed_back')),
    exit_code        integer,
    error            text,
    PRIMARY KEY (task_instance_id, attempt)
);

CREATE TABLE task_log (
    task_instance_id bigint      NOT NULL REFERENCES task_instance (id) ON DELETE CASCADE,
    attempt          integer     NOT NULL,
    seq              integer     NOT NULL,
    data             text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_instance_id, attempt, seq)
);

CREATE TABLE task_checkpoint (
    task_instance_id bigint      NOT NULL REFERENCES task_instance (id) ON DELETE CASCADE,
    step             text        NOT NULL,
    attempt          integer     NOT NULL,
    output           text        NOT NULL,
    usage            jsonb       NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_instance_id, step)
);

CREATE TABLE failover_event (
    id                 bigserial   PRIMARY KEY,
    -- One event per lost identity: identities are never reused, and the leader's step 4 is
    -- idempotent through this key.
    node_id            text        NOT NULL UNIQUE,
    role               text        NOT NULL CHECK (role IN ('master', 'worker')),
    lost_at            timestamptz NOT NULL,
    fenced_at          timestamptz NOT NULL,
    finished_at        timestamptz,
    leader             text        NOT NULL,
    tasks_requeued     integer     NOT NULL DEFAULT 0,
    workflows_released integer     NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE failover_event;
DROP TABLE task_checkpoint;
DROP TABLE task_log;
DROP TABLE task_attempt;
DROP TABLE task_instance;
DROP TABLE workflow_instance;
DROP TABLE workflow_definition;
