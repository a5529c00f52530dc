package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// A for-each task runs once per item: Decide creates it as a parent task instance under the
// task's own name, waiting (no worker claims it), which records its items; each item is a
// task instance of its own, name[index], queued like any task, whose params carry the item.
// The advance that creates the parent creates its first items, up to max-parallel; every
// later advance of the instance (each item's end wakes the masters) creates the next ones in
// index order while fewer than max-parallel run, and ends the parent once all have ended
// (ForEach). Dependents see the parent's end as any task's, and its output: the JSON array of
// the items' outputs. Everything an advance creates or ends is in its one transaction, and a
// task instance is unique by name in its workflow instance, so an advance that dies midway
// leaves nothing and the next one creates each item once.

// ForEachStep is what one advance does with a for-each task's parent still waiting.
type ForEachStep struct {
	// From and To are the items to create, [From, To): none when equal.
	From, To int
	// Done says the parent ends, as State with Output or Error.
	Done   bool
	State  dao.TaskState
	Output *string
	Error  string
	// OutputTruncated marks Output as the array of the first items' outputs alone
	// (BoundOutput).
	OutputTruncated bool
}

// namedItems is how many items a failed for-each's error names before it counts the rest.
const namedItems = 5

// ForEach is the rule of a for-each task's progress: parent is its parent, waiting, items its
// items' task instances created so far in index order (always the first ones), maxParallel
// its cap (0 for none). While the parent's kill was not asked for, the next items are created
// while fewer than maxParallel run; once all that will be created have ended, the parent ends:
// succeeded with the JSON array of their outputs (each a JSON string, "" for none) in index
// order if they all succeeded, killed if its kill was asked for and an item did not succeed
// or was never created, failed otherwise, naming the items that did not succeed.
func ForEach(parent dao.TaskOutcome, items []dao.TaskOutcome, maxParallel int) ForEachStep {
	count := 0
	if parent.ItemCount != nil {
		count = *parent.ItemCount
	}
	created, live := len(items), 0
	for _, it := range items {
		if !it.State.Terminal() {
			live++
		}
	}
	step := ForEachStep{From: created, To: created}
	if !parent.KillRequested && created < count {
		room := count - created
		if maxParallel > 0 {
			room = min(room, max(maxParallel-live, 0))
		}
		step.To += room
		live += room
	}
	if live > 0 || (step.To < count && !parent.KillRequested) {
		return step
	}
	step.Done = true
	var failed []string
	outputs := make([]string, len(items))
	for i, it := range items {
		if it.State != dao.TaskSucceeded {
			failed = append(failed, fmt.Sprintf("%s %s", it.Name, it.State))
		} else if it.Output != nil {
			outputs[i] = *it.Output
		}
	}
	if n := len(failed); n > namedItems {
		failed = append(failed[:namedItems], fmt.Sprintf("%d more", n-namedItems))
	}
	switch {
	case parent.KillRequested && (created < count || len(failed) > 0):
		step.State, step.Error = dao.TaskKilled, fmt.Sprintf("killed by an operator: %d of %d items created", created, count)
		if len(failed) > 0 {
			step.Error += "; did not succeed: " + strings.Join(failed, ", ")
		}
	case len(failed) == 0:
		raw, _ := json.Marshal(outputs) // strings always marshal
		out := string(raw)
		step.State, step.Output = dao.TaskSucceeded, &out
	default:
		step.State, step.Error = dao.TaskFailed, "items did not succeed: "+strings.Join(failed, ", ")
	}
	return step
}

// BoundOutput holds the output of a for-each task t that succeeded, the JSON array of its
// items' outputs, to t's output-limit (workflow.DefaultOutputLimit when it names none): an
// array over it fails the task with a *workflow.OutputTooLarge error, unless t's
// output-overflow is truncate, when the array keeps the first items whose array fits and is
// marked truncated.
func (s *ForEachStep) BoundOutput(t *workflow.Task) {
	if !s.Done || s.State != dao.TaskSucceeded || s.Output == nil {
		return
	}
	limit := t.OutputLimit
	if limit <= 0 {
		limit = workflow.DefaultOutputLimit
	}
	if len(*s.Output) <= limit {
		return
	}
	if t.OutputOverflow != workflow.OverflowTruncate {
		s.Error = (&workflow.OutputTooLarge{What: "the for-each's output, the JSON array of its items' outputs,", Size: len(*s.Output),
			Limit: limit}).Error()
		s.State, s.Output = dao.TaskFailed, nil
		return
	}
	var outputs []string
	_ = json.Unmarshal([]byte(*s.Output), &outputs) // ForEach made it from strings
	size := len("[]")
	fit := 0
	for i, o := range outputs {
		raw, _ := json.Marshal(o)
		if i > 0 {
			size++ // the comma
		}
		if size += len(raw); size > limit {
			break
		}
		fit++
	}
	raw, _ := json.Marshal(outputs[:fit])
	out := string(raw)
	s.Output, s.OutputTruncated = &out, true
}

