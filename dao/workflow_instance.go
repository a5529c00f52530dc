package dao

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// ErrWorkflowFull is returned when a workflow whose definition says when-full: skip already
// has max-active-instances instances waiting or running: nothing was created.
var ErrWorkflowFull = errors.New("the workflow is at its max-active-instances and its when-full policy is skip")

// createSQL is the statement of WorkflowCreate and of the pool's submitter: it
// creates many instances at once. $1-$5 are the submissions' workflows, versions, params,
// priorities and whether a capped or keyed one is created even when full (Submission.Queue);
// $6 the number (from 1) of the submission each root task instance belongs to, $7-$16 the
// roots' other columns (as taskArrays, without the instance); $17-$19 the submissions'
// concurrency keys (NULL for none), their max, and whether their when-full is other than
// queue; $20 their traceparents, stored in trace_context (the whole array NULL when tracing
// is off). It returns a row per submission whose definition exists: its number, its cap,
// whether its workflow says when-full: skip, whether it has a key, and its instance's id,
// NULL for a capped one with when-full: skip or a keyed one with a when-full other than queue
// (each needs its count under its admission lock; WorkflowCreate does that).
//
// The ids are drawn before the inserts, so every root knows its instance without relying on
// the order an INSERT ... RETURNING gives its rows back.
const createSQL = `
		WITH r AS MATERIALIZED (
			SELECT x.i, x.name, x.version, x.params, x.priority, x.queue, d.name IS NOT NULL AS defined,
			       d.max_active, d.when_full_skip AS skip, d.has_timeout, d.task_count,
			       x.key, x.key_max, x.key_held, x.traceparent
			FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::bool[], $17::text[], $18::int[], $19::bool[],
				$20::text[])
				WITH ORDINALITY AS x(name, version, params, priority, queue, key, key_max, key_held, traceparent, i)
			LEFT JOIN workflow_definition d ON d.name = x.name AND d.version = x.version
		), c AS MATERIALIZED (
			-- With its root tasks an instance starts at once: running, with no owner yet, as
			-- one a failover released; a capped or keyed one waits for admission without them. Every
			-- submission keeps its row (id NULL: not created), so nothing below joins the
			-- submissions with each other: planned for the ten rows the planner assumes of an
			-- array, such a join is a nested loop that compares every submission with every
			-- other, quadratic in the size of a bulk load.
			SELECT r.i, r.name, r.version, r.params, r.priority, r.max_active, r.skip, r.has_timeout, r.task_count,
			       r.defined, r.key, r.key_max, r.traceparent,
			       CASE WHEN r.defined AND (r.queue OR ((r.max_active IS NULL OR NOT r.skip) AND NOT r.key_held))
			            THEN nextval(pg_get_serial_sequence('workflow_instance', 'id')) END AS id,
			       r.defined AND r.max_active IS NULL AND r.key IS NULL AND r.i IN (SELECT unnest($6::bigint[])) AS started
			FROM r
		), created AS (
			INSERT INTO workflow_instance (id, workflow_name, workflow_version, params, priority, max_active,
				has_timeout, task_count, concurrency_key, concurrency_max, trace_sampled, state, started_at)
			SELECT id, name, version, params::jsonb, priority, max_active, has_timeout, task_count, key, key_max,
				traceparent LIKE '%-01', CASE WHEN started THEN 'running' ELSE 'submitted' END, CASE WHEN started THEN now() END
			FROM c WHERE id IS NOT NULL
		), traced AS (
			-- Nothing while tracing is off: $20 is NULL.
			INSERT INTO trace_context (workflow_instance_id, traceparent)
			SELECT id, traceparent FROM c WHERE id IS NOT NULL AND traceparent IS NOT NULL
		), started AS (
			-- The started instances' ids by submission (0: none), which the roots look their
			-- instance up in; without NULLs, so that a subscript does not walk a null bitmap.
			SELECT array_agg(CASE WHEN started THEN id ELSE 0 END ORDER BY i) AS ids FROM c
		), roots AS (
			INSERT INTO task_instance (workflow_instance_id, name, type, params, state, priority,
				worker_group, pool, max_retries, retry_interval, timeout, started_at, wait_until, ended_at)
			SELECT s.ids[x.i], nm, ty, p::jsonb, st, pr, g, pl, rt, rm * interval '1 millisecond',
				tm * interval '1 millisecond', CASE WHEN st = 'waiting' THEN now() END,
				CASE WHEN st = 'waiting' THEN now() + tm * interval '1 millisecond' END,
				CASE WHEN st = 'skipped' THEN now() END
			FROM unnest($6::bigint[], $7::text[], $8::text[], $9::text[], $10::text[], $11::int[],
				$12::text[], $13::text[], $14::int[], $15::bigint[], $16::bigint[])
				AS x(i, nm, ty, p, st, pr, g, pl, rt, rm, tm)
			CROSS JOIN started s
			WHERE s.ids[x.i] <> 0
		)
		SELECT i, max_active, skip, key IS NOT NULL AS keyed, id FROM c WHERE defined`

