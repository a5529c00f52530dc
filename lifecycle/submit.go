package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// A Submission is an instance to create of a stored definition: every way an instance is
// made (the command line, the API, a definition stored with a run, schedules, triggers,
// backfills, the benchmarks) fills one and hands it to Submit, SubmitNow or SubmitMany.
type Submission struct {
	// Spec and Version are the stored definition's.
	Spec    *workflow.Spec
	Version int
	// Params are the instance's params, a JSON object of strings; empty for none. They must
	// be the ones Spec declares (workflow.Spec.RunParams), and are stored as tasks read them.
	Params   json.RawMessage
	Priority int
	// Queue makes the instance wait for a slot when its workflow is at its cap or its
	// concurrency key is full, whatever when-full says: a backfill's, since every run was
	// asked for.
	Queue bool
	// Audit, unless nil, is the submission's audit_event row, committed with the instance
	// (its Target is set to the instance). SubmitMany writes none.
	Audit *dao.AuditEvent
}

// prepare is the one step before every creation: the instance's params checked against its
// workflow's declarations (refused ones are a *ParamsError), then its root tasks and its
// concurrency key, rendered once from its params (a key that renders empty is a *KeyError);
// when it fails, nothing is created.
func (s Submission) prepare(ctx context.Context) (dao.Submission, error) {
	params, err := s.checkParams()
	if err != nil {
		return dao.Submission{}, err
	}
	s.Params = params
	roots, err := Roots(s.Spec, s.Params, s.Priority)
	if err != nil {
		return dao.Submission{}, err
	}
	key, err := concurrencyKey(ctx, s.Spec, s.Params)
	if err != nil {
		return dao.Submission{}, err
	}
	return dao.Submission{Name: s.Spec.Name, Version: s.Version, Params: s.Params, Priority: s.Priority,
		Queue: s.Queue, Roots: roots, Concurrency: key, Audit: s.Audit}, nil
}

// Submit creates the instance s in q's transaction, the one that stored or read its
// definition, and wakes the masters once it commits. An instance of a workflow without
// max-active-instances is created with its root tasks (those without dependencies) queued, in
// the same statement: running at once with no owner, so its first tasks start on the
// workers' wake-up without waiting for a master, and a master takes it up when one of them
// ends. An instance of a capped workflow waits for admission, which creates its roots.
//
// A workflow with when-full: skip at its cap creates nothing (unless s.Queue): the error
// wraps dao.ErrWorkflowFull.
//
// An instance of a workflow with a concurrency: key waits for admission in its key's order
// (Driver.AdmitKeys). When its key is full, when-full: skip creates nothing (dao.ErrKeyFull,
// which is also dao.ErrWorkflowFull) and cancel-oldest stops the key's oldest active instance
// in the same transaction; with s.Queue it waits whatever its when-full says.
func Submit(ctx context.Context, q *dao.Queries, s Submission) (int64, error) {
	sub, err := s.prepare(ctx)
	if err != nil {
		return 0, err
	}
	return q.WorkflowCreate(ctx, sub)
}

// SubmitNow is Submit on the pool, outside any transaction of the caller's: the instance is
// created in a statement, and a commit, shared with the submissions of the same moment from
// this process (dao.DB.WorkflowCreateGrouped), which is how a node or a client submitting many
// at once should. Definitions never change, so nothing needs the definition's lookup and the
// creation in one transaction.
func SubmitNow(ctx context.Context, db *dao.DB, s Submission) (int64, error) {
	sub, err := s.prepare(ctx)
	if err != nil {
		return 0, err
	}
	return db.WorkflowCreateGrouped(ctx, sub)
}

// SubmitMany creates n instances like s in one statement, for bulk loads (the benchmarks):
// each waits for a slot at a cap as with s.Queue, and none has an audit row.
func SubmitMany(ctx context.Context, q *dao.Queries, s Submission, n int) error {
	sub, err := s.prepare(ctx)
	if err != nil {
		return err
	}
	return q.WorkflowCreateMany(ctx, sub, n)
}

// checkParams checks the submission's params against its workflow's declarations
// (workflow.Spec.RunParams) and returns them as they are stored: as tasks read them.
func (s Submission) checkParams() (json.RawMessage, error) {
	var given map[string]string
	if len(s.Params) > 0 {
		if err := json.Unmarshal(s.Params, &given); err != nil {
			return nil, &ParamsError{Workflow: s.Spec.Name, err: fmt.Errorf("params: %w", err)}
		}
	}
	checked, err := s.Spec.RunParams(given)
	if err != nil {
		return nil, &ParamsError{Workflow: s.Spec.Name, err: err}
	}
	if maps.Equal(checked, given) {
		return s.Params, nil
	}
	return json.Marshal(checked)
}

// ParamsError is a submission refused because its params do not match its workflow's
// declarations: undeclared, of the wrong type, or a required one missing. It is a mistake of
// the request, not of the system; its message lists the problems, one a line.
type ParamsError struct {
	// Workflow is the workflow submitted.
	Workflow string
	err      error
}

func (e *ParamsError) Error() string { return e.err.Error() }

func (e *ParamsError) Unwrap() error { return e.err }

// concurrencyKey is the concurrency key of an instance of spec with params, nil for a workflow without
// concurrency:. It is rendered over the definition's params overridden by the instance's,
// the params its tasks see; a key that cannot be rendered, or renders empty, is a *KeyError.
func concurrencyKey(ctx context.Context, spec *workflow.Spec, params json.RawMessage) (*dao.Concurrency, error) {
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
