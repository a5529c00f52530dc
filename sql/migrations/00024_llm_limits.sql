-- Cluster-wide model limits: a provider's requests-per-minute and tokens-per-minute hold for
-- every worker together, and a 429's Retry-After holds all of them back (dao.LLMAdmitIfUnderLimits
-- and the statements beside it in dao/llm_limit.go).
--
-- llm_start is the sliding log: one row per request admitted, when (the database's clock, so
-- the workers' clocks do not matter) and how many tokens it holds (reserved before the call,
-- corrected to the usage the provider reported after it). A row leaves the log once it is
-- older than the window: the admission statement deletes the provider's expired rows, at most
-- a batch at a time, so the log holds about one window of starts per provider (a provider no
-- longer asked for keeps its last window's, at most its limit).
--
-- llm_limit is one row per provider, locked by every admission. Like task_pool.running (00003)
-- it carries the exact count (requests) and token sum (tokens) of the provider's rows in
-- llm_start, changed in the same statement as the log: an admission that waited for the lock
-- reads the row's newest version, whereas a count(*) over llm_start in that statement would
-- read the snapshot it started with, blind to the starts admitted while it waited.
-- blocked_until is set from a 429's Retry-After and honoured by every admission.

-- +goose Up
CREATE TABLE llm_limit (
    provider      text        PRIMARY KEY,
    requests      integer     NOT NULL DEFAULT 0 CHECK (requests >= 0),
    tokens        bigint      NOT NULL DEFAULT 0,
    blocked_until timestamptz
);

CREATE TABLE llm_start (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider   text        NOT NULL,
    started_at timestamptz NOT NULL,
    tokens     integer     NOT NULL
);

-- The provider's starts oldest first: what expires, and how long until enough has.
CREATE INDEX llm_start_provider_started ON llm_start (provider, started_at, id);

-- +goose Down
DROP TABLE llm_start;
DROP TABLE llm_limit;