// Submission is one workflow instance to create with WorkflowCreate or DB.WorkflowCreateGrouped.
type Submission struct {
	Name     string
	Version  int
	Params   json.RawMessage
	Priority int
	// Queue creates a capped instance even when its workflow is full and says when-full:
	// skip, and a keyed one whatever its when-full says (a backfill: every run was asked
	// for): it waits for a slot.
	Queue bool
	// Concurrency, unless nil, is the instance's concurrency key: it is created without its
	// roots and waits for admission (WorkflowAdmitKeyedIfUnderMax).
	Concurrency *Concurrency
	// Roots are the instance's root task instances (their WorkflowInstanceID is ignored),
	// created with it unless its definition has max-active-instances or it has a key.
	Roots []NewTask
	// Audit, unless nil, is the submission's audit_event row, committed with the instance;
	// its Target is set to the instance ("workflow-instance/<id>").
	Audit *AuditEvent
	// Traceparent is the instance's trace context (W3C traceparent, see migration 00023);
	// empty takes one from the DB's TraceStart, or none while tracing is off.
	Traceparent string
}

// created is what createSQL says of one submission.
type created struct {
	I         int    `db:"i"`
	MaxActive *int   `db:"max_active"`
	Skip      bool   `db:"skip"`
	Keyed     bool   `db:"keyed"`
	ID        *int64 `db:"id"`
}

// createMany runs createSQL for subs and returns, for each, its row (nil: no such definition).
func (q *Queries) createMany(ctx context.Context, subs []Submission) ([]*created, error) {
	n := len(subs)
	var rows []created
	q.traced(subs)
	if err := selectHot(ctx, q, &rows, createSQL, createArgs(subs)...); err != nil {
		return nil, err
	}
	out := make([]*created, n)
	for i := range rows {
		if r := &rows[i]; r.I >= 1 && r.I <= n {
			out[r.I-1] = r
		}
	}
	return out, nil
}

// createArgs are createSQL's parameters for subs.
func createArgs(subs []Submission) []any {
	n := len(subs)
	names, versions, params := make([]string, n), make([]int64, n), make([]string, n)
	prios, queue := make([]int64, n), make([]bool, n)
	keys, keyMax, keyHeld := make([]*string, n), make([]*int64, n), make([]bool, n)
	var roots []NewTask
	var owners []int64
	for i, s := range subs {
		names[i], versions[i], prios[i], queue[i] = s.Name, int64(s.Version), int64(s.Priority), s.Queue
		params[i] = "{}"
		if len(s.Params) > 0 {
			params[i] = string(s.Params)
		}
		if k := s.Concurrency; k != nil {
			m := int64(k.Max)
			keys[i], keyMax[i], keyHeld[i] = &k.Key, &m, k.WhenFull != KeyQueue
		}
		for _, r := range s.Roots {
			roots, owners = append(roots, r), append(owners, int64(i+1))
		}
	}
	args := append([]any{pq.Array(names), pq.Array(versions), pq.Array(params), pq.Array(prios), pq.Array(queue),
		pq.Array(owners)}, taskArrays(roots)[1:]...)
	return append(args, pq.Array(keys), pq.Array(keyMax), pq.Array(keyHeld), traceparentArray(subs))
}

// traceparentArray is createSQL's $20: the submissions' traceparents, NULL for those without
// one, and a NULL array (nothing built) when none has one, as with tracing off.
func traceparentArray(subs []Submission) any {
	var tps []*string
	for i, s := range subs {
		if s.Traceparent == "" {
			continue
		}
		if tps == nil {
			tps = make([]*string, len(subs))
		}
		tps[i] = &subs[i].Traceparent
	}
	if tps == nil {
		return nil
	}
	return pq.Array(tps)
}

// traced gives each of subs without a traceparent one from the DB's TraceStart (SetTraceStart);
// it does nothing while none is set, which is tracing off.
func (q *Queries) traced(subs []Submission) {
	if q.traceStart == nil {
		return
	}
	for i := range subs {
		if subs[i].Traceparent == "" {
			subs[i].Traceparent = q.traceStart()
		}
	}
}

// notifyCreated wakes the masters for an instance created as c says, and the workers of the
// groups of its queued roots if it started with them.
func (q *Queries) notifyCreated(c *created, roots []NewTask) {
	if c.Keyed {
		// A keyed instance starts by WorkflowAdmitKeyedIfUnderMax for its key alone.
		q.notifyKeys([]int64{*c.ID})
		return
	}
	if c.MaxActive != nil {
		// A capped instance may only start by WorkflowAdmitIfUnderCap, which the plain wake-up runs.
		q.wake(q.ch.master, "")
		return
	}
	woken := map[string]bool{}
	for _, r := range roots {
		if r.State == TaskQueued && !woken[r.Group] {
			woken[r.Group] = true
			q.wake(q.ch.task, r.Group)
		}
	}
	q.wake(q.ch.master, WakeupNew)
}

