package master

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/workflow"
)

// TestForEachEndToEnd: a master renders a root for-each over the run's params, creates its
// items two at a time in index order as a worker ends them, ends the parent with their
// outputs as a JSON array, which the task after it gets, and the instance succeeds.
func TestForEachEndToEnd(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 100 * time.Millisecond})
	id := submitFile(t, db, `
name: digest
params: {docs: '["a.md", "b.md", "c.md", "d.md", "e.md"]'}
tasks:
  - {name: summarise, type: noop, for-each: "{{ .params.docs }}", max-parallel: 2}
  - {name: publish, type: noop, depends-on: [summarise]}
`, nil)
	for i := range 5 {
		item := claimOne(t, m, db, workflow.ItemName("summarise", i))
		var p workflow.TaskParams
		if err := json.Unmarshal(item.Params, &p); err != nil || p.Item == nil || p.Item.Index != i || p.Item.Value != string(rune('a'+i))+".md" {
			t.Fatalf("item %d params item = %+v, %v", i, p.Item, err)
		}
		live := 0
		tasks, err := db.TaskListByWorkflow(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range tasks {
			if _, _, ok := workflow.ParseItemName(ti.Name); ok && !ti.State.Terminal() {
				live++
			}
		}
		if live > 2 {
			t.Fatalf("%d items unended with max-parallel 2", live)
		}
		out := fmt.Sprintf("summary %d", i)
		if err := db.TaskFinishIfRunning(ctx, item.Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded, Output: &out}); err != nil {
			t.Fatal(err)
		}
	}
	publish := claimOne(t, m, db, "publish")
	var p workflow.TaskParams
	want := `["summary 0","summary 1","summary 2","summary 3","summary 4"]`
	if err := json.Unmarshal(publish.Params, &p); err != nil || p.Upstream["summarise"].Output != want {
		t.Fatalf("publish's upstream = %+v (%v); want the items' outputs %s", p.Upstream, err, want)
	}
	succeed(t, db, publish)
	m.waitFor(t, "the instance to succeed", func() bool {
		wf, err := db.WorkflowGet(ctx, id)
		return err == nil && wf.State == dao.WorkflowSucceeded
	})
	if parent := taskNamed(t, db, id, "summarise"); parent.ItemCount == nil || *parent.ItemCount != 5 || parent.Attempt != 0 {
		t.Errorf("parent = %+v; want 5 items, never attempted", parent)
	}
}
