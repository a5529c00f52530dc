package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// This file holds the read queries of the web UI and the HTTP API about workflow instances and
// definitions.

// WorkflowFilter selects workflow instances. Zero fields do not filter.
type WorkflowFilter struct {
	State WorkflowState
	// Name is a workflow name, matched exactly.
	Name string
}

// WorkflowRow is a workflow instance as the list shows it, with how many of its task instances
// are in each state.
type WorkflowRow struct {
	WorkflowInstance
	TaskStates TaskStateCounts `db:"task_states"`
}

// TaskStateCounts counts task instances by state.
type TaskStateCounts map[TaskState]int

// Scan reads the JSON object the list query builds.
func (c *TaskStateCounts) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	case nil:
		*c = TaskStateCounts{}
		return nil
	default:
		return fmt.Errorf("task state counts: unexpected %T", src)
	}
	m := map[TaskState]int{}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("task state counts: %w", err)
	}
	*c = m
	return nil
}

// WorkflowListPage returns one page of the workflow instances that match f, newest first.
func (q *Queries) WorkflowListPage(ctx context.Context, f WorkflowFilter, c PageCursor) (Page[WorkflowRow], error) {
	page, err := keysetPage(ctx, q, workflowList, []any{string(f.State), f.Name}, c,
		func(r WorkflowRow) int64 { return r.ID })
	if err != nil {
		return page, fmt.Errorf("list workflow instances: %w", err)
	}
	return page, nil
}

// workflowList is the workflow list's statements.
var workflowList = keysetList{older: workflowListOlderSQL, newer: workflowListNewerSQL,
	anyOlder: workflowListAnyOlderSQL, anyNewer: workflowListAnyNewerSQL}

// workflowListOlderSQL, workflowListNewerSQL, workflowListAnyOlderSQL and
// workflowListAnyNewerSQL are the workflow list's statements (keysetList): $1 and $2 the
// filter (WorkflowFilter's state and name; "" does not filter, and is reduced away before
// planning as the task list's filters are), $3 the cursor, $4 the page's size.
const (
	workflowListOlderSQL = `
		SELECT w.id, w.workflow_name, w.workflow_version, w.state, w.owner, w.params, w.priority,
			w.max_active, w.concurrency_key, w.error, w.created_at, w.started_at, w.ended_at, w.end_reason,
			(SELECT coalesce(jsonb_object_agg(state, n), '{}') FROM
				(SELECT state, count(*) AS n FROM task_instance WHERE workflow_instance_id = w.id GROUP BY state) s
			) AS task_states
		FROM workflow_instance w
		WHERE ($1::text = '' OR w.state = $1) AND ($2::text = '' OR w.workflow_name = $2)
		  AND ($3::bigint = 0 OR w.id < $3)
		ORDER BY w.id DESC LIMIT $4`
	workflowListNewerSQL = `
		SELECT w.id, w.workflow_name, w.workflow_version, w.state, w.owner, w.params, w.priority,
			w.max_active, w.concurrency_key, w.error, w.created_at, w.started_at, w.ended_at, w.end_reason,
			(SELECT coalesce(jsonb_object_agg(state, n), '{}') FROM
				(SELECT state, count(*) AS n FROM task_instance WHERE workflow_instance_id = w.id GROUP BY state) s
			) AS task_states
		FROM workflow_instance w
		WHERE ($1::text = '' OR w.state = $1) AND ($2::text = '' OR w.workflow_name = $2)
		  AND w.id > $3::bigint
		ORDER BY w.id ASC LIMIT $4`
	workflowListAnyOlderSQL = `
		SELECT EXISTS (SELECT 1 FROM workflow_instance w
			WHERE ($1::text = '' OR w.state = $1) AND ($2::text = '' OR w.workflow_name = $2)
			  AND w.id < $3::bigint)`
	workflowListAnyNewerSQL = `
		SELECT EXISTS (SELECT 1 FROM workflow_instance w
			WHERE ($1::text = '' OR w.state = $1) AND ($2::text = '' OR w.workflow_name = $2)
			  AND w.id > $3::bigint)`
)

// DefinitionSummary is one workflow definition: its latest version and how many it has.
type DefinitionSummary struct {
	Name          string    `db:"name" json:"name"`
	LatestVersion int       `db:"latest_version" json:"latest_version"`
	Versions      int       `db:"versions" json:"versions"`
	UpdatedAt     time.Time `db:"updated_at" json:"updated_at"`
	Instances     int       `db:"instances" json:"instances"`
}

