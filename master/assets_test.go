package master

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// TestAssetsStartRunOnWakeup: a producer's success wakes the masters, and one starts the
// consumer's run at once, long before its next poll; the run's tasks then run as any do.
func TestAssetsStartRunOnWakeup(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: time.Hour})
	f := NewAssetFirer(m.Master)
	f.waiting.Init()
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Run(fctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	<-f.waiting.C() // its first look, with no events yet

	consumer := `
name: report
on-assets: {all: [orders]}
tasks:
  - {name: report, type: noop, when: '{{ eq .assets.orders.output "42 rows" }}'}
`
	spec, err := workflow.Parse([]byte(consumer))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: spec, File: []byte(consumer)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	submitFile(t, db, "name: load\ntasks: [{name: load, type: noop, produces: [orders]}]\n", nil)
	load := claimOne(t, m, db, "load")
	out := "42 rows"
	done, err := lifecycle.Finish(ctx, db, []dao.Finish{{Token: load.Token(), Result: dao.AttemptResult{
		Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded, Output: &out, Produces: []string{"orders"}}}})
	if err != nil || !done[0].Recorded {
		t.Fatalf("finish = %+v, %v", done, err)
	}
	var id int64
	deadline := time.After(30 * time.Second)
	for id == 0 {
		select {
		case <-f.waiting.C():
		case <-deadline:
			t.Fatal("timed out waiting for the consumer's run")
		}
		_ = db.SQL().Get(&id, `SELECT coalesce(max(id), 0) FROM workflow_instance WHERE workflow_name = 'report'`)
	}
	evs, err := db.AssetEventsOfRun(ctx, id)
	if err != nil || len(evs) != 1 || evs[0].Output == nil || *evs[0].Output != out {
		t.Fatalf("the run's events = %+v, %v", evs, err)
	}
	report := claimOne(t, m, db, "report")
	var p workflow.TaskParams
	if err := json.Unmarshal(report.Params, &p); err != nil || p.Assets["orders"].Output != out || p.Assets["orders"].Event != evs[0].ID {
		t.Errorf("the consumer task's params %s lack the event (%v)", report.Params, err)
	}
	succeed(t, db, report)
	m.waitFor(t, "the consumer's run to succeed", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowSucceeded
	})
}
