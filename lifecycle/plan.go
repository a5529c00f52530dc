package lifecycle

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// Plan is what one advance of a workflow instance does: the task instances to create, and
// whether the instance is finished.
type Plan struct {
	// Create holds the tasks whose dependencies have all ended, in DAG order: queued to run,
	// skipped, or failed at once when their when: condition cannot be decided.
	Create []Planned
	// Done is set when every task has reached a terminal state; State and Error are then the
	// instance's end.
	Done  bool
	State dao.WorkflowState
	Error string
}

// Planned is one task instance a Plan creates.
type Planned struct {
	Task  *workflow.Task
	State dao.TaskState
	// Error says why a task is created failed.
	Error string
	// EndReason says why a task is created skipped: its dependencies' ends do not trigger it
	// (dao.EndUpstream), or its when: is false (dao.EndCondition).
	EndReason dao.EndReason
	// Items are a for-each task's items, non-nil for the parent of its items alone: created
	// waiting for them, or succeeded with Output "[]" when there are none.
	Items  []string
	Output *string
}

// Runs says whether a task whose trigger holds runs: its when: condition, rendered over the
// instance's params and the outputs of the task's dependencies. An error fails the task.
type Runs func(t *workflow.Task) (bool, error)

// Expand returns the items of a for-each task that runs (workflow.Task.Items, over the
// instance's params and the outputs of the task's dependencies). An error fails the task.
type Expand func(t *workflow.Task) ([]string, error)

// noItems is the output of a for-each task without items: the JSON array of no outputs.
const noItems = "[]"

// Decide is the rule of a workflow instance's progress: from its spec and the states of the
// task instances it has so far, the next step. A task instance is created only when all of
// its dependencies are terminal. Its trigger (Trigger) says whether what they came to lets
// it run — by default only if they all succeeded, so a failure skips its whole downstream in
// one step while independent branches go on — and then runs, its when: condition, whether it
// does: queued if so, skipped if not, failed if the condition cannot be decided. runs nil
// runs every task whose trigger holds. A for-each task that runs is expanded (expand): it is
// created as the parent of its items, waiting for them (the items are created by the advance,
// and the parent ended once they have ended, see ForEach); succeeded at once, with the output
// "[]", without items; failed when its items cannot be had. expand nil leaves a for-each task
// queued: only Roots passes none, and a root with for-each is never among its tasks. The
// task instances of its items are no tasks of spec, and Decide looks at none of them. When
// every task is terminal the instance ends:
// succeeded if none failed or was killed, failed otherwise, with the failed and killed tasks
// named in its error (Outcome). The worker's statement that ends a single-task workflow
// (dao.TaskFinishManyIfRunning) gives the same end; TestSingleTaskEndMatchesDecide holds the
// two together.
func Decide(spec *workflow.Spec, states map[string]dao.TaskState, runs Runs, expand Expand) Plan {
	var p Plan
	known := make(map[string]dao.TaskState, len(spec.Tasks))
	maps.Copy(known, states)
	for _, name := range spec.Order() {
		if _, exists := known[name]; exists {
			continue
		}
		t, _ := spec.Task(name)
		ready, ok, failed := true, true, false
		for _, dep := range t.DependsOn {
			switch s, seen := known[dep]; {
			case !seen || !s.Terminal():
				ready = false
			case s == dao.TaskFailed || s == dao.TaskKilled:
				ok, failed = false, true
			case s != dao.TaskSucceeded:
				ok = false
			}
		}
		if !ready {
			continue
		}
		c := Planned{Task: t, State: dao.TaskSkipped, EndReason: dao.EndUpstream}
		if Trigger(t.Trigger, ok, failed) {
			c.EndReason = ""
			c.State = dao.TaskQueued
			if runs != nil {
				switch yes, err := runs(t); {
				case err != nil:
					c.State, c.Error = dao.TaskFailed, err.Error()
				case !yes:
					c.State, c.EndReason = dao.TaskSkipped, dao.EndCondition
				}
			}
			if c.State == dao.TaskQueued && t.ForEach != "" && expand != nil {
				switch items, err := expand(t); {
				case err != nil:
					c.State, c.Error = dao.TaskFailed, err.Error()
				case len(items) == 0:
					out := noItems
					c.State, c.Items, c.Output = dao.TaskSucceeded, []string{}, &out
				default:
					c.State, c.Items = dao.TaskWaiting, items
				}
			}
		}
		known[name] = c.State
		p.Create = append(p.Create, c)
	}
	ends := make([]TaskEnd, 0, len(spec.Tasks))
	for _, t := range spec.Tasks {
		s, ok := known[t.Name]
		if !ok || !s.Terminal() {
			return p
		}
		ends = append(ends, TaskEnd{Name: t.Name, State: s})
	}
	p.Done = true
	p.State, p.Error = Outcome(ends)
	return p
}

// Trigger reports whether a task with trigger runs once its dependencies have all ended:
// allSucceeded says they all succeeded, anyFailed that one failed or was killed (a skipped
// dependency is neither).
func Trigger(trigger string, allSucceeded, anyFailed bool) bool {
	switch trigger {
	case workflow.TriggerAllDone:
		return true
	case workflow.TriggerAnyFailed:
		return anyFailed
	default:
		return allSucceeded
	}
}

// TaskEnd is a task instance's terminal state, by task name.
type TaskEnd struct {
	Name  string
	State dao.TaskState
}

