package dao_test

import (
	"context"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestTriggerOverviewReadsARange: on tables of a long history (100,000 waiting wait tasks,
// 100,000 hook deliveries and asset events, queues of thousands), each statement of the
// Triggers page reads its rows through an index, never a table whole, and the sensors'
// reads what it shows; with statistics and without.
func TestTriggerOverviewReadsARange(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	const limit = 100
	daotest.Submit(t, db, "wf", map[string]any{"name": "wf"})
	for _, stmt := range []string{
		`INSERT INTO workflow_instance (workflow_name, workflow_version, state, owner, started_at) VALUES ('wf', 1, 'running', 'm1', now())`,
		// One waiting sensor for every thousand waiting wait tasks, the oldest.
		`INSERT INTO task_instance (workflow_instance_id, name, type, state, params)
			SELECT (SELECT max(id) FROM workflow_instance), 't' || g, CASE WHEN g % 1000 = 0 THEN 'sensor' ELSE 'wait' END, 'waiting',
				'{"task": {"name": "s", "type": "sensor", "time": {"after": "1h"}}}'
			FROM generate_series(1, 100000) g`,
		`INSERT INTO task_instance (workflow_instance_id, name, type, state, paused_step, wait_until)
			SELECT (SELECT max(id) FROM workflow_instance), 's' || g, 'sensor', 'waiting', 'sensor', now() FROM generate_series(1, 300) g`,
		`INSERT INTO trigger_hook (name, workflow_name, workflow_version, signature) SELECT 'h' || g, 'wf', 1, 'bearer' FROM generate_series(1, 20) g`,
		`INSERT INTO hook_delivery (hook, delivery_id, outcome, client) SELECT 'h' || (g % 20 + 1), 'd' || g, 'submitted', '127.0.0.1'
			FROM generate_series(1, 100000) g`,
		`INSERT INTO asset_event (asset, emitted_by) SELECT 'a' || (g % 10), 'test' FROM generate_series(1, 100000) g`,
		`INSERT INTO asset_consumer (workflow_name, workflow_version, all_of, assets) VALUES ('wf', 1, true, '{a1,a2,a3}')`,
		`INSERT INTO asset_pending (consumer, asset, event_id) SELECT 'wf', asset, id FROM asset_event WHERE asset IN ('a1', 'a2')`,
		`INSERT INTO asset_consumption (consumer, event_id, workflow_instance_id) SELECT 'wf', id, id FROM asset_event WHERE asset = 'a3'`,
	} {
		if _, err := db.SQL().ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	sensors, err := db.WaitingSensors(ctx, limit)
	if err != nil || len(sensors) != limit || sensors[0].Name != "s300" || sensors[0].PausedStep == nil || *sensors[0].PausedStep != "sensor" {
		t.Fatalf("WaitingSensors = %d rows, first %+v, %v; want %d, newest first", len(sensors), sensors[0], err, limit)
	}
	consumers, err := db.AssetConsumerWaits(ctx, "", limit)
	if err != nil || len(consumers) != 1 || len(consumers[0].Assets) != 3 || consumers[0].Assets[0].Pending != 1000 ||
		consumers[0].Assets[2].Pending != 0 || consumers[0].Assets[2].LastEvent == nil || consumers[0].LastRun == nil {
		t.Fatalf("AssetConsumerWaits = %+v, %v", consumers, err)
	}
	big := []string{"task_instance", "hook_delivery", "asset_event", "asset_pending", "asset_consumption"}
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := db.SQL().Exec(`ANALYZE ` + strings.Join(big, ", ")); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name  string
			query string
			args  []any
		}{
			{"sensors", dao.WaitingSensorsSQL, []any{limit}},
			{"hooks", dao.TriggerHooksSQL, []any{limit}},
			{"asset consumers", dao.AssetConsumerWaitsSQL, []any{limit, nil, dao.MaxPendingCounted}},
		} {
			raw := explainAnalyze(t, db, false, c.query, "", c.args...)
			joined := strings.Join(flatten(t, raw), "\n")
			for _, table := range big {
				if strings.Contains(joined, "Seq Scan|"+table+"|") {
					t.Errorf("%s (analyzed: %v) scans %s:\n%s", c.name, analyzed, table, joined)
				}
			}
			if c.name == "sensors" {
				// Through the partial index always. Without statistics the planner guesses a
				// handful of waiting sensors and may read them all and sort them (here 400,
				// where autovacuum has not analyzed the table yet): the bound on rows read holds
				// once the table has statistics.
				read := examined(t, raw, "task_instance")
				if (analyzed && read > 2*limit) || !strings.Contains(joined, "|task_instance_waiting_sensor") {
					t.Errorf("sensors (analyzed: %v) read %v rows of task_instance, want at most %d through task_instance_waiting_sensor:\n%s",
						analyzed, read, 2*limit, joined)
				}
			}
		}
	}
}