// DefinitionList returns a page of the workflow definitions by name: at most limit of them
// (1..1000) whose names sort after after ("" for the first page), and the after of the next
// page, "" when this one is the last.
func (q *Queries) DefinitionList(ctx context.Context, after string, limit int) ([]DefinitionSummary, string, error) {
	limit = min(max(limit, 1), 1000)
	var out []DefinitionSummary
	if err := sqlxSelect(ctx, q, &out, `SELECT d.name, max(d.version) AS latest_version, count(*) AS versions,
		max(d.created_at) AS updated_at,
		(SELECT count(*) FROM workflow_instance w WHERE w.workflow_name = d.name) AS instances
		FROM workflow_definition d WHERE d.name > $1 GROUP BY d.name ORDER BY d.name LIMIT $2`, after, limit+1); err != nil {
		return nil, "", fmt.Errorf("list workflow definitions: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].Name
	}
	return out, next, nil
}

// DefinitionVersion is one stored version of a workflow definition.
type DefinitionVersion struct {
	Name      string          `db:"name" json:"name"`
	Version   int             `db:"version" json:"version"`
	Spec      json.RawMessage `db:"spec" json:"spec"`
	CreatedAt time.Time       `db:"created_at" json:"created_at"`
}

// DefinitionVersionRow is a version of a workflow definition as the list of versions shows
// it: without its spec, which can be megabytes, as a definition can have thousands of
// versions.
type DefinitionVersionRow struct {
	Version   int       `db:"version" json:"version"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// DefinitionVersionPage returns a page of the versions of a workflow definition, newest
// first, by the keyset of the version number (c.Before and c.After are versions); an empty
// page when the name is unknown. Each page reads at most c.Limit+1 rows through the primary
// key, however many versions there are.
func (q *Queries) DefinitionVersionPage(ctx context.Context, name string, c PageCursor) (Page[DefinitionVersionRow], error) {
	page, err := keysetPage(ctx, q, definitionVersions, []any{name}, c,
		func(r DefinitionVersionRow) int64 { return int64(r.Version) })
	if err != nil {
		return page, fmt.Errorf("list versions of definition %q: %w", name, err)
	}
	return page, nil
}

// definitionVersions is the statements of the list of a definition's versions.
var definitionVersions = keysetList{older: definitionVersionsOlderSQL, newer: definitionVersionsNewerSQL,
	anyOlder: definitionVersionsAnyOlderSQL, anyNewer: definitionVersionsAnyNewerSQL}

// definitionVersionsOlderSQL, definitionVersionsNewerSQL, definitionVersionsAnyOlderSQL and
// definitionVersionsAnyNewerSQL are the statements of the list of a definition's versions
// (keysetList): $1 the definition, $2 the cursor (a version), $3 the page's size.
const (
	definitionVersionsOlderSQL = `
		SELECT version, created_at FROM workflow_definition
		WHERE name = $1 AND ($2::bigint = 0 OR version < $2)
		ORDER BY version DESC LIMIT $3`
	definitionVersionsNewerSQL = `
		SELECT version, created_at FROM workflow_definition
		WHERE name = $1 AND version > $2::bigint
		ORDER BY version ASC LIMIT $3`
	definitionVersionsAnyOlderSQL = `
		SELECT EXISTS (SELECT 1 FROM workflow_definition WHERE name = $1 AND version < $2::bigint)`
	definitionVersionsAnyNewerSQL = `
		SELECT EXISTS (SELECT 1 FROM workflow_definition WHERE name = $1 AND version > $2::bigint)`
)

// DefinitionVersionGet returns one version of a workflow definition, spec included;
// sql.ErrNoRows (wrapped) when there is no such version.
func (q *Queries) DefinitionVersionGet(ctx context.Context, name string, version int) (DefinitionVersion, error) {
	var v DefinitionVersion
	if err := sqlxGet(ctx, q, &v, `SELECT name, version, spec, created_at FROM workflow_definition
		WHERE name = $1 AND version = $2`, name, version); err != nil {
		return v, fmt.Errorf("get definition %q version %d: %w", name, version, err)
	}
	return v, nil
}

// DefinitionLatest returns the latest version number of a workflow definition; 0 when the
// name is unknown.
func (q *Queries) DefinitionLatest(ctx context.Context, name string) (int, error) {
	var v int
	if err := sqlxGet(ctx, q, &v, `SELECT coalesce(max(version), 0) FROM workflow_definition WHERE name = $1`, name); err != nil {
		return 0, fmt.Errorf("latest version of definition %q: %w", name, err)
	}
	return v, nil
}
