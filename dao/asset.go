package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// WakeupAssets is the masters' payload for new asset events: look for asset consumers whose
// runs can start.
const WakeupAssets = "assets"

// MaxAssetOutput is the most of a producer's output an asset event keeps, in characters: the
// first ones of a longer output, marked truncated. finishManySQL holds the same figure.
const MaxAssetOutput = 65536

// AssetEvent is a row of asset_event: one production of an asset.
type AssetEvent struct {
	ID    int64  `db:"id"`
	Asset string `db:"asset"`
	// TaskInstance and WorkflowInstance are the producing task and its run; nil for an event
	// emitted from outside, whose EmittedBy says by whom.
	TaskInstance     *int64    `db:"task_instance_id"`
	WorkflowInstance *int64    `db:"workflow_instance_id"`
	Output           *string   `db:"output"`
	OutputTruncated  bool      `db:"output_truncated"`
	EmittedBy        *string   `db:"emitted_by"`
	CreatedAt        time.Time `db:"created_at"`
}

// AssetConsumer is a row of asset_consumer: a workflow whose latest definition declares
// on-assets.
type AssetConsumer struct {
	WorkflowName    string         `db:"workflow_name"`
	WorkflowVersion int            `db:"workflow_version"`
	AllOf           bool           `db:"all_of"`
	Assets          pq.StringArray `db:"assets"`
}

// AssetConsumerPut makes the workflow name, at version, a consumer of assets (all of them for
// a run, or any), in the transaction that stored the definition. Events already queued for it
// stay queued; those of an asset it no longer names are dropped.
func (q *Queries) AssetConsumerPut(ctx context.Context, c AssetConsumer) error {
	_, err := q.q.ExecContext(ctx, `
		WITH c AS (
			INSERT INTO asset_consumer (workflow_name, workflow_version, all_of, assets)
			VALUES ($1, $2, $3, $4)
			ON CONFLICT (workflow_name) DO UPDATE SET workflow_version = $2, all_of = $3, assets = $4, updated_at = now()
		)
		DELETE FROM asset_pending WHERE consumer = $1 AND NOT asset = ANY($4)`,
		c.WorkflowName, c.WorkflowVersion, c.AllOf, c.Assets)
	if err != nil {
		return fmt.Errorf("store asset consumer %q: %w", c.WorkflowName, err)
	}
	return nil
}

// AssetConsumerDelete removes the workflow name from the asset consumers, with the events
// queued for it: its latest definition declares no on-assets.
func (q *Queries) AssetConsumerDelete(ctx context.Context, name string) error {
	if _, err := q.q.ExecContext(ctx, `DELETE FROM asset_consumer WHERE workflow_name = $1`, name); err != nil {
		return fmt.Errorf("delete asset consumer %q: %w", name, err)
	}
	return nil
}

// AssetProducersPut records the assets the latest definition of the workflow name produces
// (none: it produces none), in the transaction that stored it.
func (q *Queries) AssetProducersPut(ctx context.Context, name string, assets []string) error {
	_, err := q.q.ExecContext(ctx, `
		WITH gone AS (DELETE FROM asset_producer WHERE workflow_name = $1 AND NOT asset = ANY($2))
		INSERT INTO asset_producer (workflow_name, asset) SELECT $1, a FROM unnest($2::text[]) AS a
		ON CONFLICT DO NOTHING`, name, pq.StringArray(assets))
	if err != nil {
		return fmt.Errorf("store the assets %q produces: %w", name, err)
	}
	return nil
}

// AssetSummary is one asset as the assets page shows it: who produces it, who waits for it.
type AssetSummary struct {
	Asset string `db:"asset" json:"asset"`
	// Producers are the workflows whose latest definition has a task that produces it.
	Producers pq.StringArray `db:"producers" json:"producers"`
	// Consumers are the workflows whose latest definition waits for it (on-assets).
	Consumers pq.StringArray `db:"consumers" json:"consumers"`
	// Pending is how many of its events the consumers have yet to take, all consumers
	// together.
	Pending int `db:"pending" json:"pending"`
	// LastEventAt is the time of its latest event; nil for none.
	LastEventAt *time.Time `db:"last_event_at" json:"last_event_at"`
}

