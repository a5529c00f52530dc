package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// Webhook triggers (migration 00035): trigger_hook, the hooks of the stored definitions, and
// hook_delivery, the deliveries whose signature was verified.

// Hook is a row of trigger_hook: the hook Name runs WorkflowName's WorkflowVersion, the latest
// stored version that declares it.
type Hook struct {
	Name            string    `db:"name" json:"name"`
	WorkflowName    string    `db:"workflow_name" json:"workflow_name"`
	WorkflowVersion int       `db:"workflow_version" json:"workflow_version"`
	Signature       string    `db:"signature" json:"signature"`
	CreatedAt       time.Time `db:"created_at" json:"created_at"`
	UpdatedAt       time.Time `db:"updated_at" json:"updated_at"`
}

// HookTakenError refuses a definition that declares a hook another workflow holds.
type HookTakenError struct {
	Hook, Owner, Workflow string
}

func (e *HookTakenError) Error() string {
	return fmt.Sprintf("hook %q belongs to workflow %q: workflow %q cannot declare it too; give this hook another name, "+
		"or remove it from %q first", e.Hook, e.Owner, e.Workflow, e.Owner)
}

// hookPutSQL is HookPutAll's statement for one hook: $1 the hook, $2 the workflow, $3 its
// version, $4 the signature. A hook of another workflow is left as it is, and no row returned.
const hookPutSQL = `
		INSERT INTO trigger_hook (name, workflow_name, workflow_version, signature)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO UPDATE SET workflow_version = EXCLUDED.workflow_version, signature = EXCLUDED.signature,
			updated_at = now()
		WHERE trigger_hook.workflow_name = EXCLUDED.workflow_name
		RETURNING name`

// HookPutAll makes hooks (name → signature) the hooks of workflow, run at version, and removes
// the workflow's others. A hook another workflow holds refuses the whole change with a
// *HookTakenError (of two workflows claiming a new name at once, the second waits for the
// first's commit and is refused). Call it in the transaction that stores version.
func (q *Queries) HookPutAll(ctx context.Context, workflow string, version int, hooks map[string]string) error {
	names := make([]string, 0, len(hooks))
	for name := range hooks {
		names = append(names, name)
	}
	if _, err := q.q.ExecContext(ctx, `DELETE FROM trigger_hook WHERE workflow_name = $1 AND NOT (name = ANY($2))`,
		workflow, pq.Array(names)); err != nil {
		return fmt.Errorf("remove the hooks %s no longer declares: %w", workflow, err)
	}
	for name, signature := range hooks {
		var got string
		err := sqlxGet(ctx, q, &got, hookPutSQL, name, workflow, version, signature)
		if errors.Is(err, sql.ErrNoRows) {
			var owner string
			if err := sqlxGet(ctx, q, &owner, `SELECT workflow_name FROM trigger_hook WHERE name = $1`, name); err != nil {
				return fmt.Errorf("read the owner of hook %q: %w", name, err)
			}
			return &HookTakenError{Hook: name, Owner: owner, Workflow: workflow}
		}
		if err != nil {
			return fmt.Errorf("store hook %q of %s: %w", name, workflow, err)
		}
	}
	return nil
}

// ErrNoHook is the error of HookGet for a hook no stored definition declares.
var ErrNoHook = errors.New("no such hook")

// HookGet returns the hook called name, or an error wrapping ErrNoHook.
func (q *Queries) HookGet(ctx context.Context, name string) (Hook, error) {
	var h Hook
	err := sqlxGet(ctx, q, &h, `SELECT name, workflow_name, workflow_version, signature, created_at, updated_at
		FROM trigger_hook WHERE name = $1`, name)
	if errors.Is(err, sql.ErrNoRows) {
		return Hook{}, fmt.Errorf("hook %q: %w", name, ErrNoHook)
	}
	if err != nil {
		return Hook{}, fmt.Errorf("get hook %q: %w", name, err)
	}
	return h, nil
}

// The outcomes of a delivery, beside "refused: " and a reason (AuditRefused).
const (
	// HookSubmitted started a run.
	HookSubmitted = "submitted"
	// HookFiltered was accepted, and its hook's filter said no: nothing started.
	HookFiltered = "filtered"
)

// HookDelivery is a row of hook_delivery.
type HookDelivery struct {
	ID   int64  `db:"id" json:"id"`
	Hook string `db:"hook" json:"hook"`
	// DeliveryID is the delivery's id from its hook's dedupe header, nil for none.
	DeliveryID *string   `db:"delivery_id" json:"delivery_id"`
	ReceivedAt time.Time `db:"received_at" json:"received_at"`
	// Outcome is HookSubmitted, HookFiltered, or a refusal (AuditRefused).
	Outcome string `db:"outcome" json:"outcome"`
	// WorkflowInstanceID is the run it started.
	WorkflowInstanceID *int64 `db:"workflow_instance_id" json:"workflow_instance_id"`
	// Client is the address it came from.
	Client string `db:"client" json:"client"`
}

