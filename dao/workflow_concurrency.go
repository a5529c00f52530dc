package dao

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/lib/pq"
)

// This file holds the concurrency keys of workflow instances (a workflow's concurrency:,
// migration 00018). An instance with a key is created submitted, without its roots, and a
// master admits it (WorkflowAdmitKeyedIfUnderMax) while fewer than its key's max instances of
// its workflow and key run, and only once every instance of the key submitted before it has
// been admitted. Everything that counts a key's instances and then acts on the count — an
// admission, a submission whose when-full is skip or cancel-oldest, a rerun that reopens an
// ended instance — holds the key's transaction-scoped advisory lock (keyLockAndCount), and
// an admission of a capped workflow takes the workflow's lock (workflowLockAndCount) before
// it, as a creation does: so two masters admitting at once never exceed a max, nor reorder.

// Concurrency is an instance's concurrency key as its submission rendered it, with its
// workflow's max and when-full (workflow.Concurrency).
type Concurrency struct {
	Key string
	// Max is how many instances with the key may run at once.
	Max int
	// WhenFull is KeyQueue, KeySkip or KeyCancelOldest.
	WhenFull string
}

// The when-full policies of a concurrency key, as the workflow file spells them.
const (
	KeyQueue        = "queue"
	KeySkip         = "skip"
	KeyCancelOldest = "cancel-oldest"
)

// ErrKeyFull is returned when a submission's concurrency key already has its max instances
// waiting or running and its when-full is skip: nothing was created. It is ErrWorkflowFull as
// well (errors.Is), so whatever handles a full workflow handles a full key alike.
var ErrKeyFull error = keyFullError{}

type keyFullError struct{}

func (keyFullError) Error() string {
	return "the concurrency key is at its max and its when-full policy is skip"
}

func (keyFullError) Is(target error) bool { return target == ErrWorkflowFull }

// keyCount is what keyCountSQL says of a key.
type keyCount struct {
	Active  int `db:"active"`
	Running int `db:"running"`
	Waiting int `db:"waiting"`
	// Capped says an instance of the key that waits has a max-active-instances.
	Capped bool `db:"capped"`
}

// keyCountSQL counts the instances of workflow $1 with key $2 that wait or run, through
// workflow_instance_key_active: its entries of the key alone. The key's statements test the
// workflow with IS NOT DISTINCT FROM so that no other index serves them (migration 00018).
const keyCountSQL = `
		SELECT count(*) AS active, count(*) FILTER (WHERE state = 'running') AS running,
			count(*) FILTER (WHERE state = 'submitted') AS waiting,
			coalesce(bool_or(state = 'submitted' AND max_active IS NOT NULL), false) AS capped
		FROM workflow_instance
		WHERE concurrency_key = $2 AND workflow_name IS NOT DISTINCT FROM $1 AND state IN ('submitted', 'running')`

