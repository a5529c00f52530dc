package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// DefinitionFacts are what the statements creating a workflow's instances need to know of its
// definition, stored beside the spec (migration 00015) so that no statement reads the workflow
// file's keys out of the spec's JSON. They are computed once from the parsed spec, by
// lifecycle.Facts, when the definition is stored.
type DefinitionFacts struct {
	// TaskCount is the number of tasks, nil for none. An instance copies it: a worker ends an
	// instance of one task with that task.
	TaskCount *int
	// HasTimeout says the workflow has a timeout. An instance copies it: its owner enforces the
	// timeout, so a master claims it at once.
	HasTimeout bool
	// MaxActive is max-active-instances, nil for no cap. An instance copies it and waits for
	// admission under the cap.
	MaxActive *int
	// WhenFullSkip says that at MaxActive a new instance is not created (ErrWorkflowFull)
	// rather than queued.
	WhenFullSkip bool
	// Notify are the workflow's notify rules (notify_rule): the triggers that queue its
	// notifications read them, and the default rules apply when it has none.
	Notify []NotifyRule
	// Deadline is the workflow's deadline, 0 for none: the deadline look queues its event
	// once an instance has not ended that long after its creation.
	Deadline time.Duration
	// TaskDeadlines are the deadlines of its tasks, by task name, counted from the
	// creation of their instance.
	TaskDeadlines map[string]time.Duration
}

// DefinitionEnsure returns the version of workflow name whose spec equals spec, creating a new
// version, with facts, when the latest differs: definitions are versioned, never edited in
// place. facts must be those of spec; a version that already exists keeps the facts it was
// stored with. Submits of the same name are serialised by a transaction-scoped advisory lock,
// so two racing submits of one new spec create one version. Call it inside a transaction.
func (q *Queries) DefinitionEnsure(ctx context.Context, name string, spec json.RawMessage, facts DefinitionFacts) (int, error) {
	if _, err := q.q.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('zksched.definition'), hashtext($1))`, name); err != nil {
		return 0, fmt.Errorf("lock definition %q: %w", name, err)
	}
	var latest struct {
		Version int  `db:"version"`
		Same    bool `db:"same"`
	}
	err := sqlxGet(ctx, q, &latest, `SELECT coalesce(max(version), 0) AS version,
		coalesce(bool_or(spec = $2::jsonb AND version = (SELECT max(version) FROM workflow_definition WHERE name = $1)), false) AS same
		FROM workflow_definition WHERE name = $1`, name, string(spec))
	if err != nil {
		return 0, fmt.Errorf("read definition %q: %w", name, err)
	}
	if latest.Same {
		return latest.Version, nil
	}
	v := latest.Version + 1
	var deadline *int64
	if facts.Deadline > 0 {
		ms := facts.Deadline.Milliseconds()
		deadline = &ms
	}
	var taskDeadlines *string
	if len(facts.TaskDeadlines) > 0 {
		ms := map[string]int64{}
		for task, d := range facts.TaskDeadlines {
			ms[task] = d.Milliseconds()
		}
		b, err := json.Marshal(ms)
		if err != nil {
			return 0, fmt.Errorf("store definition %q: %w", name, err)
		}
		s := string(b)
		taskDeadlines = &s
	}
	if _, err := q.q.ExecContext(ctx, `INSERT INTO workflow_definition (name, version, spec,
		task_count, has_timeout, max_active, when_full_skip, deadline_ms, task_deadlines_ms)
		VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9::jsonb)`,
		name, v, string(spec), facts.TaskCount, facts.HasTimeout, facts.MaxActive, facts.WhenFullSkip,
		deadline, taskDeadlines); err != nil {
		return 0, fmt.Errorf("store definition %q version %d: %w", name, v, err)
	}
	if err := q.notifyRulesInsert(ctx, name, v, facts.Notify); err != nil {
		return 0, fmt.Errorf("store definition %q version %d: %w", name, v, err)
	}
	return v, nil
}

// DefinitionGet returns the spec of one version of a workflow definition.
func (q *Queries) DefinitionGet(ctx context.Context, name string, version int) (json.RawMessage, error) {
	var spec []byte
	if err := sqlxGet(ctx, q, &spec, `SELECT spec FROM workflow_definition WHERE name = $1 AND version = $2`,
		name, version); err != nil {
		return nil, fmt.Errorf("get definition %q version %d: %w", name, version, err)
	}
	return spec, nil
}
