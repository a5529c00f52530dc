package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The statements of the Triggers page (api/triggers.go): what is waiting on what. Each is one
// statement with a LIMIT, whatever the number of rows it sums up, so the page costs the same
// with ten hooks and consumers as with thousands.

// HookTrigger is a webhook trigger with the outcome of its latest delivery.
type HookTrigger struct {
	Name            string `db:"name" json:"name"`
	WorkflowName    string `db:"workflow_name" json:"workflow_name"`
	WorkflowVersion int    `db:"workflow_version" json:"workflow_version"`
	Signature       string `db:"signature" json:"signature"`
	// LastReceivedAt, LastOutcome and LastInstance are of the latest delivery whose signature
	// was verified (HookDelivery); nil, "" and nil before the first.
	LastReceivedAt *time.Time `db:"last_received_at" json:"last_received_at"`
	LastOutcome    string     `db:"last_outcome" json:"last_outcome"`
	LastInstance   *int64     `db:"last_workflow_instance_id" json:"last_workflow_instance_id"`
}

// triggerHooksSQL is TriggerHooks' statement: $1 how many. The latest delivery of a hook is
// one probe of hook_delivery_hook_id.
const triggerHooksSQL = `
		SELECT h.name, h.workflow_name, h.workflow_version, h.signature,
			d.received_at AS last_received_at, coalesce(d.outcome, '') AS last_outcome, d.workflow_instance_id AS last_workflow_instance_id
		FROM trigger_hook h
		LEFT JOIN LATERAL (
			SELECT received_at, outcome, workflow_instance_id, id FROM hook_delivery
			WHERE hook = h.name ORDER BY id DESC LIMIT 1) d ON true
		ORDER BY d.id DESC NULLS LAST, h.updated_at DESC, h.name
		LIMIT $1`

// TriggerHooks returns at most limit hooks, the latest delivered first, then the latest
// stored.
func (q *Queries) TriggerHooks(ctx context.Context, limit int) ([]HookTrigger, error) {
	var out []HookTrigger
	if err := sqlxSelect(ctx, q, &out, triggerHooksSQL, limit); err != nil {
		return nil, fmt.Errorf("list hook triggers: %w", err)
	}
	return out, nil
}

// MaxPendingCounted bounds the events AssetWaits counts of one asset of one consumer: a
// count at it means at least that many.
const MaxPendingCounted = 1000

// AssetWait is one asset a consumer waits for: its events queued for the consumer and its
// latest event.
type AssetWait struct {
	Asset string `json:"asset"`
	// Pending is how many of its events the consumer has not taken yet, counted up to
	// MaxPendingCounted; 0 means the consumer still misses it.
	Pending int `json:"pending"`
	// LastEvent and LastEventAt are of the asset's latest event, nil for none yet.
	LastEvent   *int64     `json:"last_event"`
	LastEventAt *time.Time `json:"last_event_at"`
}

// AssetConsumerWaits is a workflow that declares on-assets, with what it waits for.
type AssetConsumerWaits struct {
	WorkflowName    string `db:"workflow_name" json:"workflow_name"`
	WorkflowVersion int    `db:"workflow_version" json:"workflow_version"`
	// AllOf is true for on-assets: all (a run takes an event of each), false for any.
	AllOf bool `db:"all_of" json:"all_of"`
	// Assets are its assets, in its file's order.
	Assets []AssetWait `db:"-" json:"assets"`
	// LastRun is the run the latest event it took started; nil before the first.
	LastRun *int64 `db:"last_run" json:"last_run"`
}

// assetConsumerRow is a row of assetConsumerWaitsSQL: the assets as JSON.
type assetConsumerRow struct {
	AssetConsumerWaits
	Waits json.RawMessage `db:"waits"`
}

