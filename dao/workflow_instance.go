package dao

import (
	"context"
	"encoding/json"
	"fmt"

	"database/sql"
	"errors"
)

const workflowColumns = `id, workflow_name, workflow_version, state, owner, params, priority, error,
	created_at, started_at, ended_at`

// WorkflowCreate creates a submitted workflow instance of a stored definition and wakes the
// masters. Call it in the transaction that ensured the definition.
func (q *Queries) WorkflowCreate(ctx context.Context, name string, version int, params json.RawMessage, priority int) (int64, error) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	var id int64
	err := sqlxGet(ctx, q, &id, `
		WITH ins AS (
			INSERT INTO workflow_instance (workflow_name, workflow_version, params, priority)
			VALUES ($1, $2, $3::jsonb, $4) RETURNING id
		)
		SELECT ins.id FROM ins, LATERAL pg_notify($5, '') n`,
		name, version, string(params), priority, q.ch.master)
	if err != nil {
		return 0, fmt.Errorf("create workflow instance of %q version %d: %w", name, version, err)
	}
	return id, nil
}

// WorkflowClaimUnowned makes owner the master of up to limit workflow instances that have
// none (new ones, and those released by a failover), highest priority first, with SKIP LOCKED
// so masters claiming at once never take the same instance.
func (q *Queries) WorkflowClaimUnowned(ctx context.Context, owner string, limit int) ([]WorkflowInstance, error) {
	var wfs []WorkflowInstance
	err := sqlxSelect(ctx, q, &wfs, `
		WITH locked AS (
			SELECT id FROM workflow_instance
			WHERE owner IS NULL AND state IN ('submitted', 'running')
			ORDER BY priority DESC, id
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		)
		UPDATE workflow_instance w
		SET owner = $1, state = 'running', started_at = coalesce(w.started_at, now())
		FROM locked WHERE w.id = locked.id
		RETURNING `+prefixed("w.", workflowColumns), owner, limit)
	if err != nil {
		return nil, fmt.Errorf("claim workflow instances for %s: %w", owner, err)
	}
	return wfs, nil
}

// WorkflowListOwnedActive returns the ids of the running workflow instances owner drives.
func (q *Queries) WorkflowListOwnedActive(ctx context.Context, owner string) ([]int64, error) {
	var ids []int64
	if err := sqlxSelect(ctx, q, &ids, `SELECT id FROM workflow_instance
		WHERE owner = $1 AND state IN ('submitted', 'running') ORDER BY id`, owner); err != nil {
		return nil, fmt.Errorf("list workflow instances of %s: %w", owner, err)
	}
	return ids, nil
}

// WorkflowLockIfOwned locks a running workflow instance owned by owner for the rest of the
// transaction, so a failover that releases it waits until the advance commits. It returns
// ErrNotOwner when owner no longer drives it or it has finished.
func (q *Queries) WorkflowLockIfOwned(ctx context.Context, id int64, owner string) (*WorkflowInstance, error) {
	var wf WorkflowInstance
	err := sqlxGet(ctx, q, &wf, `SELECT `+workflowColumns+` FROM workflow_instance
		WHERE id = $1 AND owner = $2 AND state = 'running' FOR NO KEY UPDATE`, id, owner)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("workflow instance %d: %w", id, ErrNotOwner)
	}
	if err != nil {
		return nil, fmt.Errorf("lock workflow instance %d: %w", id, err)
	}
	return &wf, nil
}

// WorkflowFinishIfOwned moves a running workflow instance owned by owner to a terminal state.
func (q *Queries) WorkflowFinishIfOwned(ctx context.Context, id int64, owner string, state WorkflowState, errMsg string) error {
	var e *string
	if errMsg != "" {
		e = &errMsg
	}
	res, err := q.q.ExecContext(ctx, `UPDATE workflow_instance SET state = $3, error = $4, ended_at = now()
		WHERE id = $1 AND owner = $2 AND state = 'running'`, id, owner, string(state), e)
	if err != nil {
		return fmt.Errorf("finish workflow instance %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("finish workflow instance %d: %w", id, ErrNotOwner)
	}
	return nil
}

// WorkflowGet returns one workflow instance.
func (q *Queries) WorkflowGet(ctx context.Context, id int64) (*WorkflowInstance, error) {
	var wf WorkflowInstance
	if err := sqlxGet(ctx, q, &wf, `SELECT `+workflowColumns+` FROM workflow_instance WHERE id = $1`, id); err != nil {
		return nil, fmt.Errorf("get workflow instance %d: %w", id, err)
	}
	return &wf, nil
}
