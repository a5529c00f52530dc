package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/faultinject"
	"github.com/zksched/zksched/workflow"
)

// MaxAssetRunsPerFire bounds the runs one FireAssets starts for one consumer, so that a long
// queue of events is worked off in several short transactions rather than one long one.
const MaxAssetRunsPerFire = 100

// storeAssetConsumer records the assets the workflow spec (version) produces, and makes it
// an asset consumer when it declares on-assets (no longer one when it does not), in the
// transaction that stored the definition.
func storeAssetConsumer(ctx context.Context, q *dao.Queries, spec *workflow.Spec, version int) error {
	var produced []string
	for _, t := range spec.Tasks {
		for _, a := range t.Produces {
			if !slices.Contains(produced, a) {
				produced = append(produced, a)
			}
		}
	}
	if err := q.AssetProducersPut(ctx, spec.Name, produced); err != nil {
		return err
	}
	if spec.OnAssets == nil {
		return q.AssetConsumerDelete(ctx, spec.Name)
	}
	assets, all := spec.OnAssets.Assets()
	return q.AssetConsumerPut(ctx, dao.AssetConsumer{WorkflowName: spec.Name, WorkflowVersion: version, AllOf: all, Assets: assets})
}

// inputs are what an instance's templates read besides the upstream outputs: its params and
// the asset events that started it (nil for a run no asset started).
type inputs struct {
	params map[string]string
	assets map[string]workflow.AssetInput
}

// runAssets are the asset events that started the instance id of spec, as its templates
// read them; nil for a workflow without on-assets, whose runs no asset starts.
func runAssets(ctx context.Context, q *dao.Queries, spec *workflow.Spec, id int64) (map[string]workflow.AssetInput, error) {
	if spec.OnAssets == nil {
		return nil, nil
	}
	evs, err := q.AssetEventsOfRun(ctx, id)
	if err != nil {
		return nil, err
	}
	in := make(map[string]workflow.AssetInput, len(evs))
	for _, e := range evs {
		a := workflow.AssetInput{Event: e.ID}
		if e.Output != nil {
			a.Output = *e.Output
		}
		in[e.Asset] = a
	}
	return in, nil
}

// AssetRun is one run FireAssets started.
type AssetRun struct {
	Instance int64
	Events   []dao.AssetEvent
}

// FireAssets starts the runs of the asset consumer name that its queued events allow, up to
// MaxAssetRunsPerFire, in one transaction: for each, it takes the events out of the queue,
// creates the instance and links the events to it. The consumer's row lock makes one master
// at a time do this (another one returns at once with nothing done), and a master killed
// before the commit leaves the events queued and no run: each set of events starts exactly
// one run.
func FireAssets(ctx context.Context, db *dao.DB, name string) ([]AssetRun, error) {
	var runs []AssetRun
	err := db.Tx(ctx, func(q *dao.Queries) error {
		runs = nil
		c, err := q.AssetConsumerLock(ctx, name)
		if err != nil || c == nil {
			return err
		}
		raw, err := q.DefinitionGet(ctx, c.WorkflowName, c.WorkflowVersion)
		if err != nil {
			return err
		}
		spec := new(workflow.Spec)
		if err := json.Unmarshal(raw, spec); err != nil {
			return fmt.Errorf("definition %s version %d: %w", c.WorkflowName, c.WorkflowVersion, err)
		}
		for len(runs) < MaxAssetRunsPerFire {
			evs, err := q.AssetTake(ctx, c)
			if err != nil {
				return err
			}
			if len(evs) == 0 {
				break
			}
			// The events are out of the queue, the run not yet created: a master killed here
			// commits neither.
			faultinject.Point("assets-before-submit")
			run, err := startAssetRun(ctx, q, c, spec, evs)
			if err != nil {
				return err
			}
			runs = append(runs, run)
		}
		return nil
	})
	return runs, err
}

// startAssetRun creates the run of consumer c (whose definition is spec) that the events evs
// start, and links them to it.
func startAssetRun(ctx context.Context, q *dao.Queries, c *dao.AssetConsumer, spec *workflow.Spec, evs []dao.AssetEvent) (AssetRun, error) {
	run := AssetRun{Events: evs}
	ids := make([]int64, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	// Queued whatever when-full says: the events asked for the run, as a backfill's fires do.
	id, err := Submit(ctx, q, Submission{Spec: spec, Version: c.WorkflowVersion, Priority: spec.Priority, Queue: true})
	if err != nil {
		return run, fmt.Errorf("start a run of %q on asset events %v: %w", c.WorkflowName, ids, err)
	}
	run.Instance = id
	return run, q.AssetConsume(ctx, c.WorkflowName, ids, id)
}

// ErrAssetName is the error of an asset name that breaks workflow.NameRule.
var ErrAssetName = errors.New("invalid asset name: " + workflow.NameRule)

// ErrAssetOutputTooLarge is the error of an emitted output over dao.MaxAssetOutput bytes: an
// event from outside is refused rather than cut, as its producer can send less.
var ErrAssetOutputTooLarge = fmt.Errorf("asset output over %d bytes", dao.MaxAssetOutput)

// EmitAsset writes an event of asset from outside any task (`zksched asset emit`, the API),
// emitted by by, with output (nil for none), and audit (unless nil) in its transaction. The
// masters start the runs it completes once it commits.
func EmitAsset(ctx context.Context, db *dao.DB, asset string, output *string, by string, audit *dao.AuditEvent) (int64, error) {
	if !workflow.ValidName(asset) {
		return 0, fmt.Errorf("asset %q: %w", asset, ErrAssetName)
	}
	if output != nil && len(*output) > dao.MaxAssetOutput {
		return 0, fmt.Errorf("asset %q: %w", asset, ErrAssetOutputTooLarge)
	}
	var id int64
	err := db.Tx(ctx, func(q *dao.Queries) error {
		var err error
		if id, err = q.AssetEmit(ctx, asset, output, by); err != nil {
			return err
		}
		return auditIn(ctx, q, audit)
	})
	return id, err
}
