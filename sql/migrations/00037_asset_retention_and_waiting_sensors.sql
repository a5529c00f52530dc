-- Retention of asset events (dao.PurgeAssetEvents): the leader deletes the events older than
-- retention.asset-events that no consumer still has queued, oldest first, with the
-- consumption rows that link them to the runs they started (ON DELETE CASCADE).
--
-- asset_event_created is the order of that purge. asset_pending's and asset_consumption's
-- primary keys lead with the consumer, so neither serves a look-up by event: the purge's
-- "queued for no one" and the cascades of its deletions would read each table whole for
-- every event without the two indexes on event_id.
--
-- task_instance_waiting_sensor lists the sensors waiting now, newest first, for the Triggers
-- page (dao.WaitingSensors), whatever they wait at: without it the page would read every
-- waiting task (wait tasks, paused agents, for-each parents) to find them.

-- +goose Up
CREATE INDEX asset_event_created ON asset_event (created_at);
CREATE INDEX asset_pending_event ON asset_pending (event_id);
CREATE INDEX asset_consumption_event ON asset_consumption (event_id);
CREATE INDEX task_instance_waiting_sensor ON task_instance (id) WHERE state = 'waiting' AND type = 'sensor';

-- +goose Down
DROP INDEX task_instance_waiting_sensor;
DROP INDEX asset_consumption_event;
DROP INDEX asset_pending_event;
DROP INDEX asset_event_created;
