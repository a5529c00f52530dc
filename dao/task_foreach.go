package dao

import (
	"context"
	"fmt"

	"github.com/lib/pq"
)

// This file holds the statements of a for-each task's parent: the task instance, waiting,
// under the task's own name, whose items are task instances named name[0], name[1], ... of
// the same workflow instance. The parent is created with its first items by TaskCreateMany;
// a master advancing the instance creates the others and ends the parent.

// forEachItemsSQL is TaskForEachItems's statement: $1 the parent, items $2 (from 0) on, at
// most $3 of them.
const forEachItemsSQL = `
		SELECT e.item FROM (
			SELECT items FROM task_instance
			WHERE id = $1 AND state = 'waiting' AND NOT kill_requested
			FOR SHARE) t
		CROSS JOIN LATERAL jsonb_array_elements_text(t.items) WITH ORDINALITY AS e(item, n)
		WHERE e.n > $2
		ORDER BY e.n LIMIT $3`

// TaskForEachItems returns the items of the for-each parent parent from index from on, at
// most n of them, in index order: those max-parallel held back when it was created. It
// holds the parent's row until the transaction ends, and returns none once its kill was
// asked for (TaskKillIfQueuedOrRunning), which then waits for the transaction: the advance
// that calls it creates no item after a kill, and a kill sees every item created before it.
func (q *Queries) TaskForEachItems(ctx context.Context, parent int64, from, n int) ([]string, error) {
	var items []string
	if err := sqlxSelect(ctx, q, &items, forEachItemsSQL, parent, from, n); err != nil {
		return nil, fmt.Errorf("read items %d.. of task instance %d: %w", from, parent, err)
	}
	return items, nil
}

// ForEachEnd is the end a master gives the parent of a for-each task's items once they have
// all ended: succeeded with the JSON array of their outputs, or failed or killed with an
// error.
type ForEachEnd struct {
	ID     int64
	State  TaskState
	Output *string
	Error  *string
	// OutputTruncated marks Output as the array of the first items' outputs alone.
	OutputTruncated bool
}

// finishForEachSQL is TaskFinishManyForEachIfWaiting's statement: $1 the parents, $2 their
// end states, $3 their outputs, $4 their errors, $5 their outputs' truncated marks. A parent
// killed keeps the reason its kill request gave it (killSQL); one that ended otherwise ended
// by its items.
const finishForEachSQL = `
		UPDATE task_instance t SET state = x.state, output = x.output, error = x.err, ended_at = now(),
			end_reason = CASE WHEN x.state = 'killed' THEN t.end_reason END, output_truncated = x.truncated
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bool[]) AS x(id, state, output, err, truncated)
		WHERE t.id = x.id AND t.state = 'waiting' AND t.item_count IS NOT NULL
		RETURNING t.id`

// TaskFinishManyForEachIfWaiting is the transition "for-each ended": each parent of ends,
// still waiting, ends as its ForEachEnd says. A master calls it in the transaction of its
// advance, which holds the workflow instance's row, once the parent's items have all ended.
// It returns how many it ended: one no longer waiting (its workflow was stopped meanwhile)
// is left as it is.
func (q *Queries) TaskFinishManyForEachIfWaiting(ctx context.Context, ends []ForEachEnd) (int, error) {
	if len(ends) == 0 {
		return 0, nil
	}
	ids, states, outputs, errs := make([]int64, len(ends)), make([]string, len(ends)), make([]*string, len(ends)), make([]*string, len(ends))
	truncated := make([]bool, len(ends))
	for i, e := range ends {
		ids[i], states[i], outputs[i], errs[i], truncated[i] = e.ID, string(e.State), e.Output, e.Error, e.OutputTruncated
	}
	var ended []int64
	if err := sqlxSelect(ctx, q, &ended, finishForEachSQL, pq.Array(ids), pq.Array(states), pq.Array(outputs), pq.Array(errs), pq.Array(truncated)); err != nil {
		return 0, fmt.Errorf("end %d for-each tasks: %w", len(ends), err)
	}
	return len(ended), nil
}
