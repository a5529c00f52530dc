package lifecycle

import (
	"context"
	"encoding/json"

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
func Submit(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int, params json.RawMessage, priority int) (int64, error) {
	return submit(ctx, q, spec, version, params, priority, false)
}

// SubmitQueued is Submit for a backfill: at the cap, the instance waits for a slot even when
// the workflow's when-full is skip, since every run was asked for.
func SubmitQueued(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int, params json.RawMessage, priority int) (int64, error) {
	return submit(ctx, q, spec, version, params, priority, true)
}

func submit(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int, params json.RawMessage, priority int, queue bool) (int64, error) {
	rows, err := Roots(spec, params, priority)
	if err != nil {
		return 0, err
	}
	return q.WorkflowCreate(ctx, spec.Name, version, params, priority, queue, rows)
}

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
	return db.WorkflowCreateGrouped(ctx, dao.Submission{Name: spec.Name, Version: version, Params: params, Priority: priority, Roots: rows, Audit: audit})
}

// SubmitMany creates n instances of the stored definition as SubmitQueued does (priority 0),
// in one statement, for bulk loads (benchmarks).
func SubmitMany(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int, params json.RawMessage, n int) error {
	rows, err := Roots(spec, params, 0)
	if err != nil {
		return err
	}
	return q.WorkflowCreateMany(ctx, spec.Name, version, params, n, rows)
}
