package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrNoSchedule is returned for a workflow that has no schedule.
var ErrNoSchedule = errors.New("the workflow has no schedule")

// Schedule is a row of schedule: the timetable of one workflow, as its latest submitted file
// gave it, and how far the masters have fired it.
type Schedule struct {
	WorkflowName    string     `db:"workflow_name"`
	WorkflowVersion int        `db:"workflow_version"`
	Cron            string     `db:"cron"`
	Timezone        string     `db:"timezone"`
	StartAt         time.Time  `db:"start_at"`
	EndAt           *time.Time `db:"end_at"`
	Enabled         bool       `db:"enabled"`
	Misfire         string     `db:"misfire"`
	MisfireLimit    int        `db:"misfire_limit"`
	// NextFireAt is the earliest fire time not yet handled; nil once past the end.
	NextFireAt *time.Time `db:"next_fire_at"`
	// LastFireAt is the latest fire time that created an instance or was skipped.
	LastFireAt *time.Time `db:"last_fire_at"`
	CreatedAt  time.Time  `db:"created_at"`
	UpdatedAt  time.Time  `db:"updated_at"`
}

// SchedulePut stores the schedule of a workflow, replacing the one it had. Call it in the
// transaction of the submit that stored the definition, after ScheduleLock.
func (q *Queries) SchedulePut(ctx context.Context, s Schedule) error {
	_, err := q.q.ExecContext(ctx, `
		INSERT INTO schedule (workflow_name, workflow_version, cron, timezone, start_at, end_at, enabled,
			misfire, misfire_limit, next_fire_at, last_fire_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (workflow_name) DO UPDATE SET workflow_version = $2, cron = $3, timezone = $4,
			start_at = $5, end_at = $6, enabled = $7, misfire = $8, misfire_limit = $9, next_fire_at = $10,
			last_fire_at = $11, updated_at = now()`,
		s.WorkflowName, s.WorkflowVersion, s.Cron, s.Timezone, s.StartAt, s.EndAt, s.Enabled, s.Misfire,
		s.MisfireLimit, s.NextFireAt, s.LastFireAt)
	if err != nil {
		return fmt.Errorf("store schedule of %q: %w", s.WorkflowName, err)
	}
	return nil
}

