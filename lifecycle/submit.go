package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// Submit creates an instance of the stored definition spec, version version, with params (a
// JSON object of strings; empty for none) and priority, and wakes the masters. An instance of
// a workflow without max-active-instances is created with its root tasks (those without
// dependencies) queued, in the same statement: running at once with no owner, so its first
// tasks start on the workers' wake-up without waiting for a master, and a master takes it up
// when one of them ends. An instance of a capped workflow waits for admission, which creates
// its roots. Call it in the transaction that stored the definition.
//
// A workflow with when-full: skip at its cap creates nothing: the error wraps
// dao.ErrWorkflowFull.
//
// An instance of a workflow with a concurrency: key gets its key rendered here, once, from
// its params (a key that renders empty is an error, and nothing is created), and waits for
// admission in its key's order (Driver.AdmitKeys). When its key is full, when-full: skip
// creates nothing (dao.ErrKeyFull, which is also dao.ErrWorkflowFull) and cancel-oldest
// stops the key's oldest active instance in the same transaction.
func Submit(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int, params json.RawMessage, priority int) (int64, error) {
	return submit(ctx, q, spec, version, params, priority, false)
}

// SubmitQueued is Submit for a backfill: at the cap, the instance waits for a slot even when
// the workflow's when-full is skip, since every run was asked for; so does an instance whose
// concurrency key is full, whatever its when-full says.
func SubmitQueued(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int, params json.RawMessage, priority int) (int64, error) {
	return submit(ctx, q, spec, version, params, priority, true)
}

func submit(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int, params json.RawMessage, priority int, queue bool) (int64, error) {
	rows, err := Roots(spec, params, priority)
	if err != nil {
		return 0, err
	}
	key, err := Key(ctx, spec, params)
	if err != nil {
		return 0, err
	}
	return q.WorkflowCreate(ctx, dao.Submission{Name: spec.Name, Version: version, Params: params, Priority: priority,
		Queue: queue, Roots: rows, Concurrency: key})
}

// Key is the concurrency key of an instance of spec with params, nil for a workflow without
// concurrency:. It is rendered over the definition's params overridden by the instance's,
// the params its tasks see; a key that cannot be rendered, or renders empty, is a *KeyError.
func Key(ctx context.Context, spec *workflow.Spec, params json.RawMessage) (*dao.Concurrency, error) {
	c := spec.Concurrency
	if c == nil {
		return nil, nil
	}
	merged, err := instanceParams(spec, params)
	if err != nil {
		return nil, fmt.Errorf("submit %s: %w", spec.Name, err)
	}
	key, err := c.RenderKey(ctx, merged)
	if err != nil {
		return nil, &KeyError{fmt.Errorf("submit %s: %w", spec.Name, err)}
	}
	return &dao.Concurrency{Key: key, Max: c.Max, WhenFull: c.WhenFull}, nil
}

// KeyError is a submission refused because its params do not render its workflow's
// concurrency key: a mistake of the request, not of the system.
type KeyError struct{ err error }

func (e *KeyError) Error() string { return e.err.Error() }

func (e *KeyError) Unwrap() error { return e.err }

// SubmitNow is Submit on the pool, outside any transaction of the caller's: the instance is
// created in a statement, and a commit, shared with the submissions of the same moment from
// this process (dao.DB.WorkflowCreateGrouped), which is how a node or a client submitting many at once should.
// audit, unless nil, is the submission's audit_event row, committed with the instance (its
// target is set to the instance).
func SubmitNow(ctx context.Context, db *dao.DB, spec *workflow.Spec, version int, params json.RawMessage, priority int, audit *dao.AuditEvent) (int64, error) {
	rows, err := Roots(spec, params, priority)
	if err != nil {
		return 0, err
	}
	key, err := Key(ctx, spec, params)
	if err != nil {
		return 0, err
	}
	return db.WorkflowCreateGrouped(ctx, dao.Submission{Name: spec.Name, Version: version, Params: params, Priority: priority,
		Roots: rows, Concurrency: key, Audit: audit})
}

// SubmitMany creates n instances of the stored definition as SubmitQueued does (priority 0),
// in one statement, for bulk loads (benchmarks).
func SubmitMany(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int, params json.RawMessage, n int) error {
	rows, err := Roots(spec, params, 0)
	if err != nil {
		return err
	}
	key, err := Key(ctx, spec, params)
	if err != nil {
		return err
	}
	return q.WorkflowCreateMany(ctx, dao.Submission{Name: spec.Name, Version: version, Params: params, Roots: rows, Concurrency: key}, n)
}
