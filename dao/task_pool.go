package dao

import (
	"context"
	"fmt"
	"slices"

	"github.com/lib/pq"
)

// Pool is a row of task_pool: a named global limit on running task instances.
type Pool struct {
	Name string `db:"name"`
	// MaxRunning is the limit; nil means none.
	MaxRunning *int `db:"max_running"`
	// Running is how many of the pool's task instances run now.
	Running int `db:"running"`
}

// PoolSetLimits makes the pool limits those of limits (pool name → limit): it creates or
// updates the pools listed and lifts the limit of every other pool. Masters call it at start
// with their config. The pool rows are locked in name order first, the order claims lock them
// in, so it never deadlocks with a claim.
func (db *DB) PoolSetLimits(ctx context.Context, limits map[string]int) error {
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	slices.Sort(names)
	values := make([]int64, len(names))
	for i, name := range names {
		values[i] = int64(limits[name])
	}
	err := db.Tx(ctx, func(q *Queries) error {
		if _, err := q.q.ExecContext(ctx, `SELECT 1 FROM task_pool ORDER BY name FOR UPDATE`); err != nil {
			return err
		}
		_, err := q.q.ExecContext(ctx, `
			WITH upserted AS (
				INSERT INTO task_pool (name, max_running)
				SELECT name, lim FROM unnest($1::text[], $2::int[]) AS c(name, lim) ORDER BY name
				ON CONFLICT (name) DO UPDATE SET max_running = EXCLUDED.max_running, updated_at = now()
				WHERE task_pool.max_running IS DISTINCT FROM EXCLUDED.max_running
			)
			UPDATE task_pool SET max_running = NULL, updated_at = now()
			WHERE max_running IS NOT NULL AND NOT (name = ANY($1))`, pq.Array(names), pq.Array(values))
		return err
	})
	if err != nil {
		return fmt.Errorf("set pool limits %v: %w", limits, err)
	}
	return nil
}

// PoolList returns every pool, by name.
func (q *Queries) PoolList(ctx context.Context) ([]Pool, error) {
	var pools []Pool
	if err := sqlxSelect(ctx, q, &pools, `SELECT name, max_running, running FROM task_pool ORDER BY name`); err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return pools, nil
}

// PoolNamesLimited returns the names of the pools with a limit, as the masters stored them
// (PoolSetLimits); ok is false when there is no pool row at all.
func (q *Queries) PoolNamesLimited(ctx context.Context) (names []string, ok bool, err error) {
	pools, err := q.PoolList(ctx)
	if err != nil {
		return nil, false, err
	}
	for _, p := range pools {
		if p.MaxRunning != nil {
			names = append(names, p.Name)
		}
	}
	return names, len(pools) > 0, nil
}