// WorkflowCreate is the transition "created": an instance of a stored definition, with, in
// the same statement, its root task instances (those without dependencies; every row's
// WorkflowInstanceID is ignored). With roots the instance is running at once, without an
// owner, and the workers of the roots' groups are woken with the masters; no master takes it
// until a task of it ends (see WorkflowLockUnowned), unless its workflow has a timeout
// (WorkflowClaimUnowned). Without roots it is submitted, for the first master's claim. Call it
// in the transaction that ensured the definition; package lifecycle computes the roots.
// sub.Audit, unless nil, is written with the instance.
//
// The instance takes its max-active-instances from the definition, and a definition with one
// takes no roots: its instance waits for admission (WorkflowAdmitIfUnderCap), which creates
// them. When the definition also says when-full: skip and the workflow is full, nothing is
// created and the error wraps ErrWorkflowFull, unless sub.Queue is set (a backfill: every run
// was asked for, so the instance waits for a slot). The count is exact because creators and
// admitters of one workflow hold the same transaction-scoped advisory lock.
//
// An instance with a concurrency key (sub.Concurrency) takes no roots either: it waits for
// WorkflowAdmitKeyedIfUnderMax. When its key already has Max instances active (waiting or
// running), when-full: skip creates nothing (the error is ErrKeyFull, which is also
// ErrWorkflowFull), and when-full: cancel-oldest stops the oldest of them (WorkflowStopIfActive's
// transition, with its audit row) in this transaction, so the new one takes a slot; the count
// is exact under the key's lock, which admissions and reruns of the key hold too. With
// sub.Queue, a keyed instance waits whatever its when-full says.
func (q *Queries) WorkflowCreate(ctx context.Context, sub Submission) (int64, error) {
	if len(sub.Params) == 0 {
		sub.Params = json.RawMessage("{}")
	}
	name, version := sub.Name, sub.Version
	subs := []Submission{sub}
	q.traced(subs)
	sub.Traceparent = subs[0].Traceparent
	// One statement in the common case: the instance, with its cap read from the definition.
	// A submission that is refused or stops others when full needs its count under the
	// admission lock first, so for it (unless queue) the statement creates nothing and
	// createWhenFull does.
	got, err := q.createMany(ctx, subs)
	if err != nil {
		return 0, fmt.Errorf("create workflow instance of %q version %d: %w", name, version, err)
	}
	c := got[0]
	if c == nil {
		return 0, fmt.Errorf("create workflow instance of %q version %d: no such definition stored: %w", name, version, sql.ErrNoRows)
	}
	if c.ID == nil {
		if c.ID, err = q.createWhenFull(ctx, sub, c); err != nil {
			return 0, err
		}
	}
	q.notifyCreated(c, sub.Roots)
	if sub.Audit != nil {
		ev := *sub.Audit
		ev.Target = fmt.Sprintf("workflow-instance/%d", *c.ID)
		if err := q.AuditInsert(ctx, ev); err != nil {
			return 0, err
		}
	}
	return *c.ID, nil
}

// createWhenFull creates the instance of sub that createSQL left to it (c): under the
// workflow's lock when its cap says when-full: skip, under its key's lock when its key's
// when-full is skip or cancel-oldest, in that order (the admissions' order).
func (q *Queries) createWhenFull(ctx context.Context, sub Submission, c *created) (*int64, error) {
	name := sub.Name
	if c.MaxActive != nil && c.Skip && !sub.Queue {
		n, err := q.workflowLockAndCount(ctx, name, countActiveSQL)
		if err != nil {
			return nil, err
		}
		if n >= *c.MaxActive {
			return nil, fmt.Errorf("create workflow instance of %q: %d active of max-active-instances %d: %w",
				name, n, *c.MaxActive, ErrWorkflowFull)
		}
	}
	var cancel []int64
	var key, keyMax any
	if k := sub.Concurrency; k != nil {
		key, keyMax = k.Key, k.Max
		if k.WhenFull != KeyQueue && !sub.Queue {
			st, err := q.keyLockAndCount(ctx, name, k.Key)
			if err != nil {
				return nil, err
			}
			if st.Active >= k.Max {
				if k.WhenFull == KeySkip {
					return nil, fmt.Errorf("create workflow instance of %q: concurrency key %q has %d active of max %d: %w",
						name, k.Key, st.Active, k.Max, ErrKeyFull)
				}
				if err := sqlxSelect(ctx, q, &cancel, oldestActiveOfKeySQL, name, k.Key, st.Active-k.Max+1); err != nil {
					return nil, fmt.Errorf("find the oldest instances of key %q of workflow %q: %w", k.Key, name, err)
				}
			}
		}
	}
	id := new(int64)
	err := sqlxGet(ctx, q, id, `
		WITH created AS (
			INSERT INTO workflow_instance (workflow_name, workflow_version, params, priority, max_active,
				has_timeout, task_count, concurrency_key, concurrency_max, trace_sampled)
			SELECT $1, $2, $3::jsonb, $4, $5, d.has_timeout, d.task_count, $6, $7, NULLIF($8, '') LIKE '%-01'
			FROM workflow_definition d WHERE d.name = $1 AND d.version = $2 RETURNING id
		), traced AS (
			INSERT INTO trace_context (workflow_instance_id, traceparent)
			SELECT id, $8 FROM created WHERE $8 <> ''
		)
		SELECT id FROM created`,
		name, sub.Version, string(sub.Params), sub.Priority, c.MaxActive, key, keyMax, sub.Traceparent)
	if err != nil {
		return nil, fmt.Errorf("create workflow instance of %q version %d: %w", name, sub.Version, err)
	}
	for _, old := range cancel {
		ev := AuditEvent{Actor: "zksched", Role: "system"}
		if sub.Audit != nil {
			ev = AuditEvent{Actor: sub.Audit.Actor, Role: sub.Audit.Role, Client: sub.Audit.Client}
		}
		ev.Action, ev.Target = AuditWorkflowStop, fmt.Sprintf("workflow-instance/%d", old)
		ev.Params = AuditParams(map[string]any{"reason": "when-full: cancel-oldest",
			"key": sub.Concurrency.Key, "by": fmt.Sprintf("workflow-instance/%d", *id)})
		msg := fmt.Sprintf("stopped: workflow instance %d was submitted with the same concurrency key %q (when-full: cancel-oldest)", *id, sub.Concurrency.Key)
		if _, err := q.workflowStopIfActive(ctx, old, msg, EndCancelOldest, &ev); err != nil {
			return nil, err
		}
	}
	return id, nil
}

