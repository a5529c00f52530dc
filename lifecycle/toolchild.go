package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/zksched/zksched/dao"
)

// StartToolChild is the transition "child started" for a call of a tool-calling agent's
// workflow tool: it creates an instance of workflow name (version 0: the latest stored) with
// params, linked to the agent's task and to the call, in one transaction under the attempt's
// token. A call that started its child before (an earlier attempt that died while it waited)
// gets that child back instead: a workflow tool's call starts one child, however often it is
// run. Refused params are a *ParamsError; a workflow not stored, or nested too deep, an error
// the model is told.
func StartToolChild(ctx context.Context, db *dao.DB, tok dao.Token, callID, name string, version int, params map[string]string) (int64, error) {
	var child int64
	err := db.Tx(ctx, func(q *dao.Queries) error {
		if id, ok, err := q.ToolChildOfCall(ctx, tok.TaskID, callID); err != nil || ok {
			child = id
			return err
		}
		if version == 0 {
			latest, err := q.DefinitionLatest(ctx, name)
			if err != nil {
				return err
			}
			if latest == 0 {
				return &ToolChildError{Msg: fmt.Sprintf("no workflow %q is stored", name)}
			}
			version = latest
		}
		var specs Specs
		spec, err := specs.Get(ctx, q, name, version)
		if err != nil {
			return &ToolChildError{Msg: fmt.Sprintf("workflow %q has no version %d: %v", name, version, err)}
		}
		ti, err := q.TaskGet(ctx, tok.TaskID)
		if err != nil {
			return err
		}
		depth, err := q.WorkflowNestingDepth(ctx, ti.WorkflowInstanceID, MaxNesting+1)
		if err != nil {
			return err
		}
		if depth+1 > MaxNesting {
			return &ToolChildError{Msg: fmt.Sprintf("the child would be nested %d deep; the limit is %d", depth+1, MaxNesting)}
		}
		raw, err := json.Marshal(params)
		if err != nil {
			return err
		}
		if child, err = Submit(ctx, q, Submission{Spec: spec, Version: version, Params: raw, Priority: spec.Priority, Queue: true}); err != nil {
			return err
		}
		return q.ToolChildLinkIfRunning(ctx, tok, child, callID)
	})
	return child, err
}

// ToolChildError is a child a workflow tool's call cannot start, for the model to be told.
type ToolChildError struct{ Msg string }

func (e *ToolChildError) Error() string { return e.Msg }

// ToolChildResult says whether the child instance id has ended and, if so, how: its state,
// its final output (the output a workflow task would get) and its error.
func ToolChildResult(ctx context.Context, db *dao.DB, id int64) (ended bool, state dao.WorkflowState, output, errMsg string, err error) {
	wf, err := db.WorkflowGet(ctx, id)
	if err != nil {
		return false, "", "", "", err
	}
	if !wf.State.Terminal() {
		return false, wf.State, "", "", nil
	}
	if wf.Error != nil {
		errMsg = *wf.Error
	}
	if wf.State != dao.WorkflowSucceeded {
		return true, wf.State, "", errMsg, nil
	}
	var specs Specs
	spec, err := specs.Get(ctx, db.Queries, wf.WorkflowName, wf.WorkflowVersion)
	if err != nil {
		return false, "", "", "", err
	}
	tasks, err := db.TaskListByWorkflows(ctx, []int64{id})
	if err != nil {
		return false, "", "", "", err
	}
	return true, wf.State, finalOutput(spec, tasks), errMsg, nil
}
