package dao

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lib/pq"
)

// The audit trail. Every change made through the API, the UI or the CLI inserts its
// audit_event row with AuditInsert on the Queries of the transaction that makes the change,
// so that the change and its record commit together or not at all: a change whose record
// cannot be written does not happen. A refused attempt is recorded apart, on the pool, since
// its transaction rolled back (AuditRefusal), and folded: the refusals of one actor, action
// and outcome within a minute are one row with their count. Nothing here deletes a row or
// updates one but for that count.
//
// Every text a client can choose (actor, target, outcome) is clipped to maxAuditText bytes
// with the hash of what was cut (auditClip), so a row always fits its indexes and is always
// written, whatever the request held.

// The actions recorded in audit_event.
const (
	AuditDefinitionStore = "definition.store"
	AuditWorkflowSubmit  = "workflow.submit"
	AuditTaskKill        = "task.kill"
	AuditTaskRerun       = "task.rerun"
	AuditTaskSignal      = "task.signal"
	AuditWorkflowStop    = "workflow.stop"
	AuditWorkflowRerun   = "workflow.rerun"
	AuditScheduleEnable  = "schedule.enable"
	AuditScheduleDisable = "schedule.disable"
	AuditScheduleTrigger = "schedule.trigger"
	AuditBackfill        = "backfill"
	AuditAssetEmit       = "asset.emit"
	AuditUserAdd         = "user.add"
	AuditUserRemove      = "user.remove"
	// AuditLogin and AuditLogout are a user's login to and logout from the web UI;
	// AuditCrossOrigin a request made with a session refused by the cross-origin or the CSRF
	// check.
	AuditLogin       = "session.login"
	AuditLogout      = "session.logout"
	AuditCrossOrigin = "session.cross-origin"
)

// AuditOK is the outcome of a change that committed. A refused attempt's outcome is
// "refused: " and a short reason (AuditRefused).
const AuditOK = "ok"

// AuditRefused is the outcome of an attempt refused for reason.
func AuditRefused(reason string) string { return "refused: " + reason }

// AuditEvent is a row of audit_event: who (Actor, with the Role they had) did what (Action)
// to what (Target: "task-instance/42", "schedule/nightly"), with which parameters (a JSON
// object, never a secret nor a whole workflow file), from where (Client: the address of an
// API or UI client, the host of a CLI), and how it ended (Outcome).
type AuditEvent struct {
	ID      int64           `db:"id" json:"id"`
	At      time.Time       `db:"at" json:"at"`
	Actor   string          `db:"actor" json:"actor"`
	Role    string          `db:"role" json:"role"`
	Action  string          `db:"action" json:"action"`
	Target  string          `db:"target" json:"target"`
	Params  json.RawMessage `db:"params" json:"params"`
	Client  string          `db:"client" json:"client"`
	Outcome string          `db:"outcome" json:"outcome"`
	// Count is how many times the event happened: 1 for a change; for a refusal, the
	// identical refusals (actor, action, outcome) of the minute that began at At.
	Count int `db:"count" json:"count"`
}

// maxAuditText is the most bytes an audit row keeps of its actor, target and outcome: far
// above any name or reason zksched writes, far below the btree entry limit of the indexes
// that hold them.
const maxAuditText = 256

// auditClip returns s as valid UTF-8 without NUL (which PostgreSQL's text refuses), clipped
// to maxAuditText bytes: a longer s keeps its start and ends with "…sha256:" and the first
// 16 hex digits of the SHA-256 of what was cut, so two long texts that differ stay told apart.
func auditClip(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
	if len(s) <= maxAuditText {
		return s
	}
	const mark = "…sha256:"
	cut := maxAuditText - len(mark) - 16
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	sum := sha256.Sum256([]byte(s[cut:]))
	return s[:cut] + mark + hex.EncodeToString(sum[:8])
}

// clipped returns ev with its client-chosen texts clipped (auditClip) and its defaults set.
func (ev AuditEvent) clipped() (AuditEvent, string, error) {
	if ev.Actor == "" || ev.Action == "" {
		return ev, "", fmt.Errorf("audit event %+v: actor and action are required", ev)
	}
	if ev.Outcome == "" {
		ev.Outcome = AuditOK
	}
	ev.Actor, ev.Target, ev.Outcome, ev.Client = auditClip(ev.Actor), auditClip(ev.Target), auditClip(ev.Outcome), auditClip(ev.Client)
	params := "{}"
	if len(ev.Params) > 0 {
		params = string(ev.Params)
	}
	return ev, params, nil
}

