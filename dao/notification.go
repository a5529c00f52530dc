package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Notifications go through an outbox (migration 00022): triggers queue a notification row in
// the transaction that makes its event, once per rule that hears it, and any master sends the
// rows due (NotificationClaimDue), marking each sent, due again later, or dead. The statements
// here are the senders' and the deadline look's; nothing else writes a notification.

// The events a notification is sent for.
const (
	EventFailure    = "failure"
	EventSuccess    = "success"
	EventTimeout    = "timeout"
	EventDeadline   = "deadline"
	EventTaskFailed = "task-failed"
	EventNodeFenced = "node-fenced"
	EventFailover   = "failover"
)

// Events lists every event, in the order the documentation gives them.
var Events = []string{EventFailure, EventSuccess, EventTimeout, EventDeadline, EventTaskFailed,
	EventNodeFenced, EventFailover}

// The channels a notification goes through.
const (
	ChannelWebhook = "webhook"
	ChannelEmail   = "email"
)

// The states of a notification.
const (
	NotificationPending = "pending"
	NotificationSending = "sending"
	NotificationSent    = "sent"
	NotificationDead    = "dead"
)

// NotifyRule is who hears an event: a webhook, whose Target names the environment variable
// holding its URL (Slack asks for a Slack-compatible body), or an email address.
type NotifyRule struct {
	Event   string `db:"event"`
	Channel string `db:"channel"`
	Target  string `db:"target"`
	Slack   bool   `db:"slack"`
}

// Notification is a row of the outbox.
type Notification struct {
	ID                 int64           `db:"id" json:"id"`
	Event              string          `db:"event" json:"event"`
	Subject            string          `db:"subject" json:"subject"`
	WorkflowName       *string         `db:"workflow_name" json:"workflow,omitempty"`
	WorkflowInstanceID *int64          `db:"workflow_instance_id" json:"workflow_instance_id,omitempty"`
	TaskInstanceID     *int64          `db:"task_instance_id" json:"task_instance_id,omitempty"`
	Channel            string          `db:"channel" json:"channel"`
	Target             string          `db:"target" json:"target"`
	Slack              bool            `db:"slack" json:"slack"`
	Payload            json.RawMessage `db:"payload" json:"payload"`
	State              string          `db:"state" json:"state"`
	Attempts           int             `db:"attempts" json:"attempts"`
	NextAttemptAt      time.Time       `db:"next_attempt_at" json:"next_attempt_at"`
	LastError          *string         `db:"last_error" json:"last_error,omitempty"`
	IdempotencyKey     string          `db:"idempotency_key" json:"idempotency_key"`
	CreatedAt          time.Time       `db:"created_at" json:"created_at"`
	SentAt             *time.Time      `db:"sent_at" json:"sent_at,omitempty"`
}

// notifyRulesInsert stores the rules of a definition, or the default ones for name "".
func (q *Queries) notifyRulesInsert(ctx context.Context, name string, version int, rules []NotifyRule) error {
	for _, r := range rules {
		if _, err := q.q.ExecContext(ctx, `INSERT INTO notify_rule (workflow_name, workflow_version,
			event, channel, target, slack) VALUES (nullif($1, ''), nullif($2, 0), $3, $4, $5, $6)
			ON CONFLICT DO NOTHING`,
			name, version, r.Event, r.Channel, r.Target, r.Slack); err != nil {
			return fmt.Errorf("store notify rule %s %s %s: %w", r.Event, r.Channel, r.Target, err)
		}
	}
	return nil
}

// NotifyDefaultReplace makes rules the default ones: those of the definitions without rules
// of their own, and of the cluster's events. Every master writes its notify.default when it
// starts, so the masters should share one.
func (q *Queries) NotifyDefaultReplace(ctx context.Context, rules []NotifyRule) error {
	if _, err := q.q.ExecContext(ctx, `DELETE FROM notify_rule WHERE workflow_name IS NULL`); err != nil {
		return fmt.Errorf("clear default notify rules: %w", err)
	}
	return q.notifyRulesInsert(ctx, "", 0, rules)
}

