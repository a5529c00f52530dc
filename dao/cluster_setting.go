package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// Names of cluster_setting rows.
const (
	// SettingProvidersPrefix starts the name of a worker's row of model providers: the
	// prefix, then the worker's host:port.
	SettingProvidersPrefix = "providers/"
	// SettingTracing is the masters' row of tracing: {"sample_ratio": R}, 0 when it is off.
	SettingTracing = "tracing"
)

// TracingSetting is the value of SettingTracing.
type TracingSetting struct {
	SampleRatio float64 `json:"sample_ratio"`
}

// SettingPut stores value, as JSON, under name, in place of what was there.
func (db *DB) SettingPut(ctx context.Context, name string, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return err
	}
	_, err = db.q.ExecContext(ctx, `
		INSERT INTO cluster_setting (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
		WHERE cluster_setting.value IS DISTINCT FROM EXCLUDED.value`, name, raw)
	if err != nil {
		return fmt.Errorf("store cluster setting %s: %w", name, err)
	}
	return nil
}

// SettingProviders returns the names of the model providers some worker has, each once and
// sorted; ok is false when no worker has stored its providers.
func (q *Queries) SettingProviders(ctx context.Context) (names []string, ok bool, err error) {
	var rows []json.RawMessage
	if err := sqlxSelect(ctx, q, &rows, `SELECT value FROM cluster_setting WHERE name LIKE $1 || '%'`, SettingProvidersPrefix); err != nil {
		return nil, false, fmt.Errorf("read the workers' providers: %w", err)
	}
	for _, raw := range rows {
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, false, fmt.Errorf("read the workers' providers: %w", err)
		}
		names = append(names, list...)
	}
	slices.Sort(names)
	return slices.Compact(names), len(rows) > 0, nil
}

// SettingTracingGet returns the masters' tracing; ok is false when no master has stored it.
func (q *Queries) SettingTracingGet(ctx context.Context) (s TracingSetting, ok bool, err error) {
	var rows []json.RawMessage
	if err := sqlxSelect(ctx, q, &rows, `SELECT value FROM cluster_setting WHERE name = $1`, SettingTracing); err != nil {
		return s, false, fmt.Errorf("read the masters' tracing: %w", err)
	}
	if len(rows) == 0 {
		return s, false, nil
	}
	if err := json.Unmarshal(rows[0], &s); err != nil {
		return s, false, fmt.Errorf("read the masters' tracing: %w", err)
	}
	return s, true, nil
}
