package dao

import (
	"context"
	"fmt"
)

// queueSensorsDueSQL is TaskQueueSensorsDue's statement: $1 how many at most. It finds the due
// sensors from the index of wait_until, as every wait's timeout is found, and skips rows
// another transaction holds (a kill, a signal, another master's sweep): that one decides them.
const queueSensorsDueSQL = `
		WITH due AS (
			SELECT id FROM task_instance
			WHERE state = 'waiting' AND wait_until IS NOT NULL AND wait_until <= now() AND paused_step = 'sensor'
			ORDER BY wait_until LIMIT $1
			FOR UPDATE SKIP LOCKED
		), t AS (
			UPDATE task_instance ti SET state = 'queued', queued_at = now(), paused_step = NULL, wait_until = NULL
			FROM due WHERE ti.id = due.id
			RETURNING ti.worker_group
		)
		SELECT worker_group FROM t`

// TaskQueueSensorsDue is the transition "sensor check due": it queues again at most limit
// sensors waiting between their checks (paused at the step sensor) whose next check is due by
// the database's clock, in one statement, for any worker of their group; it wakes the workers
// of those groups and returns how many it queued.
func (q *Queries) TaskQueueSensorsDue(ctx context.Context, limit int) (int, error) {
	var groups []string
	if err := sqlxSelect(ctx, q, &groups, queueSensorsDueSQL, limit); err != nil {
		return 0, fmt.Errorf("queue the sensors whose check is due: %w", err)
	}
	q.wakeGroups(groups)
	return len(groups), nil
}
