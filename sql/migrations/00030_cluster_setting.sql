-- cluster_setting holds what the nodes' configs say that a command line reads back, rather
-- than its own config: the model providers of each worker (providers/HOST:PORT, a JSON list
-- of names) and the masters' tracing (tracing, {"sample_ratio": R}, 0 when it is off). A
-- node writes its rows at start; zksched submit checks a workflow's providers against every
-- worker's, and traces what it submits as the masters do.

-- +goose Up
CREATE TABLE cluster_setting (
    name       text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE cluster_setting;