// AssetList returns the assets that are produced, waited for, or among the latest limit
// events, by name, and those events, newest first.
func (q *Queries) AssetList(ctx context.Context, limit int) ([]AssetSummary, []AssetEvent, error) {
	var evs []AssetEvent
	if err := sqlxSelect(ctx, q, &evs, `
		SELECT id, asset, task_instance_id, workflow_instance_id, left(output, 200) AS output, output_truncated,
			emitted_by, created_at
		FROM asset_event ORDER BY id DESC LIMIT $1`, limit); err != nil {
		return nil, nil, fmt.Errorf("list asset events: %w", err)
	}
	var assets []AssetSummary
	err := sqlxSelect(ctx, q, &assets, `
		WITH names AS (
			SELECT asset FROM asset_producer
			UNION SELECT unnest(assets) FROM asset_consumer
			UNION SELECT asset FROM (SELECT asset FROM asset_event ORDER BY id DESC LIMIT $1) e
		)
		SELECT n.asset,
			ARRAY(SELECT p.workflow_name FROM asset_producer p WHERE p.asset = n.asset ORDER BY 1) AS producers,
			ARRAY(SELECT c.workflow_name FROM asset_consumer c WHERE c.assets @> ARRAY[n.asset] ORDER BY 1) AS consumers,
			(SELECT count(*) FROM asset_pending p WHERE p.asset = n.asset) AS pending,
			(SELECT e.created_at FROM asset_event e WHERE e.asset = n.asset ORDER BY e.id DESC LIMIT 1) AS last_event_at
		FROM names n ORDER BY n.asset`, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("list assets: %w", err)
	}
	return assets, evs, nil
}

// assetEmitSQL is AssetEmit's statement: $1 the asset, $2 the output (NULL for none), $3 who
// emits it. The event is queued for the asset's consumers as the worker's finish queues it.
const assetEmitSQL = `
		WITH e AS (
			INSERT INTO asset_event (asset, output, output_truncated, emitted_by)
			VALUES ($1, left($2, 65536), coalesce(length($2) > 65536, false), $3)
			RETURNING id, asset
		), queued AS (
			INSERT INTO asset_pending (consumer, asset, event_id)
			SELECT c.workflow_name, e.asset, e.id FROM e JOIN asset_consumer c ON c.assets @> ARRAY[e.asset]
		)
		SELECT id FROM e`

// AssetEmit writes an event of asset from outside any task, emitted by by, and wakes the
// masters once it commits. output is nil for none.
func (q *Queries) AssetEmit(ctx context.Context, asset string, output *string, by string) (int64, error) {
	var id int64
	if err := sqlxGet(ctx, q, &id, assetEmitSQL, asset, output, by); err != nil {
		return 0, fmt.Errorf("emit asset %q: %w", asset, err)
	}
	q.wake(q.ch.master, WakeupAssets)
	return id, nil
}

// AssetConsumersPending returns the consumers that have events queued, by name.
func (q *Queries) AssetConsumersPending(ctx context.Context) ([]string, error) {
	var names []string
	err := sqlxSelect(ctx, q, &names, `
		SELECT c.workflow_name FROM asset_consumer c
		WHERE EXISTS (SELECT 1 FROM asset_pending p WHERE p.consumer = c.workflow_name)
		ORDER BY c.workflow_name`)
	if err != nil {
		return nil, fmt.Errorf("list asset consumers with events: %w", err)
	}
	return names, nil
}