// keyLockAndCount takes the admission lock of workflow name's key for the rest of the
// transaction, then counts its instances (as workflowLockAndCount does for a workflow). Keys
// are hashed into the lock's 32 bits: two keys that collide share a lock, which only
// serialises them.
func (q *Queries) keyLockAndCount(ctx context.Context, name, key string) (keyCount, error) {
	if _, err := q.q.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('zksched.key'), hashtext($1 || E'\n' || $2))`,
		name, key); err != nil {
		return keyCount{}, fmt.Errorf("lock key %q of workflow %q: %w", key, name, err)
	}
	return q.keyCount(ctx, name, key)
}

func (q *Queries) keyCount(ctx context.Context, name, key string) (keyCount, error) {
	var c keyCount
	if err := sqlxGet(ctx, q, &c, keyCountSQL, name, key); err != nil {
		return keyCount{}, fmt.Errorf("count instances of key %q of workflow %q: %w", key, name, err)
	}
	return c, nil
}

// oldestActiveOfKeySQL is the cancel-oldest of WorkflowCreate: $1 the workflow, $2 the key,
// $3 how many of its oldest active instances to stop.
const oldestActiveOfKeySQL = `
		SELECT id FROM workflow_instance
		WHERE concurrency_key = $2 AND workflow_name IS NOT DISTINCT FROM $1 AND state IN ('submitted', 'running')
		ORDER BY id LIMIT $3`

// Key is a workflow's concurrency key, with whether an instance of it that waits belongs to a
// capped workflow (max-active-instances): the end of one of those may free a slot for any
// key of its workflow.
type Key struct {
	Workflow string `db:"workflow_name"`
	Key      string `db:"concurrency_key"`
	Capped   bool   `db:"capped"`
}

// WorkflowKeysOf returns the concurrency keys of the instances ids (a wake-up's), once each;
// those without a key have none.
func (q *Queries) WorkflowKeysOf(ctx context.Context, ids []int64) ([]Key, error) {
	var keys []Key
	if err := sqlxSelect(ctx, q, &keys, `
		SELECT workflow_name, concurrency_key, bool_or(max_active IS NOT NULL) AS capped
		FROM workflow_instance WHERE id = ANY($1) AND concurrency_key IS NOT NULL
		GROUP BY workflow_name, concurrency_key ORDER BY workflow_name, concurrency_key`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("read the keys of %d workflow instances: %w", len(ids), err)
	}
	return keys, nil
}

// keysAdmittableSQL is WorkflowKeysAdmittable's statement: $1 the workflow ("" for every one),
// $2 the limit. The first instance waiting of each key (a walk of
// workflow_instance_key_active), kept when its key runs fewer than its max: one probe of the
// same index per key that waits.
const keysAdmittableSQL = `
		SELECT h.workflow_name, h.concurrency_key, h.max_active IS NOT NULL AS capped FROM (
			SELECT DISTINCT ON (concurrency_key, workflow_name) workflow_name, concurrency_key, concurrency_max, max_active
			FROM workflow_instance
			WHERE concurrency_key IS NOT NULL AND state = 'submitted'
			  AND ($1 = '' OR workflow_name IS NOT DISTINCT FROM $1)
			ORDER BY concurrency_key, workflow_name, id
		) h
		WHERE (SELECT count(*) FROM workflow_instance r
			WHERE r.concurrency_key = h.concurrency_key AND r.workflow_name IS NOT DISTINCT FROM h.workflow_name
			  AND r.state = 'running') < h.concurrency_max
		ORDER BY h.concurrency_key, h.workflow_name
		LIMIT $2`

// WorkflowKeysAdmittable returns up to limit keys (of workflow, or of every workflow for "")
// with an instance waiting and fewer instances running than their max: those an admission
// may start one of. It reads every key that has an instance waiting, so the masters run it
// at their polls, not at every wake-up: a wake-up names the instances whose keys to look at
// (WorkflowKeysOf).
func (q *Queries) WorkflowKeysAdmittable(ctx context.Context, workflow string, limit int) ([]Key, error) {
	var keys []Key
	if err := sqlxSelect(ctx, q, &keys, keysAdmittableSQL, workflow, limit); err != nil {
		return nil, fmt.Errorf("list the keys with an instance to admit: %w", err)
	}
	return keys, nil
}

// admitKeyedSQL is the statement of WorkflowAdmitKeyedIfUnderMax: $1 the workflow, $2 the
// key, $3 the owner, $4 how many of the key's instances run, $5 how many of the workflow's
// run (NULL when its lock is not held: then no capped instance is admitted), $6 the limit.
// The key's waiting instances in id order, each admitted only if it and every one before it
// fit under their key's max and their workflow's cap: an instance is never admitted before
// one submitted ahead of it. FOR UPDATE without SKIP LOCKED: a waiting instance a stop holds
// is waited for, never passed over.
const admitKeyedSQL = `
		WITH waiting AS (
			SELECT id, max_active, concurrency_max FROM workflow_instance
			WHERE concurrency_key = $2 AND workflow_name IS NOT DISTINCT FROM $1 AND state = 'submitted' AND owner IS NULL
			ORDER BY id
			LIMIT $6
			FOR UPDATE
		), ranked AS (
			SELECT id, max_active, concurrency_max, row_number() OVER (ORDER BY id) AS k FROM waiting
		), fits AS (
			SELECT id, bool_and($4 + k <= concurrency_max
				AND (max_active IS NULL OR ($5::int IS NOT NULL AND $5::int + k <= max_active)))
				OVER (ORDER BY id) AS ok
			FROM ranked
		)
		-- started_at by the clock, not the transaction's start, which came before the locks:
		-- it is after the end of the instance whose slot it takes (whose ended_at is the
		-- start of the transaction that ended it), so a key's history reads as it happened.
		UPDATE workflow_instance w
		SET owner = $3, state = 'running', started_at = coalesce(w.started_at, clock_timestamp())
		FROM fits WHERE w.id = fits.id AND fits.ok
		RETURNING w.id, w.workflow_name, w.workflow_version, w.state, w.owner, w.params, w.priority,
			w.max_active, w.concurrency_key, w.error, w.created_at, w.started_at, w.ended_at, w.end_reason`

// WorkflowAdmitKeyedIfUnderMax is the transition "admitted" of the instances of one
// concurrency key: in one transaction, under the workflow's lock when an instance of the key
// that waits is capped and then under the key's lock, it makes owner the master of the key's
// first waiting instances, in submit (id) order, while fewer than the key's max instances
// run, and fewer than the workflow's max-active-instances if it has one; at most limit. The
// others keep waiting; the end or the stop of an instance of the key wakes the masters with
// its id (see WakeupKeys) to look again.
func (db *DB) WorkflowAdmitKeyedIfUnderMax(ctx context.Context, owner string, k Key, limit int) ([]WorkflowInstance, error) {
	var got []WorkflowInstance
	err := db.Tx(ctx, func(q *Queries) error {
		// Read before any lock, to know whether the workflow's lock is needed: it comes
		// first. An instance that turns capped meanwhile waits for the next look ($5 NULL).
		pre, err := q.keyCount(ctx, k.Workflow, k.Key)
		if err != nil || pre.Waiting == 0 {
			return err
		}
		var wfRunning any
		if pre.Capped {
			n, err := q.workflowLockAndCount(ctx, k.Workflow, countRunningSQL)
			if err != nil {
				return err
			}
			wfRunning = n
		}
		c, err := q.keyLockAndCount(ctx, k.Workflow, k.Key)
		if err != nil || c.Waiting == 0 {
			return err
		}
		if err := sqlxSelect(ctx, q, &got, admitKeyedSQL, k.Workflow, k.Key, owner, c.Running, wfRunning, limit); err != nil {
			return fmt.Errorf("admit waiting instances of key %q of workflow %q: %w", k.Key, k.Workflow, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

// keyRerunConflict says why the ended instance id, of workflow name with key, may not be
// reopened by a rerun now, or "" if it may: the rerun holds the key's lock from here to its
// commit. Reopened, it runs again at once, so it needs a free slot of its key, and no
// instance of its key may be waiting: that one's turn comes first.
func (q *Queries) keyRerunConflict(ctx context.Context, name, key string, max int) (string, error) {
	c, err := q.keyLockAndCount(ctx, name, key)
	if err != nil {
		return "", err
	}
	switch {
	case c.Running >= max:
		return fmt.Sprintf("its concurrency key %q has %d running of max %d", key, c.Running, max), nil
	case c.Waiting > 0:
		return fmt.Sprintf("its concurrency key %q has %d instances waiting to start first", key, c.Waiting), nil
	}
	return "", nil
}

// WakeupKeys prefixes the masters' payload that names instances whose concurrency keys may
// have an instance to admit ("key:12,40"): one with a key was created, ended or stopped.
const WakeupKeys = "key:"

// ParseWakeupKeys returns the instance ids of a WakeupKeys payload, and whether payload is one.
func ParseWakeupKeys(payload string) ([]int64, bool) {
	rest, ok := strings.CutPrefix(payload, WakeupKeys)
	if !ok {
		return nil, false
	}
	var ids []int64
	for f := range strings.SplitSeq(rest, ",") {
		if id, err := strconv.ParseInt(f, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, true
}

// notifyKeys wakes the masters to admit the next instances of the keys of ids, a few hundred
// ids to a wake-up.
func (q *Queries) notifyKeys(ids []int64) {
	for len(ids) > 0 {
		n := min(len(ids), wakeIDsPerPayload)
		b := []byte(WakeupKeys)
		for i, id := range ids[:n] {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, id, 10)
		}
		q.wake(q.ch.master, string(b))
		ids = ids[n:]
	}
}