// ScheduleDelete removes the schedule of a workflow whose latest file has none. Its fires stay
// recorded, so a schedule added back later still never repeats one.
func (q *Queries) ScheduleDelete(ctx context.Context, name string) (bool, error) {
	res, err := q.q.ExecContext(ctx, `DELETE FROM schedule WHERE workflow_name = $1`, name)
	if err != nil {
		return false, fmt.Errorf("delete schedule of %q: %w", name, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// scheduleLockSQL is ScheduleLock's statement: $1 the workflow.
const scheduleLockSQL = `
		SELECT workflow_name, workflow_version, cron, timezone, start_at, end_at, enabled, misfire,
			misfire_limit, next_fire_at, last_fire_at, created_at, updated_at
		FROM schedule WHERE workflow_name = $1 FOR UPDATE`

// ScheduleLock returns the schedule of a workflow and locks it for the rest of the
// transaction, waiting for a master that is firing it. It returns nil, nil when the workflow
// has no schedule.
func (q *Queries) ScheduleLock(ctx context.Context, name string) (*Schedule, error) {
	if err := q.boundIdle(ctx); err != nil {
		return nil, err
	}
	var s Schedule
	err := sqlxGet(ctx, q, &s, scheduleLockSQL, name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock schedule of %q: %w", name, err)
	}
	return &s, nil
}

// boundIdle makes the server end the transaction if it sits idle for 30 s: a master frozen
// (SIGSTOP, a long GC pause) while it holds a schedule's lock would otherwise keep every other
// master from firing the schedule until it woke. Fires take milliseconds between statements.
func (q *Queries) boundIdle(ctx context.Context) error {
	if _, err := q.q.ExecContext(ctx, `SET LOCAL idle_in_transaction_session_timeout = '30s'`); err != nil {
		return fmt.Errorf("bound idle time: %w", err)
	}
	return nil
}

// scheduleGetSQL is ScheduleGet's statement: $1 the workflow.
const scheduleGetSQL = `
		SELECT workflow_name, workflow_version, cron, timezone, start_at, end_at, enabled, misfire,
			misfire_limit, next_fire_at, last_fire_at, created_at, updated_at
		FROM schedule WHERE workflow_name = $1`

// ScheduleGet returns the schedule of a workflow; the error wraps ErrNoSchedule when it has
// none.
func (q *Queries) ScheduleGet(ctx context.Context, name string) (*Schedule, error) {
	var s Schedule
	err := sqlxGet(ctx, q, &s, scheduleGetSQL, name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("workflow %q: %w", name, ErrNoSchedule)
	}
	if err != nil {
		return nil, fmt.Errorf("get schedule of %q: %w", name, err)
	}
	return &s, nil
}

// scheduleLockIfDueSQL is ScheduleLockIfDue's statement: $1 the workflow, $2 now.
const scheduleLockIfDueSQL = `
		SELECT workflow_name, workflow_version, cron, timezone, start_at, end_at, enabled, misfire,
			misfire_limit, next_fire_at, last_fire_at, created_at, updated_at
		FROM schedule
		WHERE workflow_name = $1 AND enabled AND next_fire_at <= $2 FOR UPDATE SKIP LOCKED`

// ScheduleLockIfDue locks the schedule of a workflow if it is enabled, due at now and not
// locked by another master (SKIP LOCKED: that master is firing it). It returns nil, nil
// otherwise.
func (q *Queries) ScheduleLockIfDue(ctx context.Context, name string, now time.Time) (*Schedule, error) {
	if err := q.boundIdle(ctx); err != nil {
		return nil, err
	}
	var s Schedule
	err := sqlxGet(ctx, q, &s, scheduleLockIfDueSQL, name, now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock schedule of %q: %w", name, err)
	}
	return &s, nil
}

// ScheduleListDue returns the workflows whose enabled schedules are due at now, earliest
// first, and the earliest fire time after now among the others (zero if none), so the caller
// knows when to look next.
func (q *Queries) ScheduleListDue(ctx context.Context, now time.Time) ([]string, time.Time, error) {
	var rows []struct {
		Name string    `db:"workflow_name"`
		Next time.Time `db:"next_fire_at"`
	}
	// The first row after now is enough to know when to wake up.
	err := sqlxSelect(ctx, q, &rows, `
		(SELECT workflow_name, next_fire_at FROM schedule
		 WHERE enabled AND next_fire_at <= $1 ORDER BY next_fire_at)
		UNION ALL
		(SELECT workflow_name, next_fire_at FROM schedule
		 WHERE enabled AND next_fire_at > $1 ORDER BY next_fire_at LIMIT 1)`, now)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list due schedules: %w", err)
	}
	var due []string
	var later time.Time
	for _, r := range rows {
		if r.Next.After(now) {
			later = r.Next
			continue
		}
		due = append(due, r.Name)
	}
	return due, later, nil
}

// ScheduleAdvance records that a schedule's fires up to last were handled: next is the
// earliest fire time not yet handled (nil once past the end). last nil keeps the previous one.
func (q *Queries) ScheduleAdvance(ctx context.Context, name string, next, last *time.Time) error {
	_, err := q.q.ExecContext(ctx, `UPDATE schedule SET next_fire_at = $2,
		last_fire_at = CASE WHEN $3::timestamptz IS NULL THEN last_fire_at ELSE greatest(last_fire_at, $3) END,
		updated_at = now() WHERE workflow_name = $1`, name, next, last)
	if err != nil {
		return fmt.Errorf("advance schedule of %q: %w", name, err)
	}
	return nil
}

// ScheduleSetEnabled enables or disables a schedule; next is its next fire time, which
// enabling recomputes so that the time it was disabled is not taken for missed fires.
func (q *Queries) ScheduleSetEnabled(ctx context.Context, name string, enabled bool, next *time.Time) error {
	res, err := q.q.ExecContext(ctx, `UPDATE schedule SET enabled = $2, next_fire_at = $3, updated_at = now()
		WHERE workflow_name = $1`, name, enabled, next)
	if err != nil {
		return fmt.Errorf("set schedule of %q enabled=%v: %w", name, enabled, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("workflow %q: %w", name, ErrNoSchedule)
	}
	return nil
}

// scheduleListSQL is ScheduleList's statement.
const scheduleListSQL = `
		SELECT s.workflow_name, s.workflow_version, s.cron, s.timezone, s.start_at, s.end_at, s.enabled, s.misfire,
			s.misfire_limit, s.next_fire_at, s.last_fire_at, s.created_at, s.updated_at,
			(SELECT count(*) FROM workflow_instance w
			 WHERE w.workflow_name = s.workflow_name AND w.state IN ('submitted', 'running')) AS active
		FROM schedule s ORDER BY s.workflow_name`

// ScheduleList returns every schedule, by workflow name, with how many instances of each
// workflow wait or run.
func (q *Queries) ScheduleList(ctx context.Context) ([]ScheduleRow, error) {
	var rows []ScheduleRow
	err := sqlxSelect(ctx, q, &rows, scheduleListSQL)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return rows, nil
}

// ScheduleRow is a schedule with the number of its workflow's instances that wait or run.
type ScheduleRow struct {
	Schedule
	Active int `db:"active"`
}

// FireKind says what made a fire.
type FireKind string

// The kinds of fire.
const (
	// FireCron is a fire at its time.
	FireCron FireKind = "cron"
	// FireMisfire is a fire caught up after no master could fire it at its time.
	FireMisfire FireKind = "misfire"
	// FireTrigger is a fire by hand (zksched schedule trigger).
	FireTrigger FireKind = "trigger"
	// FireBackfill is a fire of zksched backfill.
	FireBackfill FireKind = "backfill"
)

// Fire outcomes.
const (
	// FireCreated: the fire created a workflow instance.
	FireCreated = "created"
	// FireSkipped: the fire created nothing; Reason says why.
	FireSkipped = "skipped"
)

// Fire is a row of schedule_fire: one fire time of one workflow, handled once.
type Fire struct {
	WorkflowName       string    `db:"workflow_name"`
	FireTime           time.Time `db:"fire_time"`
	Kind               FireKind  `db:"kind"`
	WorkflowInstanceID *int64    `db:"workflow_instance_id"`
	Outcome            string    `db:"outcome"`
	Reason             *string   `db:"reason"`
	FiredBy            string    `db:"fired_by"`
	CreatedAt          time.Time `db:"created_at"`
}

// FireInsert claims a fire: it records (workflow, fire time) unless it is recorded already,
// and reports whether it did. Only the caller that inserted it creates the instance, in the
// same transaction (FireResolve), so a fire is handled once whoever tries it and however
// often. The outcome is FireCreated until FireResolve says otherwise.
func (q *Queries) FireInsert(ctx context.Context, name string, t time.Time, kind FireKind, by string) (bool, error) {
	var n int
	err := sqlxGet(ctx, q, &n, `
		WITH ins AS (
			INSERT INTO schedule_fire (workflow_name, fire_time, kind, outcome, fired_by)
			VALUES ($1, $2, $3, 'created', $4)
			ON CONFLICT (workflow_name, fire_time) DO NOTHING RETURNING 1
		) SELECT count(*) FROM ins`, name, t, string(kind), by)
	if err != nil {
		return false, fmt.Errorf("record fire of %q at %s: %w", name, t.Format(time.RFC3339), err)
	}
	return n == 1, nil
}

// FireResolve records what a fire claimed by FireInsert did: the instance it created, or
// (instance nil) that it was skipped and why.
func (q *Queries) FireResolve(ctx context.Context, name string, t time.Time, instance *int64, reason string) error {
	outcome, why := FireCreated, &reason
	if instance == nil {
		outcome = FireSkipped
	}
	if reason == "" {
		why = nil
	}
	_, err := q.q.ExecContext(ctx, `UPDATE schedule_fire SET workflow_instance_id = $3, outcome = $4, reason = $5
		WHERE workflow_name = $1 AND fire_time = $2`, name, t, instance, outcome, why)
	if err != nil {
		return fmt.Errorf("record outcome of fire of %q at %s: %w", name, t.Format(time.RFC3339), err)
	}
	return nil
}

// FireList returns the latest fires of a workflow, newest first, at most limit.
func (q *Queries) FireList(ctx context.Context, name string, limit int) ([]Fire, error) {
	var fires []Fire
	if err := sqlxSelect(ctx, q, &fires, `SELECT workflow_name, fire_time, kind, workflow_instance_id, outcome,
		reason, fired_by, created_at FROM schedule_fire WHERE workflow_name = $1
		ORDER BY fire_time DESC LIMIT $2`, name, limit); err != nil {
		return nil, fmt.Errorf("list fires of %q: %w", name, err)
	}
	return fires, nil
}
