package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/faultinject"
	"github.com/zksched/zksched/workflow"
)

// storeHooks makes the webhook triggers of spec, stored as version, the workflow's hooks.
func storeHooks(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int) error {
	hooks := map[string]string{}
	for _, w := range spec.Webhooks() {
		hooks[w.Name] = w.Signature
	}
	return q.HookPutAll(ctx, spec.Name, version, hooks)
}

// A Delivery is a webhook delivery whose signature was verified, to record and act on.
type Delivery struct {
	// Hook is the hook delivered to; Spec and Version the definition it runs.
	Hook    string
	Spec    *workflow.Spec
	Version int
	// ID is the delivery's id from the hook's dedupe header, nil when it has none.
	ID *string
	// Window is how long a delivery id is remembered.
	Window time.Duration
	// Params are the run's params, rendered from the delivery; nil when Filtered.
	Params map[string]string
	// Filtered says the hook's filter said no: the delivery is recorded, nothing starts.
	Filtered bool
	// Client is the address the delivery came from.
	Client string
	// Audit is the delivery's audit_event row, committed with it (and, for a run, with the
	// instance, its Target).
	Audit dao.AuditEvent
}

// Delivered is what a Delivery came to.
type Delivered struct {
	// Duplicate says the hook saw the delivery's id within the window: nothing was done, and
	// Previous is that delivery.
	Duplicate bool
	Previous  dao.HookDelivery
	// Instance is the run started, 0 for none.
	Instance int64
}

// Deliver records d and submits its run, in one transaction: the delivery's row (unique on
// its hook and id) is inserted first, so of two masters given the same delivery at once the
// second waits for the first to commit and then starts nothing; and a run whose submission
// fails leaves no row, so the sender's retry is not a duplicate. A refused submission is an
// error as Submit's are (*ParamsError, *KeyError, dao.ErrWorkflowFull).
func Deliver(ctx context.Context, db *dao.DB, d Delivery) (Delivered, error) {
	outcome := dao.HookSubmitted
	if d.Filtered {
		outcome = dao.HookFiltered
	}
	var out Delivered
	err := db.Tx(ctx, func(q *dao.Queries) error {
		out = Delivered{}
		row, err := q.HookDeliveryRecord(ctx, d.Hook, d.ID, outcome, d.Client, d.Window)
		if err != nil {
			return err
		}
		if row == 0 {
			out.Duplicate = true
			out.Previous, err = q.HookDeliveryGet(ctx, d.Hook, *d.ID)
			return err
		}
		if d.Filtered {
			return q.AuditInsert(ctx, d.Audit)
		}
		params, err := json.Marshal(d.Params)
		if err != nil {
			return err
		}
		audit := d.Audit
		if out.Instance, err = Submit(ctx, q, Submission{Spec: d.Spec, Version: d.Version, Params: params,
			Priority: d.Spec.Priority, Audit: &audit}); err != nil {
			return fmt.Errorf("submit %s for hook %q: %w", d.Spec.Name, d.Hook, err)
		}
		if err := q.HookDeliverySetInstance(ctx, row, out.Instance); err != nil {
			return err
		}
		faultinject.Point("hook-before-commit")
		return nil
	})
	if err != nil {
		return Delivered{}, err
	}
	return out, nil
}

// IsRefusal reports whether err, from Deliver, refuses the delivery's run for what it holds
// (its params, its concurrency key, a full workflow), rather than failing.
func IsRefusal(err error) bool {
	var pe *ParamsError
	var ke *KeyError
	return errors.As(err, &pe) || errors.As(err, &ke) || errors.Is(err, dao.ErrWorkflowFull)
}
