-- LLM and agent tasks, and global task pools: a table of pool limits with an exact count of
-- each pool's running task instances, kept by triggers; token usage per attempt and per task.

-- +goose Up
CREATE TABLE task_pool (
    name        text        PRIMARY KEY,
    -- max_running is the limit from the masters' config (pools:); NULL means no limit: a pool
    -- that tasks name but no config limits.
    max_running integer     CHECK (max_running > 0),
    -- running is how many of the pool's task instances are in state running. The triggers
    -- below change it in the same statement as every change of a task's state, so a claim
    -- that holds the pool's row lock reads the exact count. A count(*) in the claim could
    -- not: a statement reads the snapshot it started with, blind to claims that committed
    -- while it waited for the lock.
    running     integer     NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Pools of tasks created before this migration.
INSERT INTO task_pool (name, running)
SELECT pool, count(*) FILTER (WHERE state = 'running') FROM task_instance
WHERE pool IS NOT NULL GROUP BY pool;

-- +goose StatementBegin
-- task_pool_count keeps task_pool.running and creates the row of a pool when its first task
-- instance is created, so every pool a task names has a row before that task can run. It runs
-- once per statement over the transition tables, and locks the pool rows it changes in name
-- order, the order the claim locks them in, so the two never deadlock.
CREATE FUNCTION task_pool_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    pools  text[];
    deltas integer[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO task_pool (name)
        SELECT DISTINCT pool FROM new_rows WHERE pool IS NOT NULL ORDER BY pool
        ON CONFLICT (name) DO NOTHING;
        SELECT array_agg(pool ORDER BY pool), array_agg(n ORDER BY pool) INTO pools, deltas
        FROM (SELECT pool, count(*)::integer AS n FROM new_rows
              WHERE pool IS NOT NULL AND state = 'running' GROUP BY pool) d;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(pool ORDER BY pool), array_agg(n ORDER BY pool) INTO pools, deltas
        FROM (SELECT pool, -count(*)::integer AS n FROM old_rows
              WHERE pool IS NOT NULL AND state = 'running' GROUP BY pool) d;
    ELSE
        SELECT array_agg(pool ORDER BY pool), array_agg(n ORDER BY pool) INTO pools, deltas
        FROM (SELECT pool, sum(n)::integer AS n FROM (
                  SELECT pool, 1 AS n FROM new_rows WHERE pool IS NOT NULL AND state = 'running'
                  UNION ALL
                  SELECT pool, -1 FROM old_rows WHERE pool IS NOT NULL AND state = 'running') c
              GROUP BY pool HAVING sum(n) <> 0) d;
    END IF;
    IF pools IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM task_pool WHERE name = ANY (pools) ORDER BY name FOR UPDATE;
    UPDATE task_pool p SET running = p.running + x.n
    FROM unnest(pools, deltas) AS x(name, n) WHERE p.name = x.name;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER task_pool_count_insert AFTER INSERT ON task_instance
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION task_pool_count();
CREATE TRIGGER task_pool_count_update AFTER UPDATE ON task_instance
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION task_pool_count();
CREATE TRIGGER task_pool_count_delete AFTER DELETE ON task_instance
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION task_pool_count();

-- The claim's index for pooled tasks: queued rows of one pool, in claim order.
CREATE INDEX task_instance_queued_pool ON task_instance (pool, priority DESC, id)
    WHERE state = 'queued' AND pool IS NOT NULL;

-- Token usage, {"prompt_tokens", "completion_tokens", "total_tokens", "calls"}: on an attempt,
-- what its own model calls used; on a task, what its result cost (for an agent, every step,
-- including those an earlier attempt checkpointed). Per step it is task_checkpoint.usage.
ALTER TABLE task_attempt ADD COLUMN usage jsonb;
ALTER TABLE task_instance ADD COLUMN usage jsonb;

-- +goose Down
ALTER TABLE task_instance DROP COLUMN usage;
ALTER TABLE task_attempt DROP COLUMN usage;
DROP INDEX task_instance_queued_pool;
DROP TRIGGER task_pool_count_delete ON task_instance;
DROP TRIGGER task_pool_count_update ON task_instance;
DROP TRIGGER task_pool_count_insert ON task_instance;
DROP FUNCTION task_pool_count();
DROP TABLE task_pool;