// workflowLockAndCount takes the workflow's admission lock for the rest of the transaction and
// then counts its instances with count (countActiveSQL or countRunningSQL). The count is a
// statement of its own, after the lock, so it sees every instance a previous holder committed.
func (q *Queries) workflowLockAndCount(ctx context.Context, name, count string) (int, error) {
	if _, err := q.q.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('zksched.workflow'), hashtext($1))`, name); err != nil {
		return 0, fmt.Errorf("lock workflow %q: %w", name, err)
	}
	var n int
	if err := sqlxGet(ctx, q, &n, count, name); err != nil {
		return 0, fmt.Errorf("count instances of workflow %q: %w", name, err)
	}
	return n, nil
}

// countActiveSQL counts the instances of workflow $1 that wait or run: a when-full: skip
// creation's count.
const countActiveSQL = `SELECT count(*) FROM workflow_instance
		WHERE workflow_name = $1 AND state IN ('submitted', 'running')`

// countRunningSQL counts the running instances of workflow $1: an admission's count.
const countRunningSQL = `SELECT count(*) FROM workflow_instance
		WHERE workflow_name = $1 AND state = 'running'`

// claimUnownedSQL is WorkflowClaimUnowned's statement: $1 the owner, $2 the limit. Its
// condition is workflow_instance_claimable's (migration 00006). The instances it locks get
// owner $1 and are returned with running_ms, their age by the database's clock, and fresh,
// whether they had never started; WorkflowClaimStranded ends the same way
// (TestStatementColumnsMatchTheirStructs).
const claimUnownedSQL = `
		WITH locked AS (
			-- Read under the row lock, so from the latest version: an instance that never
			-- started has no task instances (a submission that queues the roots starts it;
			-- otherwise only its owner creates them, after this claim).
			SELECT id, started_at IS NULL AS fresh FROM workflow_instance
			WHERE owner IS NULL
			  AND ((state = 'submitted' AND max_active IS NULL AND concurrency_key IS NULL)
			       OR (state = 'running' AND has_timeout))
			ORDER BY priority DESC, id
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		)
		UPDATE workflow_instance w
		SET owner = $1, state = 'running', started_at = coalesce(w.started_at, now())
		-- By primary key: a join with locked is planned as a hash join over a scan of the
		-- whole table once a backlog makes the claim look big.
		WHERE w.id = ANY(ARRAY(SELECT id FROM locked))
		RETURNING w.id, w.workflow_name, w.workflow_version, w.state, w.owner, w.params, w.priority,
			w.max_active, w.concurrency_key, w.error, w.created_at, w.started_at, w.ended_at, w.end_reason,
			(extract(epoch FROM now() - w.started_at) * 1000)::bigint AS running_ms,
			w.id = ANY(ARRAY(SELECT id FROM locked WHERE fresh)) AS fresh`

// WorkflowClaimUnowned makes owner the master of up to limit unowned instances that need a
// master whatever their tasks do, highest priority first, with SKIP LOCKED so masters
// claiming at once never take the same instance: new instances without root tasks (those
// with a max-active-instances or a concurrency key are left to the admissions) and running ones whose
// workflow has a timeout, which their owner enforces. A running instance without one is left
// until a task of it ends (WorkflowLockUnowned) or the sweep finds it stranded
// (WorkflowClaimStranded).
func (q *Queries) WorkflowClaimUnowned(ctx context.Context, owner string, limit int) ([]WorkflowInstance, error) {
	var wfs []WorkflowInstance
	err := selectHot(ctx, q, &wfs, claimUnownedSQL, owner, limit)
	if err != nil {
		return nil, fmt.Errorf("claim workflow instances for %s: %w", owner, err)
	}
	return wfs, nil
}

// sweepRangeSQL is WorkflowSweepRange's statement: $1 the id to start after, $2 the slice.
const sweepRangeSQL = `
		SELECT coalesce(max(id), 0) AS upto, count(*) AS n FROM (
			SELECT id FROM workflow_instance
			WHERE owner IS NULL AND state = 'running' AND id > $1
			ORDER BY id LIMIT $2) s`

// WorkflowSweepRange returns the next slice of the sweep (WorkflowClaimStranded): the unowned
// running instances with ids above after, up to limit of them, as the last id of the slice
// and how many it holds. Fewer than limit means the sweep reached the end.
func (q *Queries) WorkflowSweepRange(ctx context.Context, after int64, limit int) (upto int64, n int, err error) {
	var r struct {
		Upto int64 `db:"upto"`
		N    int   `db:"n"`
	}
	if err := getHot(ctx, q, &r, sweepRangeSQL, after, limit); err != nil {
		return 0, 0, fmt.Errorf("sweep range after %d: %w", after, err)
	}
	return r.Upto, r.N, nil
}

// claimStrandedSQL is WorkflowClaimStranded's statement: $1 the owner, ids in ($2, $3]. Its
// "interval '5 seconds'" is StrandedAfter (TestStrandedIntervalIsStrandedAfter); it ends as
// claimUnownedSQL does.
const claimStrandedSQL = `
		WITH locked AS (
			SELECT id, false AS fresh FROM workflow_instance w
			WHERE owner IS NULL AND state = 'running' AND id > $2 AND id <= $3
			  -- Probed by task_instance_workflow_instance_id_name_key alone: with "state IN",
			  -- the planner would AND it with task_instance_listed_state_id, whose queued
			  -- entries (a whole backlog) it would then read for every instance.
			  -- A task that ended in the last StrandedAfter is still on its way to a master by
			  -- its wake-up: taking its instance here would only race that, an extra write for
			  -- an instance claimed twice over. An instance that started less than that ago
			  -- has either a live task or one that ended since: its tasks need no probe, so a
			  -- master that starts on a fresh backlog does not probe all of it. A for-each
			  -- task's parent waits for its items, which its master creates and ends it after:
			  -- it is live through its items alone, so an instance whose items' last wake-up
			  -- was missed is taken here.
			  AND w.started_at < now() - interval '5 seconds'
			  AND NOT EXISTS (SELECT 1 FROM task_instance t WHERE t.workflow_instance_id = w.id
			                  AND (t.state IS NOT DISTINCT FROM 'queued' OR t.state IS NOT DISTINCT FROM 'running'
			                       OR (t.state IS NOT DISTINCT FROM 'waiting' AND t.item_count IS NULL)
			                       OR t.ended_at > now() - interval '5 seconds'))
			FOR UPDATE SKIP LOCKED
		)
		UPDATE workflow_instance w
		SET owner = $1, state = 'running', started_at = coalesce(w.started_at, now())
		-- By primary key: a join with locked is planned as a hash join over a scan of the
		-- whole table once a backlog makes the claim look big.
		WHERE w.id = ANY(ARRAY(SELECT id FROM locked))
		RETURNING w.id, w.workflow_name, w.workflow_version, w.state, w.owner, w.params, w.priority,
			w.max_active, w.concurrency_key, w.error, w.created_at, w.started_at, w.ended_at, w.end_reason,
			(extract(epoch FROM now() - w.started_at) * 1000)::bigint AS running_ms,
			w.id = ANY(ARRAY(SELECT id FROM locked WHERE fresh)) AS fresh`

// StrandedAfter is how long after its last task ended an unowned running instance counts as
// stranded (WorkflowClaimStranded): until then its wake-up may still be on its way.
const StrandedAfter = 5 * time.Second

// WorkflowClaimStranded makes owner the master of the unowned running instances with ids in
// (after, upto] that have had no task queued, running or waiting (a for-each task's parent
// counts through its items alone) for StrandedAfter: those whose last
// task ended when no master heard of it (none was listening, or its worker died between its commit and the
// wake-up). The masters sweep the unowned running instances with it a slice at a time (see
// WorkflowSweepRange), so its cost per call is bounded whatever the backlog. An instance
// stranded only for a moment (a task of it was being requeued) is claimed all the same; its
// owner then finds nothing to do until that task ends. One that started less than
// StrandedAfter ago is left to a later step, unprobed.
func (q *Queries) WorkflowClaimStranded(ctx context.Context, owner string, after, upto int64) ([]WorkflowInstance, error) {
	var wfs []WorkflowInstance
	if err := selectHot(ctx, q, &wfs, claimStrandedSQL, owner, after, upto); err != nil {
		return nil, fmt.Errorf("claim stranded workflow instances for %s: %w", owner, err)
	}
	return wfs, nil
}

// lockUnownedSQL is WorkflowLockUnowned's statement: $1 the ids. Owner and state are tested
// with IS NOT DISTINCT FROM so that the planner reads the rows by primary key (see
// lockManySQL) rather than through workflow_instance_unowned_running.
const lockUnownedSQL = `
		-- One probe of the primary key per id, whatever the statistics say (see
		-- listByWorkflowsSQL); SKIP LOCKED never waits, so the order cannot deadlock.
		SELECT w.* FROM unnest($1::bigint[]) AS x(id) CROSS JOIN LATERAL (
			SELECT w.id, w.workflow_name, w.workflow_version, w.state, w.owner, w.params, w.priority,
				w.max_active, w.concurrency_key, w.error, w.created_at, w.started_at, w.ended_at, w.end_reason,
				(extract(epoch FROM now() - w.started_at) * 1000)::bigint AS running_ms
			FROM workflow_instance w
			WHERE w.id = x.id AND w.owner IS NOT DISTINCT FROM NULL AND w.state IS NOT DISTINCT FROM 'running'
			FOR NO KEY UPDATE SKIP LOCKED) w`

// WorkflowLockUnowned locks, for the rest of the transaction, those of ids that are running
// without an owner (started with their root tasks, released by a failover, or reopened by a
// rerun), skipping any another master holds: a master locks these when a task of theirs
// ended, to advance them at once. It writes nothing: the advance that follows either
// finishes an instance (WorkflowFinishManyIfOwnedOrUnowned, which sets the owner with the end) or
// makes this master its owner (WorkflowTakeIfUnowned). None of them is Fresh.
func (q *Queries) WorkflowLockUnowned(ctx context.Context, ids []int64) ([]WorkflowInstance, error) {
	var wfs []WorkflowInstance
	if err := selectHot(ctx, q, &wfs, lockUnownedSQL, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("lock %d unowned workflow instances: %w", len(ids), err)
	}
	return wfs, nil
}

// WorkflowTakeIfUnowned makes owner the master of those of ids that are still unowned, in the
// transaction that locked them with WorkflowLockUnowned.
func (q *Queries) WorkflowTakeIfUnowned(ctx context.Context, owner string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.q.ExecContext(ctx, `UPDATE workflow_instance SET owner = $1
		WHERE id = ANY($2) AND owner IS NOT DISTINCT FROM NULL`, owner, pq.Array(ids)); err != nil {
		return fmt.Errorf("take %d workflow instances for %s: %w", len(ids), owner, err)
	}
	return nil
}

// WorkflowReleaseIfOwned clears the owner of those of ids that owner drives and that still
// run, in the transaction of the advance that found them only waiting: the end of a wait
// wakes the masters with the instance, as the end of a task does, and any of them advances
// it then (WorkflowLockUnowned).
func (q *Queries) WorkflowReleaseIfOwned(ctx context.Context, owner string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.q.ExecContext(ctx, `UPDATE workflow_instance SET owner = NULL
		WHERE id = ANY($2) AND owner = $1 AND state = 'running'`, owner, pq.Array(ids)); err != nil {
		return fmt.Errorf("release %d waiting workflow instances of %s: %w", len(ids), owner, err)
	}
	return nil
}

// WorkflowAdmitIfUnderCap makes owner the master of the new instances of capped workflows
// (max-active-instances) that fit under their caps: for each such workflow, under its
// admission lock, the waiting instances in priority and then creation order while fewer than
// max_active instances of the workflow run. Those with a concurrency key are left to
// WorkflowAdmitKeyedIfUnderMax, which keeps them in their key's order. The others keep waiting; a finishing instance
// wakes the masters to look again. Each workflow is one transaction, so masters admitting at
// once never exceed a cap.
func (db *DB) WorkflowAdmitIfUnderCap(ctx context.Context, owner string, limit int) ([]WorkflowInstance, error) {
	var names []string
	if err := sqlxSelect(ctx, db.Queries, &names, `SELECT DISTINCT workflow_name FROM workflow_instance
		WHERE owner IS NULL AND state = 'submitted' AND max_active IS NOT NULL AND concurrency_key IS NULL`); err != nil {
		return nil, fmt.Errorf("list waiting workflow instances: %w", err)
	}
	var all []WorkflowInstance
	for _, name := range names {
		var got []WorkflowInstance
		err := db.Tx(ctx, func(q *Queries) error {
			running, err := q.workflowLockAndCount(ctx, name, countRunningSQL)
			if err != nil {
				return err
			}
			err = sqlxSelect(ctx, q, &got, admitSQL, name, owner, limit, running)
			if err != nil {
				return fmt.Errorf("admit waiting instances of workflow %q: %w", name, err)
			}
			return nil
		})
		if err != nil {
			return all, err
		}
		all = append(all, got...)
	}
	return all, nil
}

// admitSQL is the statement of WorkflowAdmitIfUnderCap for one workflow: $1 the workflow,
// $2 the owner, $3 the limit, $4 how many of its instances run.
const admitSQL = `
		WITH waiting AS (
			SELECT id, priority, max_active FROM workflow_instance
			WHERE workflow_name = $1 AND owner IS NULL AND state = 'submitted' AND max_active IS NOT NULL
			  AND concurrency_key IS NULL
			ORDER BY priority DESC, id
			LIMIT $3
			FOR UPDATE SKIP LOCKED
		), ranked AS (
			SELECT id, max_active, row_number() OVER (ORDER BY priority DESC, id) AS k FROM waiting
		)
		UPDATE workflow_instance w
		SET owner = $2, state = 'running', started_at = coalesce(w.started_at, now())
		FROM ranked WHERE w.id = ranked.id AND $4 + ranked.k <= ranked.max_active
		RETURNING w.id, w.workflow_name, w.workflow_version, w.state, w.owner, w.params, w.priority,
			w.max_active, w.concurrency_key, w.error, w.created_at, w.started_at, w.ended_at, w.end_reason`

// WorkflowListOwnedActive returns the ids of the running workflow instances owner drives.
func (q *Queries) WorkflowListOwnedActive(ctx context.Context, owner string) ([]int64, error) {
	var ids []int64
	if err := sqlxSelect(ctx, q, &ids, `SELECT id FROM workflow_instance
		WHERE owner = $1 AND state IN ('submitted', 'running') ORDER BY id`, owner); err != nil {
		return nil, fmt.Errorf("list workflow instances of %s: %w", owner, err)
	}
	return ids, nil
}

// lockIfOwnedSQL is WorkflowLockIfOwned's statement: $1 the instance, $2 the owner.
const lockIfOwnedSQL = `
		SELECT id, workflow_name, workflow_version, state, owner, params, priority, max_active, concurrency_key, error,
			created_at, started_at, ended_at, end_reason
		FROM workflow_instance
		WHERE id = $1 AND owner = $2 AND state = 'running' FOR NO KEY UPDATE`

// WorkflowLockIfOwned locks a running workflow instance owned by owner for the rest of the
// transaction, so a failover that releases it waits until the advance commits. It returns
// ErrNotOwner when owner no longer drives it or it has finished.
func (q *Queries) WorkflowLockIfOwned(ctx context.Context, id int64, owner string) (*WorkflowInstance, error) {
	var wf WorkflowInstance
	err := sqlxGet(ctx, q, &wf, lockIfOwnedSQL, id, owner)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("workflow instance %d: %w", id, ErrNotOwner)
	}
	if err != nil {
		return nil, fmt.Errorf("lock workflow instance %d: %w", id, err)
	}
	return &wf, nil
}

// WorkflowFinishIfOwned moves a running workflow instance owned by owner to a terminal state.
// If the instance is a child, its parent task ends with it (TaskEndIfChildEnded), with no
// output.
func (q *Queries) WorkflowFinishIfOwned(ctx context.Context, id int64, owner string, state WorkflowState, errMsg string) error {
	return q.workflowFinishIfOwned(ctx, id, owner, state, errMsg, "")
}

// workflowFinishIfOwned is WorkflowFinishIfOwned with the end's reason why ("" for none: an
// end by its tasks' ends).
func (q *Queries) workflowFinishIfOwned(ctx context.Context, id int64, owner string, state WorkflowState, errMsg string, why EndReason) error {
	var e *string
	if errMsg != "" {
		e = &errMsg
	}
	var ended []struct {
		Capped bool `db:"capped"`
		Keyed  bool `db:"keyed"`
		Child  bool `db:"child"`
	}
	err := sqlxSelect(ctx, q, &ended, `
		UPDATE workflow_instance SET state = $3, error = $4, ended_at = now(), end_reason = nullif($5, '')::end_reason
		WHERE id = $1 AND owner = $2 AND state = 'running'
		RETURNING max_active IS NOT NULL AS capped, concurrency_key IS NOT NULL AS keyed,
			parent_task_instance_id IS NOT NULL AS child`,
		id, owner, string(state), e, string(why))
	if err != nil {
		return fmt.Errorf("finish workflow instance %d: %w", id, err)
	}
	if len(ended) == 0 {
		return fmt.Errorf("finish workflow instance %d: %w", id, ErrNotOwner)
	}
	// A capped workflow, or the instance's key, has a free slot now: wake the masters to
	// admit a waiting instance.
	if ended[0].Keyed {
		q.notifyKeys([]int64{id})
	}
	if ended[0].Capped {
		q.wake(q.ch.master, "")
	}
	if ended[0].Child {
		return q.endParentsOf(ctx, []int64{id}, nil)
	}
	return nil
}

// WorkflowTimeOutIfOwned fails a running workflow instance owned by owner that has run past
// its timeout, in the transaction of the master's advance: the instance ends failed with
// errMsg, its queued and waiting task instances are killed and the workers of its running
// ones are asked to kill them (kill_requested, as an operator's stop does), and the children
// its workflow tasks started are stopped. If it is a child, its parent task fails with it. It
// returns how many running tasks were asked to stop.
func (q *Queries) WorkflowTimeOutIfOwned(ctx context.Context, id int64, owner, errMsg string) (int, error) {
	if err := q.workflowFinishIfOwned(ctx, id, owner, WorkflowFailed, errMsg, EndTimeout); err != nil {
		return 0, err
	}
	workers := map[string]bool{}
	r, children, err := q.killTasksOf(ctx, []int64{id}, "killed: "+errMsg, EndWorkflowTimeout, workers)
	if err != nil {
		return 0, err
	}
	for i := range children {
		children[i].Reason = fmt.Sprintf("stopped: its parent workflow instance %d timed out", id)
	}
	sub, err := q.workflowStopChildren(ctx, children, workers)
	if err != nil {
		return 0, err
	}
	for w := range workers {
		if _, err := q.q.ExecContext(ctx, `SELECT pg_notify($1, $2)`, q.ch.kill, w); err != nil {
			return 0, fmt.Errorf("wake worker %s: %w", w, err)
		}
	}
	return r.KillRequested + sub.KillRequested, nil
}

// workflowGetSQL is WorkflowGet's statement: $1 the instance.
const workflowGetSQL = `
		SELECT id, workflow_name, workflow_version, state, owner, params, priority, max_active, concurrency_key, error,
			created_at, started_at, ended_at, end_reason
		FROM workflow_instance WHERE id = $1`

// WorkflowGet returns one workflow instance.
func (q *Queries) WorkflowGet(ctx context.Context, id int64) (*WorkflowInstance, error) {
	var wf WorkflowInstance
	if err := sqlxGet(ctx, q, &wf, workflowGetSQL, id); err != nil {
		return nil, fmt.Errorf("get workflow instance %d: %w", id, err)
	}
	return &wf, nil
}

// lockManySQL is WorkflowLockManyIfOwned's statement: $1 the ids, $2 the owner.
//
// It and finishManyWorkflowsSQL test owner and state with IS NOT DISTINCT FROM, which is "="
// for these non-null values but which no index serves: with "=", the planner reads the rows
// by workflow_instance_owned or _active, every instance the master drives, to pick out the
// hundred it asked for. The primary key is then the only way in.
const lockManySQL = `
		SELECT id, workflow_name, workflow_version, state, owner, params, priority, max_active, concurrency_key, error,
			created_at, started_at, ended_at, end_reason,
			(extract(epoch FROM now() - started_at) * 1000)::bigint AS running_ms
		FROM workflow_instance
		WHERE id = ANY($1) AND owner IS NOT DISTINCT FROM $2 AND state IS NOT DISTINCT FROM 'running'
		ORDER BY id FOR NO KEY UPDATE`

// WorkflowLockManyIfOwned is WorkflowLockIfOwned for many instances in one statement: it
// locks, in id order, those of ids that owner still drives and that are running, and returns
// them with RunningMs, their age by the database's clock at the transaction's start (the
// clock their ended_at will be set by). The others are not this master's to advance any more.
func (q *Queries) WorkflowLockManyIfOwned(ctx context.Context, ids []int64, owner string) ([]WorkflowInstance, error) {
	var wfs []WorkflowInstance
	if err := selectHot(ctx, q, &wfs, lockManySQL, pq.Array(ids), owner); err != nil {
		return nil, fmt.Errorf("lock %d workflow instances: %w", len(ids), err)
	}
	return wfs, nil
}

// WorkflowFinish is one instance's end, for WorkflowFinishManyIfOwnedOrUnowned.
type WorkflowFinish struct {
	ID    int64
	State WorkflowState
	Error string
	// Output is the output its parent task gets if the instance is a child that succeeded.
	Output string
}

// finishManyWorkflowsSQL is WorkflowFinishManyIfOwnedOrUnowned's statement: $1 the owner, $2-$4 the
// instances' ids, states and errors.
const finishManyWorkflowsSQL = `
		WITH u AS (
			-- Each instance's state and error are taken from the arrays by its position in
			-- $2, not by a join with them: the join, beside the "id = ANY" that keeps the scan
			-- on the primary key, is planned (generic plan) as a loop over the arrays that
			-- reads every instance of the batch again for each. A position is a search of $2
			-- per row, a few hundred ids at most.
			UPDATE workflow_instance w SET state = ($3::text[])[array_position($2::bigint[], w.id)],
				error = ($4::text[])[array_position($2::bigint[], w.id)], ended_at = now(), owner = $1
			WHERE w.id = ANY($2::bigint[])
			  AND (w.owner IS NOT DISTINCT FROM $1 OR w.owner IS NOT DISTINCT FROM NULL)
			  AND w.state IS NOT DISTINCT FROM 'running'
			RETURNING w.id, w.max_active, w.concurrency_key, w.parent_task_instance_id
		)
		SELECT count(*) AS n, coalesce(bool_or(max_active IS NOT NULL), false) AS capped,
			coalesce(array_agg(id) FILTER (WHERE concurrency_key IS NOT NULL), '{}') AS keyed,
			coalesce(array_agg(id) FILTER (WHERE parent_task_instance_id IS NOT NULL), '{}') AS children FROM u`

// WorkflowFinishManyIfOwnedOrUnowned is WorkflowFinishIfOwned for many instances in one statement,
// which also finishes unowned ones (locked by WorkflowLockUnowned) and makes owner the owner
// of record of each. The parent tasks of those that are children end with them
// (TaskEndIfChildEnded), in the same transaction. It returns how many it finished; call it in
// the transaction that locked them, so that is all.
func (q *Queries) WorkflowFinishManyIfOwnedOrUnowned(ctx context.Context, owner string, fins []WorkflowFinish) (int, error) {
	if len(fins) == 0 {
		return 0, nil
	}
	ids, states, errs := make([]int64, len(fins)), make([]string, len(fins)), make([]*string, len(fins))
	for i, f := range fins {
		ids[i], states[i] = f.ID, string(f.State)
		if f.Error != "" {
			errs[i] = &fins[i].Error
		}
	}
	var res struct {
		N        int           `db:"n"`
		Capped   bool          `db:"capped"`
		Keyed    pq.Int64Array `db:"keyed"`
		Children pq.Int64Array `db:"children"`
	}
	err := getHot(ctx, q, &res, finishManyWorkflowsSQL, owner, pq.Array(ids), pq.Array(states), pq.Array(errs))
	if err != nil {
		return 0, fmt.Errorf("finish %d workflow instances: %w", len(fins), err)
	}
	// A capped workflow, or a key, has a free slot now: wake the masters to admit a waiting
	// instance.
	q.notifyKeys(res.Keyed)
	if res.Capped {
		q.wake(q.ch.master, "")
	}
	if len(res.Children) > 0 {
		outputs := make(map[int64]string, len(res.Children))
		for _, f := range fins {
			outputs[f.ID] = f.Output
		}
		if err := q.endParentsOf(ctx, res.Children, outputs); err != nil {
			return 0, err
		}
	}
	return res.N, nil
}
