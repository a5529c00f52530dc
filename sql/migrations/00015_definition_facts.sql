-- What the statements that create a workflow's instances need to know of its definition is
-- kept in columns beside the spec, computed once in Go from the parsed workflow file when the
-- definition is stored (lifecycle.Facts), instead of being read out of the spec's JSON by
-- every creation:
--   task_count     the number of tasks, NULL for none (an instance's task_count, 00007),
--   has_timeout    whether the workflow has a timeout (an instance's has_timeout, 00006),
--   max_active     max-active-instances, NULL for no cap (an instance's max_active, 00002),
--   when_full_skip whether a new instance is dropped rather than queued at the cap.
--
-- The backfill below is the last reading of those keys from JSON: it computes each column
-- exactly as the creation statements did until now, which for every spec stored as
-- json.Marshal of a parsed workflow file equals lifecycle.Facts (its test checks both on
-- the same specs).
--
-- has_timeout and when_full_skip have no default: a binary older than this migration, which
-- stores a definition without its facts, fails to store it rather than storing a workflow
-- whose timeout or when-full policy its instances would silently ignore.

-- +goose Up
ALTER TABLE workflow_definition
    ADD COLUMN task_count integer CHECK (task_count > 0),
    ADD COLUMN has_timeout boolean,
    ADD COLUMN max_active integer CHECK (max_active <> 0),
    ADD COLUMN when_full_skip boolean;
UPDATE workflow_definition SET
    task_count = CASE jsonb_typeof(spec->'tasks') WHEN 'array' THEN nullif(jsonb_array_length(spec->'tasks'), 0) END,
    has_timeout = coalesce(spec->>'timeout', '') <> '',
    max_active = nullif((spec->>'max-active-instances')::int, 0),
    when_full_skip = coalesce(spec->>'when-full', '') = 'skip';
ALTER TABLE workflow_definition
    ALTER COLUMN has_timeout SET NOT NULL,
    ALTER COLUMN when_full_skip SET NOT NULL;

-- +goose Down
ALTER TABLE workflow_definition
    DROP COLUMN task_count,
    DROP COLUMN has_timeout,
    DROP COLUMN max_active,
    DROP COLUMN when_full_skip;