// AssetConsumerLock returns the consumer name locked for the rest of the transaction, or nil
// when it is no consumer or another transaction holds it (a master starting its runs): the
// lock is what makes one master at a time take its events.
func (q *Queries) AssetConsumerLock(ctx context.Context, name string) (*AssetConsumer, error) {
	var c AssetConsumer
	err := sqlxGet(ctx, q, &c, `
		SELECT workflow_name, workflow_version, all_of, assets FROM asset_consumer
		WHERE workflow_name = $1 FOR UPDATE SKIP LOCKED`, name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock asset consumer %q: %w", name, err)
	}
	return &c, nil
}

// assetTakeSQL is AssetTake's statement: $1 the consumer, $2 its assets, $3 whether a run
// takes one event of each. It takes the oldest queued event of each asset (all) or the
// oldest of all (any), and only if it has one of each (all).
const assetTakeSQL = `
		WITH heads AS (
			SELECT h.event_id, h.asset FROM unnest($2::text[]) AS a(asset)
			CROSS JOIN LATERAL (
				SELECT p.event_id, p.asset FROM asset_pending p
				WHERE p.consumer = $1 AND p.asset = a.asset
				ORDER BY p.event_id LIMIT 1) h
		), chosen AS (
			SELECT event_id, asset FROM heads
			WHERE $3 AND (SELECT count(*) FROM heads) = cardinality($2::text[])
			UNION ALL
			(SELECT event_id, asset FROM heads WHERE NOT $3 ORDER BY event_id LIMIT 1)
		), taken AS (
			DELETE FROM asset_pending p USING chosen c
			WHERE p.consumer = $1 AND p.asset = c.asset AND p.event_id = c.event_id
			RETURNING p.event_id
		)
		SELECT e.id, e.asset, e.task_instance_id, e.workflow_instance_id, e.output, e.output_truncated,
			e.emitted_by, e.created_at
		FROM asset_event e WHERE e.id IN (SELECT event_id FROM taken)
		ORDER BY e.id`

// AssetTake takes, for one run of the consumer c (locked by AssetConsumerLock), the events
// it starts on out of its queue: the oldest of each of its assets, or the oldest of any. It
// returns none, and takes none, when the queue does not hold enough for a run. The events
// are taken in the caller's transaction: link them to the run with AssetConsume before it
// commits.
func (q *Queries) AssetTake(ctx context.Context, c *AssetConsumer) ([]AssetEvent, error) {
	var evs []AssetEvent
	if err := sqlxSelect(ctx, q, &evs, assetTakeSQL, c.WorkflowName, c.Assets, c.AllOf); err != nil {
		return nil, fmt.Errorf("take asset events of %q: %w", c.WorkflowName, err)
	}
	return evs, nil
}

// AssetConsume records that the run instance of consumer started on events. An event taken
// twice by one consumer violates the primary key: the transaction fails rather than start a
// second run for it.
func (q *Queries) AssetConsume(ctx context.Context, consumer string, events []int64, instance int64) error {
	_, err := q.q.ExecContext(ctx, `
		INSERT INTO asset_consumption (consumer, event_id, workflow_instance_id)
		SELECT $1, e, $3 FROM unnest($2::bigint[]) AS e`, consumer, pq.Array(events), instance)
	if err != nil {
		return fmt.Errorf("record the asset events of run %d of %q: %w", instance, consumer, err)
	}
	return nil
}

// AssetEventsOfRun returns the asset events that started the workflow instance id, oldest
// first; none for a run no asset started.
func (q *Queries) AssetEventsOfRun(ctx context.Context, id int64) ([]AssetEvent, error) {
	var evs []AssetEvent
	err := sqlxSelect(ctx, q, &evs, `
		SELECT e.id, e.asset, e.task_instance_id, e.workflow_instance_id, e.output, e.output_truncated,
			e.emitted_by, e.created_at
		FROM asset_consumption c JOIN asset_event e ON e.id = c.event_id
		WHERE c.workflow_instance_id = $1 ORDER BY e.id`, id)
	if err != nil {
		return nil, fmt.Errorf("asset events of workflow instance %d: %w", id, err)
	}
	return evs, nil
}