// AuditParams encodes v (a map or a struct of the request's parameters) for AuditEvent.Params.
// A value that does not encode is recorded as its error, so the change keeps a record.
func AuditParams(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		raw, _ = json.Marshal(map[string]string{"unencodable": err.Error()})
	}
	return raw
}

// withAuditParam returns params (a JSON object, or empty for {}) with key set to v, its other
// members as they were. Params that are no object are kept whole under "params".
func withAuditParam(params json.RawMessage, key string, v any) json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(params) > 0 && json.Unmarshal(params, &m) != nil {
		m = map[string]json.RawMessage{"params": params}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return AuditParams(map[string]string{"unencodable": err.Error()})
	}
	m[key] = raw
	return AuditParams(m)
}

// DefinitionAuditParams are the parameters of a definition.store row: the workflow's name,
// the version stored and the SHA-256 of the file as sent, never the file itself (its
// commands may hold what only the definitions should).
func DefinitionAuditParams(name string, version int, file []byte) json.RawMessage {
	sum := sha256.Sum256(file)
	return AuditParams(map[string]any{"name": name, "version": version, "sha256": hex.EncodeToString(sum[:])})
}

// AuditInsert records ev; ID and At are set by the database, Outcome defaults to AuditOK and
// Params to {}. Call it on the Queries of the transaction that makes the change ev records;
// on the pool (DB) it is a transaction of its own, for a refused attempt or for a change
// that lives outside the database (user.add and user.remove of the users file).
func (q *Queries) AuditInsert(ctx context.Context, ev AuditEvent) error {
	ev, params, err := ev.clipped()
	if err != nil {
		return err
	}
	_, err = q.q.ExecContext(ctx, `INSERT INTO audit_event (actor, role, action, target, params, client, outcome)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7)`, ev.Actor, ev.Role, ev.Action, ev.Target, params, ev.Client, ev.Outcome)
	if err != nil {
		return fmt.Errorf("record audit event %s on %q by %s: %w", ev.Action, ev.Target, ev.Actor, err)
	}
	return nil
}

// auditRefusalSQL is AuditRefusal's statement: the refusal's row of this minute, by the
// database's clock, or one more on its count (migration 00025 lets only that UPDATE through).
const auditRefusalSQL = `
		INSERT INTO audit_event (actor, role, action, target, params, client, outcome, fold_minute)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, date_trunc('minute', now()))
		ON CONFLICT (actor, action, outcome, fold_minute) WHERE fold_minute IS NOT NULL
		DO UPDATE SET count = audit_event.count + 1`

// AuditRefusal records a refused attempt, whose outcome is AuditRefused's, on its own. The
// identical refusals of a minute (same actor, action and outcome) are one row, the first's,
// whose Count says how many there were: a client repeating a refused request adds one row a
// minute, not one a request; the target and client kept are the first's.
func (db *DB) AuditRefusal(ctx context.Context, ev AuditEvent) error {
	ev, params, err := ev.clipped()
	if err != nil {
		return err
	}
	if !strings.HasPrefix(ev.Outcome, AuditRefused("")) {
		return fmt.Errorf("record refusal %s on %q by %s: outcome %q is no refusal", ev.Action, ev.Target, ev.Actor, ev.Outcome)
	}
	if _, err := db.db.ExecContext(ctx, auditRefusalSQL, ev.Actor, ev.Role, ev.Action, ev.Target, params, ev.Client, ev.Outcome); err != nil {
		return fmt.Errorf("record refusal %s on %q by %s: %w", ev.Action, ev.Target, ev.Actor, err)
	}
	return nil
}

// auditInsertMany records evs as AuditInsert does, in one statement.
func (q *Queries) auditInsertMany(ctx context.Context, evs []AuditEvent) error {
	if len(evs) == 0 {
		return nil
	}
	n := len(evs)
	actors, roles, actions, targets := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	params, clients, outcomes := make([]string, n), make([]string, n), make([]string, n)
	for i, ev := range evs {
		ev, p, err := ev.clipped()
		if err != nil {
			return err
		}
		actors[i], roles[i], actions[i], targets[i], clients[i] = ev.Actor, ev.Role, ev.Action, ev.Target, ev.Client
		params[i], outcomes[i] = p, ev.Outcome
	}
	_, err := q.q.ExecContext(ctx, `INSERT INTO audit_event (actor, role, action, target, params, client, outcome)
		SELECT a, r, act, t, p::jsonb, c, o
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS u(a, r, act, t, p, c, o)`,
		pq.Array(actors), pq.Array(roles), pq.Array(actions), pq.Array(targets), pq.Array(params), pq.Array(clients), pq.Array(outcomes))
	if err != nil {
		return fmt.Errorf("record %d audit events: %w", n, err)
	}
	return nil
}

