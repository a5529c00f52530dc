package dao

import (
	"context"
	"encoding/json"
	"fmt"
)

// DefinitionEnsure returns the version of workflow name whose spec equals spec, creating a new
// version when the latest differs: definitions are versioned, never edited in place. Submits
// of the same name are serialised by a transaction-scoped advisory lock, so two racing submits
// of one new spec create one version. Call it inside a transaction.
func (q *Queries) DefinitionEnsure(ctx context.Context, name string, spec json.RawMessage) (int, error) {
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
	if _, err := q.q.ExecContext(ctx, `INSERT INTO workflow_definition (name, version, spec) VALUES ($1, $2, $3::jsonb)`,
		name, v, string(spec)); err != nil {
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