// NotifyRules returns the rules of a definition, or the default ones for name "".
func (q *Queries) NotifyRules(ctx context.Context, name string, version int) ([]NotifyRule, error) {
	var rules []NotifyRule
	if err := sqlxSelect(ctx, q, &rules, `SELECT event, channel, target, slack FROM notify_rule
		WHERE workflow_name IS NOT DISTINCT FROM nullif($1, '') AND workflow_version IS NOT DISTINCT FROM nullif($2, 0)
		ORDER BY event, channel, target`, name, version); err != nil {
		return nil, fmt.Errorf("list notify rules of %q: %w", name, err)
	}
	return rules, nil
}

// NotificationClaimDue takes up to limit notifications due to be sent, pending or held by a
// sender whose hold has lapsed, skipping those another master is taking: each becomes sending,
// held for hold, with its attempts counted. The attempt count each returns is its sender's
// token: the write of its result (NotificationDoneIfSending) is conditioned on it, so a sender
// whose hold lapsed and whose row another took writes nothing.
func (q *Queries) NotificationClaimDue(ctx context.Context, limit int, hold time.Duration) ([]Notification, error) {
	var ns []Notification
	if err := sqlxSelect(ctx, q, &ns, `
		UPDATE notification SET state = 'sending', attempts = attempts + 1,
			next_attempt_at = now() + $2 * interval '1 millisecond'
		WHERE id IN (
			SELECT id FROM notification
			WHERE state IN ('pending', 'sending') AND next_attempt_at <= now()
			ORDER BY next_attempt_at LIMIT $1
			FOR UPDATE SKIP LOCKED)
		RETURNING *`, limit, hold.Milliseconds()); err != nil {
		return nil, fmt.Errorf("claim due notifications: %w", err)
	}
	return ns, nil
}

