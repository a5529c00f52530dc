package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAssetsSurviveAMasterKilledMidFire: two producers' asset events start one consumer run
// per pair of events, with real processes. A master is killed (SIGKILL) after taking a pair
// of events out of the consumer's queue and before creating the run; the pair is still
// queued after it, and the next masters start its run once: with the producers' runs that
// follow, three pairs start exactly three runs, each event taken once.
func TestAssetsSurviveAMasterKilledMidFire(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	ctx := context.Background()
	consumer := e.file(t, "report.yaml", `
name: report
on-assets: {all: [orders, customers]}
tasks:
  - {name: report, type: noop}
`)
	if out, code := e.Run("define", consumer); code != 0 {
		t.Fatalf("define: exit %d\n%s", code, out)
	}
	for _, a := range []string{"orders", "customers"} {
		if out, code := e.Run("asset", "emit", a, "--output", a+"-0"); code != 0 || !strings.Contains(out, "emitted") {
			t.Fatalf("asset emit %s: exit %d\n%s", a, code, out)
		}
	}
	doomed := e.Master("doomed", "ZKSCHED_TEST_FAULT=assets-before-submit")
	doomed.Wait(t, 30*time.Second)
	if doomed.KilledBy() != syscall.SIGKILL || !strings.Contains(doomed.Log(), "fault injection") {
		t.Fatalf("the doomed master did not die at the fault point; log:\n%s", doomed.Log())
	}
	var pending, runs int
	if err := e.db.SQL().QueryRow(`SELECT (SELECT count(*) FROM asset_pending),
		(SELECT count(*) FROM workflow_instance WHERE workflow_name = 'report')`).Scan(&pending, &runs); err != nil {
		t.Fatal(err)
	}
	if pending != 2 || runs != 0 {
		t.Fatalf("after the kill: %d events queued, %d runs; want 2 and none", pending, runs)
	}

	e.Master("master-1")
	e.Master("master-2")
	e.Worker("worker")
	for _, p := range []struct{ name, asset string }{{"load-orders", "orders"}, {"load-customers", "customers"}} {
		f := e.file(t, p.name+".yaml", "name: "+p.name+"\ntasks:\n  - {name: load, type: shell, command: 'echo "+p.asset+"-$ZKSCHED_WORKFLOW_INSTANCE', produces: ["+p.asset+"]}\n")
		for range 2 {
			if out, code := e.Run("submit", f); code != 0 {
				t.Fatalf("submit %s: exit %d\n%s", p.name, code, out)
			}
		}
	}
	waitUntil(t, 60*time.Second, "three consumer runs to succeed", func() bool {
		var done int
		_ = e.db.SQL().Get(&done, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'report' AND state = 'succeeded'`)
		return done == 3
	})
	var consumed, distinct, left int
	if err := e.db.SQL().QueryRow(`SELECT (SELECT count(*) FROM workflow_instance WHERE workflow_name = 'report'),
		(SELECT count(*) FROM asset_consumption), (SELECT count(DISTINCT event_id) FROM asset_consumption),
		(SELECT count(*) FROM asset_pending)`).Scan(&runs, &consumed, &distinct, &left); err != nil {
		t.Fatal(err)
	}
	if runs != 3 || consumed != 6 || distinct != 6 || left != 0 {
		t.Errorf("%d runs, %d events taken (%d distinct), %d left; want 3 runs of 6 events, none left", runs, consumed, distinct, left)
	}
	var ids []int64
	if err := e.db.SQL().Select(&ids, `SELECT id FROM workflow_instance WHERE workflow_name = 'report' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		evs, err := e.db.AssetEventsOfRun(ctx, id)
		if err != nil || len(evs) != 2 || evs[0].Asset == evs[1].Asset {
			t.Errorf("run %d started on %+v, %v; want one event of each asset", id, evs, err)
		}
	}
}