// Outcome is the end of a workflow instance whose tasks all ended as ends says, in the
// spec's order: succeeded when none failed or was killed, or failed, naming those that did.
// A skipped task is the consequence of a failure named already, so it is not named.
func Outcome(ends []TaskEnd) (dao.WorkflowState, string) {
	var failed []string
	for _, e := range ends {
		if e.State == dao.TaskFailed || e.State == dao.TaskKilled {
			failed = append(failed, fmt.Sprintf("%s %s", e.Name, e.State))
		}
	}
	if len(failed) == 0 {
		return dao.WorkflowSucceeded, ""
	}
	return dao.WorkflowFailed, "tasks did not succeed: " + strings.Join(failed, ", ")
}

// Roots returns the task instances a new instance of spec with params and priority starts
// with: its tasks without dependencies; or none for a capped workflow or one with a
// concurrency key, which starts them only once admitted, for one with a when: condition or
// a for-each on a root, whose roots a master creates once it has decided the condition and
// rendered the items, for one with a workflow task as a root, whose child a master
// starts, for one with a workflow sensor as a root, which a master creates waiting (see
// awaitRun), and for an asset consumer, whose tasks read the asset events of the run, which a
// master reads (the run's start links them after creating it).
func Roots(spec *workflow.Spec, params json.RawMessage, priority int) ([]dao.NewTask, error) {
	if spec.MaxActiveInstances > 0 || spec.Concurrency != nil || spec.OnAssets != nil {
		return nil, nil
	}
	for _, t := range spec.Tasks {
		if len(t.DependsOn) == 0 && (t.When != "" || t.ForEach != "" || t.Type == workflow.TypeWorkflow || t.WorkflowRun != nil) {
			return nil, nil
		}
	}
	merged, err := instanceParams(spec, params)
	if err != nil {
		return nil, fmt.Errorf("submit %s: %w", spec.Name, err)
	}
	p := Decide(spec, nil, nil, nil)
	rows := make([]dao.NewTask, 0, len(p.Create))
	for _, c := range p.Create {
		row, err := taskRow(0, priority, c, inputs{params: merged}, nil)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// taskRow is the task instance c of the workflow instance wfID (of priority wfPriority) whose
// inputs are in and whose task instances so far are tasks. The parent of a for-each
// task's items runs nowhere: it has no pool, no retries and no timeout of its own (its items
// have the task's).
func taskRow(wfID int64, wfPriority int, c Planned, in inputs, tasks []dao.TaskOutcome) (dao.NewTask, error) {
	state := c.State
	timeSensor := c.Task.Type == workflow.TypeSensor && c.Task.Time != nil && c.Items == nil
	if state == dao.TaskQueued && (c.Task.Type == workflow.TypeWait || timeSensor) {
		state = dao.TaskWaiting
	}
	row, err := newTask(wfID, wfPriority, c.Task, c.Task.Name, state,
		workflow.TaskParams{Task: *c.Task, Params: in.params, Upstream: upstream(c.Task, tasks), Assets: in.assets})
	if err != nil {
		return dao.NewTask{}, err
	}
	if state == dao.TaskWaiting && timeSensor {
		// A time sensor needs no worker: it waits as a wait task does, its wait's timeout
		// its time (EndWaitsPastTimeout).
		row.Timeout = TimeSensorWait(c.Task, time.Now())
	}
	row.Error, row.EndReason = c.Error, c.EndReason
	if c.Items != nil {
		row.Items, row.Output = c.Items, c.Output
		row.Pool, row.MaxRetries, row.RetryInterval, row.Timeout = "", 0, 0, 0
	}
	return row, nil
}

// newTask is the task instance name, in state, of task t of the workflow instance wfID (of
// priority wfPriority), with params: t's own or one of its items'.
func newTask(wfID int64, wfPriority int, t *workflow.Task, name string, state dao.TaskState, params workflow.TaskParams) (dao.NewTask, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return dao.NewTask{}, err
	}
	return dao.NewTask{WorkflowInstanceID: wfID, Name: name, Type: t.Type, Params: raw,
		State: state, Priority: t.Priority + wfPriority, Group: t.Group, Pool: t.Pool,
		MaxRetries: t.Retries, RetryInterval: time.Duration(t.RetryInterval),
		Timeout: time.Duration(t.Timeout)}, nil
}

// upstream returns the outputs of t's dependencies among the workflow instance's tasks,
// which have all ended when t is created: downstream tasks get them in their params. A
// dependency without an output (one that failed, was skipped, or was created in the same
// advance as t) has an empty one.
func upstream(t *workflow.Task, tasks []dao.TaskOutcome) map[string]workflow.Upstream {
	if len(t.DependsOn) == 0 {
		return nil
	}
	out := make(map[string]workflow.Upstream, len(t.DependsOn))
	for _, dep := range t.DependsOn {
		out[dep] = workflow.Upstream{}
	}
	for _, ti := range tasks {
		if _, dep := out[ti.Name]; dep && ti.Output != nil {
			out[ti.Name] = workflow.Upstream{Output: *ti.Output}
		}
	}
	return out
}

// instanceParams are the definition's default parameters overridden by the instance's.
func instanceParams(spec *workflow.Spec, raw json.RawMessage) (map[string]string, error) {
	params := spec.Defaults()
	var given map[string]string
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &given); err != nil {
			return nil, fmt.Errorf("instance params: %w", err)
		}
	}
	maps.Copy(params, given)
	return params, nil
}

// below returns every task downstream of the named ones, transitively: the tasks a failure of
// theirs skipped, which a rerun deletes for the master to create again.
func below(spec *workflow.Spec, names []string) []string {
	seen := map[string]bool{}
	queue := append([]string(nil), names...)
	var out []string
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, d := range spec.Downstream(n) {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
				queue = append(queue, d)
			}
		}
	}
	return out
}
