-- A master claims an instance when there is something for a master to do. An instance that
-- started with its root tasks queued (every submission of an uncapped workflow) needs none
-- until one of its tasks ends, and that task's wake-up carries the instance's id: the master
-- that hears it locks the instance and advances it, taking ownership only if it goes on (an
-- instance that finishes is finished in the one update, unowned until then). Claiming every
-- such instance as soon as it was announced wrote each row once more and cost the burn-down
-- 12% of its throughput.
--
-- What still needs a master at once, whatever its tasks do:
--   * a new instance without roots (state submitted; capped ones wait for admission),
--   * a running one whose workflow has a timeout: its owner fails it when time is up, and a
--     task that hangs would never wake a master. has_timeout says so, set at creation.
-- workflow_instance_claimable holds exactly these, so that the masters' claim, run on every
-- announcement and every poll, reads nothing else.
--
-- Unowned running instances whose tasks have all ended and whose wake-up nobody heard (no
-- master was listening, or the worker died between its commit and the wake-up) are found by
-- the masters' sweep, which walks workflow_instance_unowned_running in id order a slice at a
-- time: a slice every poll, and a whole pass at start and after a reconnect of the listening
-- connection. It replaces workflow_instance_unowned, which only the claim read.

-- +goose Up
ALTER TABLE workflow_instance ADD COLUMN has_timeout boolean NOT NULL DEFAULT false;
UPDATE workflow_instance w SET has_timeout = true
FROM workflow_definition d
WHERE d.name = w.workflow_name AND d.version = w.workflow_version
  AND coalesce(d.spec->>'timeout', '') <> '' AND w.state IN ('submitted', 'running');
CREATE INDEX workflow_instance_claimable ON workflow_instance (priority DESC, id)
    WHERE owner IS NULL AND ((state = 'submitted' AND max_active IS NULL) OR (state = 'running' AND has_timeout));
CREATE INDEX workflow_instance_unowned_running ON workflow_instance (id) WHERE owner IS NULL AND state = 'running';
DROP INDEX workflow_instance_unowned;

-- +goose Down
CREATE INDEX workflow_instance_unowned ON workflow_instance (priority DESC, id)
    WHERE owner IS NULL AND state IN ('submitted', 'running');
DROP INDEX workflow_instance_unowned_running;
DROP INDEX workflow_instance_claimable;
ALTER TABLE workflow_instance DROP COLUMN has_timeout;
