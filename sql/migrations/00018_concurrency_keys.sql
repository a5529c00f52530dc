-- A workflow's concurrency: key. An instance of a workflow with one carries the key its
-- submission rendered (concurrency_key, never NULL for such an instance, NULL for every
-- other) and how many instances with that key may run at once (concurrency_max, copied from
-- its definition as max_active is). It is created submitted, without its roots, and a master
-- admits it while fewer than concurrency_max instances of its workflow and key run, in id
-- (submit) order within the key.
--
-- workflow_instance_key_active holds the waiting and running instances of every key, by key,
-- workflow and id: an admission reads its key's entries alone (how many run, which waits
-- first), whatever the number of keys, and so do a when-full: skip or cancel-oldest
-- submission and a rerun. The key comes first, and the statements test the workflow with IS
-- NOT DISTINCT FROM, which no index serves: with "workflow_name =", a planner without
-- statistics takes workflow_instance_active (by workflow alone) as cheap, and reads every
-- active instance of the workflow, every key's, for each. The claim of new instances leaves keyed ones to the admission, so
-- workflow_instance_claimable is rebuilt with that condition.

-- +goose Up
ALTER TABLE workflow_instance
    ADD COLUMN concurrency_key text,
    ADD COLUMN concurrency_max integer CHECK (concurrency_max > 0),
    ADD CONSTRAINT workflow_instance_concurrency_check CHECK ((concurrency_key IS NULL) = (concurrency_max IS NULL));
CREATE INDEX workflow_instance_key_active ON workflow_instance (concurrency_key, workflow_name, id)
    WHERE concurrency_key IS NOT NULL AND state IN ('submitted', 'running');
DROP INDEX workflow_instance_claimable;
CREATE INDEX workflow_instance_claimable ON workflow_instance (priority DESC, id)
    WHERE owner IS NULL AND ((state = 'submitted' AND max_active IS NULL AND concurrency_key IS NULL)
        OR (state = 'running' AND has_timeout));

-- +goose Down
DROP INDEX workflow_instance_claimable;
CREATE INDEX workflow_instance_claimable ON workflow_instance (priority DESC, id)
    WHERE owner IS NULL AND ((state = 'submitted' AND max_active IS NULL) OR (state = 'running' AND has_timeout));
DROP INDEX workflow_instance_key_active;
ALTER TABLE workflow_instance
    DROP CONSTRAINT workflow_instance_concurrency_check,
    DROP COLUMN concurrency_max,
    DROP COLUMN concurrency_key;
