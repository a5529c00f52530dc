package lifecycle

import (
	"context"
	"encoding/json"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// A Definition is a workflow file to store as its workflow's next version, and what to do
// with it once stored.
type Definition struct {
	Spec *workflow.Spec
	// File is the file as it was sent; the audit row keeps its SHA-256, never the file.
	File []byte
	// Run, unless nil, submits an instance of the stored version as well. A file with a
	// schedule is run by its schedule instead: storing it submits nothing.
	Run *Run
	// By, unless nil, says who stores it: its Actor, Role and Client are those of the
	// audit_event rows written with the changes, one for the definition and one for the
	// instance. Its Action, Target and Params are set here.
	By *dao.AuditEvent
}

// Run is the instance a Definition submits: its params and its priority.
type Run struct {
	Params   map[string]string
	Priority int
}

// Stored is what storing a Definition did.
type Stored struct {
	Version int
	// Schedule is the schedule stored with the definition, nil when its file has none.
	Schedule *dao.Schedule
	// Unscheduled reports that a stored schedule was removed: the file has none.
	Unscheduled bool
	// Instance is the instance submitted, 0 when none was.
	Instance int64
}

// Define stores the workflow file d, the one way a definition is stored (the CLI's submit,
// the API, the benchmarks): the definition (a new version unless it equals the latest), its
// schedule, its hooks, the instance d.Run asks for and their audit rows, in one transaction.
// The file is the truth about the schedule and the hooks: with a schedule, it replaces the
// stored one and no instance is created now; without one, any stored schedule goes; a hook it
// no longer declares goes, and one another workflow holds refuses the file (an error wrapping
// a *dao.HookTakenError). A workflow with when-full: skip at its
// cap stores nothing and returns an error wrapping dao.ErrWorkflowFull.
func Define(ctx context.Context, db *dao.DB, d Definition, now time.Time) (Stored, error) {
	if err := d.Spec.CheckWorkdirs(); err != nil {
		return Stored{}, err
	}
	raw, err := json.Marshal(d.Spec)
	if err != nil {
		return Stored{}, err
	}
	var params json.RawMessage
	var runParams map[string]string
	if d.Run != nil {
		if runParams = d.Run.Params; runParams == nil {
			runParams = map[string]string{}
		}
		if params, err = json.Marshal(runParams); err != nil {
			return Stored{}, err
		}
	}
	name := d.Spec.Name
	var out Stored
	err = db.Tx(ctx, func(q *dao.Queries) error {
		if out.Version, err = q.DefinitionEnsure(ctx, name, raw, Facts(d.Spec)); err != nil {
			return err
		}
		if d.By != nil {
			ev := *d.By
			ev.Action, ev.Target = dao.AuditDefinitionStore, "definition/"+name
			ev.Params = dao.DefinitionAuditParams(name, out.Version, d.File)
			if err := q.AuditInsert(ctx, ev); err != nil {
				return err
			}
		}
		if out.Schedule, out.Unscheduled, err = storeSchedule(ctx, q, d.Spec, out.Version, now); err != nil {
			return err
		}
		if err := storeHooks(ctx, q, d.Spec, out.Version); err != nil {
			return err
		}
		if err := storeAssetConsumer(ctx, q, d.Spec, out.Version); err != nil {
			return err
		}
		if d.Run == nil || out.Schedule != nil {
			return nil
		}
		sub := Submission{Spec: d.Spec, Version: out.Version, Params: params, Priority: d.Run.Priority}
		if d.By != nil {
			ev := *d.By
			ev.Action = dao.AuditWorkflowSubmit
			ev.Params = dao.AuditParams(map[string]any{"name": name, "version": out.Version,
				"params": runParams, "priority": d.Run.Priority})
			sub.Audit = &ev
		}
		out.Instance, err = Submit(ctx, q, sub)
		return err
	})
	return out, err
}
