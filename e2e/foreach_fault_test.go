package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// Scenario: a for-each of 40 recorded items, at most 4 at once. The first master is killed
// -9 (at the fault point the faultinject build offers) between creating the items and
// committing them: it leaves nothing, and another master expands the for-each again. Once
// some items have run, the master that owns the instance is killed -9 as well, mid-way; the
// last master takes the instance over after the failover and creates the rest. The history
// shows every item ran exactly once, never more than 4 at once, created in index order, and
// the instance succeeded with the 40 outputs.
func TestFaultMasterKilledMidForEach(t *testing.T) {
	f := setupFault(t)
	const items, maxParallel = 40, 4
	first := f.startMaster(t, "master-1", "ZKSCHED_TEST_FAULT=foreach-before-commit")
	f.startWorker(t, "worker-1", 3)
	f.startWorker(t, "worker-2", 3)
	spec, err := workflow.Parse(fmt.Appendf(nil, `
name: fan-out
tasks:
  - name: each
    type: shell
    for-each: "{{ range %d }}{{ . }}\n{{ end }}"
    max-parallel: %d
    command: %q
  - {name: after, type: shell, depends-on: [each], command: %q}
`, items, maxParallel, f.rec.Command("sleep 0.3"), f.rec.Command("true")))
	if err != nil {
		t.Fatal(err)
	}
	def, _ := json.Marshal(spec)
	var wf int64
	if err := f.db.Tx(context.Background(), func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(context.Background(), spec.Name, def, lifecycle.Facts(spec))
		if err != nil {
			return err
		}
		wf, err = lifecycle.Submit(context.Background(), q, lifecycle.Submission{Spec: spec, Version: v})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// The first master dies in the transaction that expands the for-each: nothing of it stays.
	select {
	case <-first.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("master-1 did not reach the fault point")
	}
	if got := first.KilledBy(); got != syscall.SIGKILL {
		t.Fatalf("master-1 ended by %v, want SIGKILL at the fault point:\n%s", got, tailLines(first.Log(), 20))
	}
	if tasks := f.taskList(t, wf); len(tasks) != 0 {
		t.Fatalf("after the master died mid-expansion the instance has %d task instances, want none", len(tasks))
	}
	masters := []*proc{f.startMaster(t, "master-2"), f.startMaster(t, "master-3")}

	// Some items run; then the instance's owner is killed too.
	f.waitRuns(t, 60*time.Second, "8 items to have run", func(rs []history.Run) bool {
		ended := 0
		for _, r := range rs {
			if r.Ended {
				ended++
			}
		}
		return ended >= 8
	})
	var victim *proc
	waitUntil(t, 30*time.Second, "a master to own the instance", func() bool {
		owner := f.owner(t, wf)
		for _, m := range masters {
			if m.id == owner {
				victim = m
			}
		}
		return victim != nil
	})
	faultAt := time.Now()
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s, the owner, with %d items created", victim.Name, len(f.taskList(t, wf))-1)

	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt, Deadline: 90 * time.Second})
	tasks := f.taskList(t, wf)
	byIndex := make([]dao.TaskInstance, items)
	seen := 0
	for _, ti := range tasks {
		name, i, ok := workflow.ParseItemName(ti.Name)
		if !ok {
			continue
		}
		if name != "each" || i >= items || byIndex[i].ID != 0 {
			t.Fatalf("item instance %s: unexpected or twice", ti.Name)
		}
		byIndex[i] = ti
		seen++
		if got := f.attempts(t, ti.ID); len(got) != 1 || ti.State != dao.TaskSucceeded {
			t.Errorf("%s: %s, attempts %v; want succeeded in one attempt", ti.Name, ti.State, got)
		}
	}
	if seen != items {
		t.Fatalf("%d item instances, want %d", seen, items)
	}
	for i := 1; i < items; i++ {
		if byIndex[i].ID < byIndex[i-1].ID {
			t.Errorf("%s was created before %s", byIndex[i].Name, byIndex[i-1].Name)
		}
	}
	var parent dao.TaskInstance
	for _, ti := range tasks {
		if ti.Name == "each" {
			parent = ti
		}
	}
	var outputs []string
	if parent.State != dao.TaskSucceeded || parent.Output == nil || json.Unmarshal([]byte(*parent.Output), &outputs) != nil || len(outputs) != items {
		t.Errorf("parent = %s with output %v; want succeeded with %d outputs", parent.State, parent.Output, items)
	}

	// Never more than max-parallel items alive at once, by the run log.
	runs, err := f.rec.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range runs {
		if r.TaskID != byIndex[0].ID && !slices.ContainsFunc(byIndex, func(ti dao.TaskInstance) bool { return ti.ID == r.TaskID }) {
			continue
		}
		edges = append(edges, edge{r.Start, 1}, edge{r.Last, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same moment
	})
	alive, most := 0, 0
	for _, e := range edges {
		alive += e.delta
		most = max(most, alive)
	}
	if most > maxParallel {
		t.Errorf("%d items ran at once, want at most %d", most, maxParallel)
	}
	t.Logf("figure: items alive at once at most: %d (max-parallel %d)", most, maxParallel)
	figure(t, "overlap", rep.MaxOverlap(), 0)
}