// forEach is the for-each side of one advance of the workflow instance wf of spec, whose task
// instances are tasks: it takes every parent still waiting a step (ForEach), reading the
// items it creates with q. It returns the items' task instances to create and the parents'
// ends, and records those ends in tasks, so that Decide, and the outputs the tasks created
// after it see, have them. params gives the instance's inputs.
func forEach(ctx context.Context, q *dao.Queries, wf *dao.WorkflowInstance, spec *workflow.Spec, tasks []dao.TaskOutcome,
	params func() (inputs, error)) ([]dao.NewTask, []dao.ForEachEnd, error) {
	var parents []int // into tasks
	for i, t := range tasks {
		if t.ItemCount != nil && t.State == dao.TaskWaiting {
			parents = append(parents, i)
		}
	}
	if len(parents) == 0 {
		return nil, nil, nil
	}
	type indexed struct {
		index int
		task  dao.TaskOutcome
	}
	byParent := map[string][]indexed{}
	for _, t := range tasks {
		if name, i, ok := workflow.ParseItemName(t.Name); ok {
			byParent[name] = append(byParent[name], indexed{i, t})
		}
	}
	items := make(map[string][]dao.TaskOutcome, len(byParent))
	for name, its := range byParent {
		slices.SortFunc(its, func(a, b indexed) int { return a.index - b.index })
		for _, it := range its {
			items[name] = append(items[name], it.task)
		}
	}
	var rows []dao.NewTask
	var ends []dao.ForEachEnd
	for _, i := range parents {
		parent := &tasks[i]
		task, ok := spec.Task(parent.Name)
		if !ok {
			return nil, nil, fmt.Errorf("workflow instance %d: task instance %s has items but its definition has no such task", wf.ID, parent.Name)
		}
		step := ForEach(*parent, items[parent.Name], task.MaxParallel)
		step.BoundOutput(task)
		if step.To > step.From {
			values, err := q.TaskForEachItems(ctx, parent.ID, step.From, step.To-step.From)
			if err != nil {
				return nil, nil, err
			}
			// None when a kill came after the tasks were read: the next advance ends it.
			if n := len(values); n != 0 && n != step.To-step.From {
				return nil, nil, fmt.Errorf("task instance %d: %d items from %d, want %d", parent.ID, n, step.From, step.To-step.From)
			}
			p, err := params()
			if err != nil {
				return nil, nil, err
			}
			made, err := itemRows(wf, task, p, upstream(task, tasks), values, step.From)
			if err != nil {
				return nil, nil, err
			}
			rows = append(rows, made...)
		}
		if step.Done {
			end := dao.ForEachEnd{ID: parent.ID, State: step.State, Output: step.Output, OutputTruncated: step.OutputTruncated}
			if step.Error != "" {
				end.Error = &step.Error
			}
			ends = append(ends, end)
			parent.State, parent.Output = step.State, step.Output
		}
	}
	return rows, ends, nil
}

// itemRows are the task instances of the items values of for-each task t, from index from on,
// in the workflow instance wf with its inputs in and the outputs of t's dependencies up.
func itemRows(wf *dao.WorkflowInstance, t *workflow.Task, in inputs, up map[string]workflow.Upstream,
	values []string, from int) ([]dao.NewTask, error) {
	rows := make([]dao.NewTask, len(values))
	for i, v := range values {
		var err error
		rows[i], err = newTask(wf.ID, wf.Priority, t, workflow.ItemName(t.Name, from+i), dao.TaskQueued,
			workflow.TaskParams{Task: *t, Params: in.params, Upstream: up, Item: &workflow.Item{Value: v, Index: from + i},
				Assets: in.assets})
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// firstItems is how many of a new for-each parent's items its advance creates.
func firstItems(t *workflow.Task, n int) int {
	if t.MaxParallel > 0 {
		return min(n, t.MaxParallel)
	}
	return n
}