// AuditFilter selects audit events; zero fields select everything.
type AuditFilter struct {
	Actor  string
	Action string
	// TargetPrefix keeps the events whose target starts with it ("workflow-instance/").
	TargetPrefix string
	// Since and Until bound the time of the event: Since included, Until excluded.
	Since, Until time.Time
}

// MaxAuditPage is the most events one page of AuditList holds.
const MaxAuditPage = 500

// AuditList returns up to limit (1 to MaxAuditPage) events matching f, newest first, with ids
// below before (0: from the newest), and the cursor of the next, older page: the before of
// that page, 0 when there is none. Pages read by following the cursor neither repeat nor skip
// an event.
func (q *Queries) AuditList(ctx context.Context, f AuditFilter, before int64, limit int) ([]AuditEvent, int64, error) {
	if limit < 1 || limit > MaxAuditPage {
		return nil, 0, fmt.Errorf("list audit events: limit %d is not from 1 to %d", limit, MaxAuditPage)
	}
	var since, until any
	if !f.Since.IsZero() {
		since = f.Since
	}
	if !f.Until.IsZero() {
		until = f.Until
	}
	var evs []AuditEvent
	err := sqlxSelect(ctx, q, &evs, auditListSQL, f.Actor, f.Action, likePrefix(f.TargetPrefix), since, until, before, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("list audit events: %w", err)
	}
	var next int64
	if len(evs) > limit {
		evs = evs[:limit]
		next = evs[limit-1].ID
	}
	return evs, next, nil
}

// auditListSQL is AuditList's statement: $1-$5 the filter (AuditFilter's actor, action,
// target as a LIKE pattern, since and until; "", "%" and NULL do not filter), $6 the cursor
// (0: from the newest), $7 the page's size. PostgreSQL plans it for its parameters' values, and
// reduces a filter left out to true before it plans, so each page is planned as though the
// statement held only the filters given.
const auditListSQL = `
		SELECT id, at, actor, role, action, target, params, client, outcome, count
		FROM audit_event
		WHERE ($1::text = '' OR actor = $1) AND ($2::text = '' OR action = $2)
		  AND ($3::text = '%' OR target LIKE $3 ESCAPE '\')
		  AND ($4::timestamptz IS NULL OR at >= $4) AND ($5::timestamptz IS NULL OR at < $5)
		  AND ($6::bigint = 0 OR id < $6)
		ORDER BY id DESC LIMIT $7`

// likePrefix is a LIKE pattern matching the strings that start with p.
func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// StepSignal is the audit row of a signal that ended a paused agent's wait at Step (a wait
// step, tool-approval:T.S, tool-call:T.S): who sent it, as the trail names them (a user, an
// API token's, cli:<os user>), and when.
type StepSignal struct {
	Step  string    `db:"step"`
	Actor string    `db:"actor"`
	At    time.Time `db:"at"`
}

// auditStepSignalsSQL is AuditStepSignals's statement: $1 the task's target. The index on
// (target, id) finds its rows.
const auditStepSignalsSQL = `
		SELECT params->>'paused_step' AS step, actor, at
		FROM audit_event
		WHERE target = $1 AND action = 'task.signal' AND outcome = 'ok' AND params->>'paused_step' IS NOT NULL
		ORDER BY id`

// AuditStepSignals returns the signals that ended waits of the paused agent task id, oldest
// first (TaskEndIfWaiting names the step in each row). A step signalled again after a rerun
// has a row per signal.
func (q *Queries) AuditStepSignals(ctx context.Context, id int64) ([]StepSignal, error) {
	var out []StepSignal
	if err := sqlxSelect(ctx, q, &out, auditStepSignalsSQL, fmt.Sprintf("task-instance/%d", id)); err != nil {
		return nil, fmt.Errorf("list the step signals of task instance %d: %w", id, err)
	}
	return out, nil
}