// hookDeliveryRecordSQL is HookDeliveryRecord's statement: $1 the hook, $2 the delivery id, $3
// the outcome, $4 the client, $5 the window in seconds. A row of the id within the window is
// left as it is, and no row returned; an older one is taken over.
const hookDeliveryRecordSQL = `
		INSERT INTO hook_delivery (hook, delivery_id, outcome, client)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT ON CONSTRAINT hook_delivery_once DO UPDATE
			SET received_at = now(), outcome = EXCLUDED.outcome, client = EXCLUDED.client, workflow_instance_id = NULL
		WHERE hook_delivery.received_at < now() - make_interval(secs => $5)
		RETURNING id`

// HookDeliveryRecord records a verified delivery of hook with its outcome and returns its
// row's id, or 0 when the hook has seen deliveryID within window: a duplicate, which must start
// nothing. A nil deliveryID is never a duplicate. Call it in the transaction that submits the
// delivery's run: a second transaction recording the same id waits for this one, and finds
// the id taken once it commits (or free, if it rolls back).
func (q *Queries) HookDeliveryRecord(ctx context.Context, hook string, deliveryID *string, outcome, client string, window time.Duration) (int64, error) {
	var id int64
	err := sqlxGet(ctx, q, &id, hookDeliveryRecordSQL, hook, deliveryID, auditClip(outcome), auditClip(client), window.Seconds())
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("record delivery of hook %q: %w", hook, err)
	}
	return id, nil
}

// HookDeliverySetInstance links the delivery id to the run it started.
func (q *Queries) HookDeliverySetInstance(ctx context.Context, id, instance int64) error {
	if _, err := q.q.ExecContext(ctx, `UPDATE hook_delivery SET workflow_instance_id = $2 WHERE id = $1`, id, instance); err != nil {
		return fmt.Errorf("link delivery %d to instance %d: %w", id, instance, err)
	}
	return nil
}

// HookDeliveryGet returns the delivery of hook whose id is deliveryID: what a duplicate
// duplicates.
func (q *Queries) HookDeliveryGet(ctx context.Context, hook, deliveryID string) (HookDelivery, error) {
	var d HookDelivery
	err := sqlxGet(ctx, q, &d, `SELECT id, hook, delivery_id, received_at, outcome, workflow_instance_id, client
		FROM hook_delivery WHERE hook = $1 AND delivery_id = $2`, hook, deliveryID)
	if err != nil {
		return HookDelivery{}, fmt.Errorf("get delivery %q of hook %q: %w", deliveryID, hook, err)
	}
	return d, nil
}

// HookDeliveries returns the latest limit deliveries of each hook of hooks, newest first.
func (q *Queries) HookDeliveries(ctx context.Context, hooks []string, limit int) (map[string][]HookDelivery, error) {
	var rows []HookDelivery
	err := sqlxSelect(ctx, q, &rows, `SELECT d.id, d.hook, d.delivery_id, d.received_at, d.outcome, d.workflow_instance_id, d.client
		FROM unnest($1::text[]) AS h(name)
		CROSS JOIN LATERAL (SELECT * FROM hook_delivery WHERE hook = h.name ORDER BY id DESC LIMIT $2) d
		ORDER BY d.hook, d.id DESC`, pq.Array(hooks), limit)
	if err != nil {
		return nil, fmt.Errorf("list hook deliveries: %w", err)
	}
	out := make(map[string][]HookDelivery, len(hooks))
	for _, d := range rows {
		out[d.Hook] = append(out[d.Hook], d)
	}
	return out, nil
}

// HookList returns every hook, by name.
func (q *Queries) HookList(ctx context.Context) ([]Hook, error) {
	var hooks []Hook
	if err := sqlxSelect(ctx, q, &hooks, `SELECT name, workflow_name, workflow_version, signature, created_at, updated_at
		FROM trigger_hook ORDER BY name`); err != nil {
		return nil, fmt.Errorf("list hooks: %w", err)
	}
	return hooks, nil
}

// HookDeliveryRefuse records a verified delivery of hook whose run was refused (outcome is
// AuditRefused's), without its id: the sender's retry, once the cause is fixed, is no
// duplicate.
func (q *Queries) HookDeliveryRefuse(ctx context.Context, hook, outcome, client string) error {
	if _, err := q.q.ExecContext(ctx, `INSERT INTO hook_delivery (hook, outcome, client) VALUES ($1, $2, $3)`,
		hook, auditClip(outcome), auditClip(client)); err != nil {
		return fmt.Errorf("record refused delivery of hook %q: %w", hook, err)
	}
	return nil
}

// purgeHookDeliveriesSQL is PurgeHookDeliveries' statement: $1 the retention in seconds, $2 the
// batch.
const purgeHookDeliveriesSQL = `
		WITH doomed AS (
			SELECT id FROM hook_delivery
			WHERE received_at < now() - make_interval(secs => $1)
			ORDER BY id
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		), gone AS (
			DELETE FROM hook_delivery WHERE id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING 1
		)
		SELECT count(*) FROM gone`

// PurgeHookDeliveries deletes up to batch hook deliveries received more than keep ago and
// returns how many it deleted. A purged delivery's id is forgotten: the leader's retention
// keeps them at least the dedupe window.
func (db *DB) PurgeHookDeliveries(ctx context.Context, keep time.Duration, batch int) (int64, error) {
	return db.purgeBatch(ctx, purgeHookDeliveriesSQL, "purge hook deliveries", keep, batch)
}
