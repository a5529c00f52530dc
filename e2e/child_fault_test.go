package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// store stores a workflow of the given tasks (each a mapping as in a file) and, if submit is
// set, creates an instance of it, as `zksched submit` does; it returns the instance, 0 for
// none.
func (f *fault) store(t *testing.T, name string, submit bool, timeout string, tasks ...map[string]any) int64 {
	t.Helper()
	file := map[string]any{"name": name, "tasks": tasks}
	if timeout != "" {
		file["timeout"] = timeout
	}
	raw, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := workflow.Parse(raw)
	if err != nil {
		t.Fatalf("workflow %s: %v\n%s", name, err, raw)
	}
	d := lifecycle.Definition{Spec: spec}
	if submit {
		d.Run = &lifecycle.Run{}
	}
	st, err := lifecycle.Define(context.Background(), f.db, d, time.Now())
	if err != nil {
		t.Fatalf("store %s: %v", name, err)
	}
	return st.Instance
}

// TestFaultMasterKilledWhileChildrenRun: the only master is killed with kill -9 while the
// children of two parents it drives run, and the first tasks of two parents that no master
// drives yet still run, so their children are started by the master that takes over. Every child is created once, every
// task runs once, and every parent finishes once, succeeded, with its child's output.
func TestFaultMasterKilledWhileChildrenRun(t *testing.T) {
	f := setupFault(t)
	victim := f.startMaster(t, "master-1")
	f.startWorker(t, "worker-1", 4)
	f.startWorker(t, "worker-2", 4)
	shell := func(name, body string, after ...string) map[string]any {
		task := map[string]any{"name": name, "type": "shell", "command": f.rec.Command(body)}
		if len(after) > 0 {
			task["depends-on"] = after
		}
		return task
	}
	f.store(t, "child", false, "", shell("work", "sleep 3"), shell("done", "true", "work"))
	// A parent with nothing live but its child's task has no owner while the child runs, unless
	// its workflow has a timeout for an owner to enforce: the fast parents have one, so that the
	// master dies owning them.
	parent := func(name, first, timeout string) int64 {
		return f.store(t, name, true, timeout, shell("first", first),
			map[string]any{"name": "run", "type": "workflow", "workflow": "child", "depends-on": []string{"first"}},
			shell("after", "true", "run"))
	}
	// The fast parents' children run when the master dies; the slow parents' start after.
	parents := []int64{parent("fast-1", "sleep 0.2", "10m"), parent("fast-2", "sleep 0.2", "10m"),
		parent("slow-1", "sleep 5", ""), parent("slow-2", "sleep 5", "")}
	// Four runs alive at once: the slow parents' first tasks and the fast ones' children's work.
	f.waitRuns(t, 30*time.Second, "the fast parents' children to run", func(rs []history.Run) bool { return aliveCount(rs) == 4 })
	survivor := f.startMaster(t, "master-2")
	// master-1 drives the fast parents (claimed for their timeout); the slow ones run unowned
	// until their first task ends.
	for i, wf := range parents {
		if owner, want := f.owner(t, wf), map[bool]string{true: victim.id, false: ""}[i < 2]; owner != want {
			t.Fatalf("parent %d is driven by %q; the scenario needs %q", wf, owner, want)
		}
	}
	faultAt := time.Now()
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Every instance of the schema: the parents and the children they started.
	rep := history.Check(t, f.db, f.rec, history.Options{FaultAt: faultAt})
	for _, wf := range parents {
		var kids []int64
		if err := f.db.SQL().SelectContext(context.Background(), &kids,
			`SELECT id FROM workflow_instance WHERE parent_workflow_instance_id = $1`, wf); err != nil {
			t.Fatal(err)
		}
		if len(kids) != 1 {
			t.Errorf("parent %d started children %v, want one", wf, kids)
			continue
		}
		byName := map[string]dao.TaskInstance{}
		for _, id := range []int64{kids[0], wf} {
			for _, ti := range f.taskList(t, id) {
				if got := f.attempts(t, ti.ID); ti.Type != workflow.TypeWorkflow && len(got) != 1 {
					t.Errorf("instance %d task %s attempts %v, want one: no task re-run", id, ti.Name, got)
				}
				byName[ti.Name] = ti
			}
		}
		run, done := byName["run"], byName["done"]
		if run.State != dao.TaskSucceeded || run.Output == nil || done.Output == nil || *run.Output != *done.Output {
			t.Errorf("parent %d's workflow task = %s %v; want succeeded with the output of its child's last task", wf, run.State, run.Output)
		}
		if w, err := f.db.WorkflowGet(context.Background(), wf); err != nil || w.State != dao.WorkflowSucceeded || w.EndedAt == nil {
			t.Errorf("parent %d = %+v, %v; want it finished, succeeded", wf, w, err)
		}
	}
	if ev, ok := f.failoverEvents(t)[victim.id]; !ok || ev.Role != "master" {
		t.Errorf("failover event of %s = %+v (found %v), want the master's", victim.id, ev, ok)
	}
	t.Logf("master-1 %s killed; master-2 %s took over", victim.id, survivor.id)
	figure(t, "overlap", rep.MaxOverlap(), 0)
}