// NotificationDoneIfSending records the result of attempt of a notification, if that attempt
// still holds it: state is sent, pending (due again retryIn from now, by the database's
// clock) or dead; errMsg is the attempt's error, "" for none. It reports whether it held it.
func (q *Queries) NotificationDoneIfSending(ctx context.Context, id int64, attempt int, state string, retryIn time.Duration, errMsg string) (bool, error) {
	res, err := q.q.ExecContext(ctx, `
		UPDATE notification SET state = $3,
			next_attempt_at = now() + $4 * interval '1 millisecond',
			last_error = coalesce(nullif($5, ''), last_error),
			sent_at = CASE WHEN $3 = 'sent' THEN now() END
		WHERE id = $1 AND attempts = $2 AND state = 'sending'`,
		id, attempt, state, retryIn.Milliseconds(), errMsg)
	if err != nil {
		return false, fmt.Errorf("record notification %d attempt %d: %w", id, attempt, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record notification %d attempt %d: %w", id, attempt, err)
	}
	return n == 1, nil
}

// NotificationList returns the most recent notifications, newest first: those in state if it
// is not "", those before id before if it is not 0.
func (q *Queries) NotificationList(ctx context.Context, state string, before int64, limit int) ([]Notification, error) {
	var ns []Notification
	if err := sqlxSelect(ctx, q, &ns, `SELECT * FROM notification
		WHERE ($1 = '' OR state = $1) AND ($2 = 0 OR id < $2)
		ORDER BY id DESC LIMIT $3`, state, before, limit); err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	return ns, nil
}

// hearsDeadlineSQL is true for a definition d whose rules, or the default ones when it has
// none, hear the deadline event: the deadline look passes over the others, which would
// queue nothing.
const hearsDeadlineSQL = `EXISTS (SELECT 1 FROM notify_rule r WHERE r.event = 'deadline'
	AND ((r.workflow_name = d.name AND r.workflow_version = d.version)
		OR (r.workflow_name IS NULL AND NOT EXISTS (
			SELECT 1 FROM notify_rule o WHERE o.workflow_name = d.name AND o.workflow_version = d.version))))`

// DeadlineQueuePassed queues the deadline event of up to limit workflow instances and tasks
// whose deadline has passed, by the database's clock, while they have not ended: a workflow's
// deadline counts from its instance's creation, a task's too (a task that has not been
// created yet has not ended either). Each is queued once, whoever looks: the event's subject
// is unique. It returns how many it queued.
func (q *Queries) DeadlineQueuePassed(ctx context.Context, limit int) (int, error) {
	var n int
	err := sqlxGet(ctx, q, &n, `
		WITH wf AS (
			SELECT notification_queue('deadline', 'workflow ' || wi.id || ' deadline', wi.workflow_name,
				wi.workflow_version, wi.id, NULL,
				jsonb_build_object('state', wi.state, 'error',
					'deadline ' || (d.deadline_ms / 1000) || 's passed', 'time', now()))
			FROM workflow_definition d
			JOIN workflow_instance wi ON wi.workflow_name = d.name AND wi.workflow_version = d.version
			WHERE d.deadline_ms IS NOT NULL AND `+hearsDeadlineSQL+`
			  AND wi.state IN ('submitted', 'running')
			  AND wi.created_at + d.deadline_ms * interval '1 millisecond' <= now()
			  AND NOT EXISTS (SELECT 1 FROM notification n WHERE n.workflow_instance_id = wi.id
				AND n.event = 'deadline' AND n.task_instance_id IS NULL AND n.subject = 'workflow ' || wi.id || ' deadline')
			LIMIT $1
		), task AS (
			SELECT notification_queue('deadline', 'workflow ' || wi.id || ' task ' || td.key || ' deadline',
				wi.workflow_name, wi.workflow_version, wi.id, t.id,
				jsonb_build_object('state', coalesce(t.state, 'not created'), 'task', td.key, 'error',
					'task deadline ' || (td.value::bigint / 1000) || 's passed', 'time', now()))
			FROM workflow_definition d
			JOIN workflow_instance wi ON wi.workflow_name = d.name AND wi.workflow_version = d.version
			CROSS JOIN LATERAL jsonb_each_text(d.task_deadlines_ms) td
			LEFT JOIN task_instance t ON t.workflow_instance_id = wi.id AND t.name = td.key
			WHERE d.task_deadlines_ms IS NOT NULL AND `+hearsDeadlineSQL+`
			  AND wi.state IN ('submitted', 'running')
			  AND wi.created_at + td.value::bigint * interval '1 millisecond' <= now()
			  AND (t.id IS NULL OR t.state NOT IN ('succeeded', 'failed', 'killed', 'skipped'))
			  AND NOT EXISTS (SELECT 1 FROM notification n WHERE n.workflow_instance_id = wi.id
				AND n.event = 'deadline' AND n.subject = 'workflow ' || wi.id || ' task ' || td.key || ' deadline')
			LIMIT $1
		)
		SELECT (SELECT count(*) FROM wf) + (SELECT count(*) FROM task)`, limit)
	if err != nil {
		return 0, fmt.Errorf("queue passed deadlines: %w", err)
	}
	return n, nil
}

// purgeNotificationsSQL is PurgeNotifications' statement: $1 the retention in seconds, $2 the
// batch. A notification still to send stays, whatever its age.
const purgeNotificationsSQL = `
		WITH doomed AS (
			SELECT id FROM notification
			WHERE state IN ('sent', 'dead') AND created_at < now() - make_interval(secs => $1)
			ORDER BY id
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		), gone AS (
			DELETE FROM notification WHERE id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING 1
		)
		SELECT count(*) FROM gone`

// PurgeNotifications deletes up to batch notifications, sent or dead, queued more than keep
// ago, and returns how many it deleted.
func (db *DB) PurgeNotifications(ctx context.Context, keep time.Duration, batch int) (int64, error) {
	return db.purgeBatch(ctx, purgeNotificationsSQL, "purge notifications", keep, batch)
}
