package master

import (
	"fmt"
	"strings"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// plan is what one advance of a workflow instance does: the task instances to create, and
// whether the instance is finished.
type plan struct {
	// create holds the tasks whose upstream all succeeded (to queue) and those with a failed,
	// killed or skipped upstream (to skip), in DAG order.
	create []planned
	// done is set when every task has reached a terminal state.
	done  bool
	state dao.WorkflowState
	err   string
}

type planned struct {
	task  *workflow.Task
	state dao.TaskState
}

// advance decides the next step of a workflow instance from its spec and the states of the
// task instances it has so far. A task instance is created only when all of its dependencies
// are terminal: queued if they all succeeded, skipped otherwise, so a failure skips its whole
// downstream in one step while independent branches go on.
func advance(spec *workflow.Spec, states map[string]dao.TaskState) plan {
	var p plan
	known := make(map[string]dao.TaskState, len(spec.Tasks))
	for k, v := range states {
		known[k] = v
	}
	for _, name := range spec.Order() {
		if _, exists := known[name]; exists {
			continue
		}
		t, _ := spec.Task(name)
		next, ready := dao.TaskQueued, true
		for _, dep := range t.DependsOn {
			switch s, ok := known[dep]; {
			case !ok || !s.Terminal():
				ready = false
			case s != dao.TaskSucceeded:
				next = dao.TaskSkipped
			}
		}
		if !ready {
			continue
		}
		known[name] = next
		p.create = append(p.create, planned{task: t, state: next})
	}
	var failed []string
	for _, t := range spec.Tasks {
		s, ok := known[t.Name]
		if !ok || !s.Terminal() {
			return p
		}
		// A skipped task is the consequence of a failure listed here already.
		if s == dao.TaskFailed || s == dao.TaskKilled {
			failed = append(failed, fmt.Sprintf("%s %s", t.Name, s))
		}
	}
	p.done, p.state = true, dao.WorkflowSucceeded
	if len(failed) > 0 {
		p.state, p.err = dao.WorkflowFailed, "tasks did not succeed: "+strings.Join(failed, ", ")
	}
	return p
}
