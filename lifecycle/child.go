package lifecycle

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// MaxNesting is how many levels of children an instance that was submitted may have below it:
// a workflow task whose child would be deeper fails instead of starting it, which stops a
// chain of workflows that start each other.
const MaxNesting = 10

// startChild is the transition "child started" for the workflow task c of wf, which Decide
// says runs, in the advance's transaction that holds wf locked: it renders the child's params
// over its inputs in (params, asset events) and the upstream outputs in tasks, creates the child through Submit, the one
// submission path, and creates the task waiting on it (dao.TaskCreateWaitingOnChild). A task
// that cannot start its child (its params do not render, the workflow or version is not
// stored, the child would nest too deep, its workflow or its concurrency key is full and says
// when-full: skip, its params do not render its concurrency key) is
// returned as a row to create failed, with the reason; nil when the child started. An error
// is the database's, and rolls the whole advance back, child included.
func (d *Driver) startChild(ctx context.Context, q *dao.Queries, wf *dao.WorkflowInstance, c Planned, in inputs, tasks []dao.TaskOutcome) (*dao.NewTask, error) {
	t := c.Task
	row, err := taskRow(wf.ID, wf.Priority, c, in, tasks)
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) (*dao.NewTask, error) {
		row.State, row.Error = dao.TaskFailed, fmt.Sprintf(format, args...)
		return &row, nil
	}
	depth, err := q.WorkflowNestingDepth(ctx, wf.ID, MaxNesting)
	if err != nil {
		return nil, err
	}
	if depth >= MaxNesting {
		return fail("task %q: workflow instance %d is %d levels of children below the instance submitted; a child may be at most %d",
			t.Name, wf.ID, depth, MaxNesting)
	}
	childParams, err := t.ChildParams(ctx, workflow.TemplateData{Params: in.params, Upstream: upstream(t, tasks), Assets: in.assets})
	if err != nil {
		return fail("%v", err)
	}
	version := t.Version
	if version == 0 {
		if version, err = q.DefinitionLatest(ctx, t.Workflow); err != nil {
			return nil, err
		}
		if version == 0 {
			return fail("task %q: workflow %q is not stored: submit its file first", t.Name, t.Workflow)
		}
	}
	spec, err := d.specs.Get(ctx, q, t.Workflow, version)
	if errors.Is(err, sql.ErrNoRows) {
		return fail("task %q: workflow %q has no version %d stored", t.Name, t.Workflow, version)
	}
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(childParams)
	if err != nil {
		return nil, err
	}
	child, err := Submit(ctx, q, Submission{Spec: spec, Version: version, Params: raw, Priority: row.Priority})
	var keyErr *KeyError
	var paramsErr *ParamsError
	if errors.Is(err, dao.ErrWorkflowFull) || errors.As(err, &keyErr) || errors.As(err, &paramsErr) {
		return fail("task %q: %v", t.Name, err)
	}
	if err != nil {
		return nil, err
	}
	if _, err := q.TaskCreateWaitingOnChild(ctx, row, child); err != nil {
		return nil, err
	}
	return nil, nil
}

// finalOutput is the output of an instance of spec whose task instances are tasks, which its
// parent task gets if it is a child that succeeded: the output of its final task, the one
// written last in its file among those no other task depends on ("" if it has none).
func finalOutput(spec *workflow.Spec, tasks []dao.TaskOutcome) string {
	depended := map[string]bool{}
	for _, t := range spec.Tasks {
		for _, dep := range t.DependsOn {
			depended[dep] = true
		}
	}
	for i := len(spec.Tasks) - 1; i >= 0; i-- {
		name := spec.Tasks[i].Name
		if depended[name] {
			continue
		}
		for _, ti := range tasks {
			if ti.Name == name && ti.Output != nil {
				return *ti.Output
			}
		}
		return ""
	}
	return ""
}