// assetConsumerWaitsSQL is AssetConsumerWaits' statement: $1 how many, $2 one consumer's name
// or NULL for all, $3 MaxPendingCounted. Each asset's queue is counted through asset_pending's
// primary key (up to $3 rows, in its order: with a LIMIT alone the planner may read the table
// from its start instead, the whole of it for an asset with nothing queued), its latest event is one probe of asset_event_asset, and the
// consumer's latest run one probe of asset_consumption's primary key.
const assetConsumerWaitsSQL = `
		SELECT c.workflow_name, c.workflow_version, c.all_of,
			(SELECT json_agg(json_build_object(
				'asset', a.asset,
				'pending', (SELECT count(*) FROM (SELECT 1 FROM asset_pending p
					WHERE p.consumer = c.workflow_name AND p.asset = a.asset ORDER BY p.event_id LIMIT $3) n),
				'last_event', e.id, 'last_event_at', e.created_at) ORDER BY a.ord)
			 FROM unnest(c.assets) WITH ORDINALITY AS a(asset, ord)
			 LEFT JOIN LATERAL (SELECT id, created_at FROM asset_event
				WHERE asset = a.asset ORDER BY id DESC LIMIT 1) e ON true) AS waits,
			(SELECT workflow_instance_id FROM asset_consumption
			 WHERE consumer = c.workflow_name ORDER BY event_id DESC LIMIT 1) AS last_run
		FROM asset_consumer c
		WHERE $2::text IS NULL OR c.workflow_name = $2
		ORDER BY c.updated_at DESC, c.workflow_name
		LIMIT $1`

// AssetConsumerWaits returns at most limit workflows that declare on-assets, the latest
// stored first, each with its assets' queues and latest events; only the workflow name when
// name is not empty (none: it declares no on-assets).
func (q *Queries) AssetConsumerWaits(ctx context.Context, name string, limit int) ([]AssetConsumerWaits, error) {
	var arg *string
	if name != "" {
		arg = &name
	}
	var rows []assetConsumerRow
	if err := sqlxSelect(ctx, q, &rows, assetConsumerWaitsSQL, limit, arg, MaxPendingCounted); err != nil {
		return nil, fmt.Errorf("list asset consumers: %w", err)
	}
	out := make([]AssetConsumerWaits, len(rows))
	for i, r := range rows {
		out[i] = r.AssetConsumerWaits
		if err := json.Unmarshal(r.Waits, &out[i].Assets); err != nil {
			return nil, fmt.Errorf("read the assets of consumer %q: %w", r.WorkflowName, err)
		}
	}
	return out, nil
}

// WaitingSensor is a sensor task waiting now, between its checks or for another run.
type WaitingSensor struct {
	TaskInstance     int64  `db:"id"`
	WorkflowInstance int64  `db:"workflow_instance_id"`
	WorkflowName     string `db:"workflow_name"`
	Name             string `db:"name"`
	// PausedStep is what it waits at (workflow.SensorStep and the others); nil for a time
	// sensor, which waits on no worker for its time.
	PausedStep *string `db:"paused_step"`
	// WaitUntil is when the masters next act on it: its next check, or its time or timeout.
	WaitUntil *time.Time `db:"wait_until"`
	// Waiting is when it began to wait: the end of its last check.
	Waiting *time.Time `db:"started_at"`
	// Task is the task's spec (workflow.Task as JSON), for its kind, target and timeout.
	Task json.RawMessage `db:"task"`
}

// waitingSensorsSQL is WaitingSensors' statement: $1 how many. It reads the waiting sensors
// through task_instance_waiting_sensor (migration 00037), newest first.
const waitingSensorsSQL = `
		SELECT t.id, t.workflow_instance_id, w.workflow_name, t.name, t.paused_step, t.wait_until, t.started_at,
			coalesce(t.params -> 'task', 'null') AS task
		FROM (SELECT * FROM task_instance
			WHERE state = 'waiting' AND type = 'sensor'
			ORDER BY id DESC
			LIMIT $1) t
		JOIN LATERAL (SELECT workflow_name FROM workflow_instance WHERE id = t.workflow_instance_id) w ON true
		ORDER BY t.id DESC`

// WaitingSensors returns at most limit sensor tasks waiting now, newest first, whatever they
// wait at.
func (q *Queries) WaitingSensors(ctx context.Context, limit int) ([]WaitingSensor, error) {
	var out []WaitingSensor
	if err := sqlxSelect(ctx, q, &out, waitingSensorsSQL, limit); err != nil {
		return nil, fmt.Errorf("list waiting sensors: %w", err)
	}
	return out, nil
}
