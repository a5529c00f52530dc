package lifecycle

import (
	"context"
	"fmt"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// The operators' transitions, shared by the API, the UI's forms and the command line. Each
// is one dao transaction whose every write is conditioned on the state it expects, so an
// action racing a worker that finishes the same task, or a master that finishes the same
// workflow, either applies whole or returns a dao.ConflictError; it never overwrites a result.
// audit, unless nil, is the action's audit_event row, committed with it or not at all.

// Kill kills a queued or waiting task instance at once, or asks the worker of a running one to
// stop it (dao.TaskKillIfQueuedOrRunning). A waiting workflow task's child is stopped with it.
func Kill(ctx context.Context, db *dao.DB, id int64, audit *dao.AuditEvent) (dao.KillResult, error) {
	var res dao.KillResult
	err := db.Tx(ctx, func(q *dao.Queries) error {
		var err error
		if res, err = q.TaskKillIfQueuedOrRunning(ctx, id); err != nil {
			return err
		}
		if audit != nil {
			return q.AuditInsert(ctx, *audit)
		}
		return nil
	})
	if err != nil {
		return dao.KillResult{}, err
	}
	return res, nil
}

// RerunTask puts a failed or killed task instance back in the queue, with the tasks its end
// skipped created again once it succeeds, and reopens its workflow instance if it had ended
// (dao.TaskRerunIfFailedOrKilled). It returns the task's workflow instance as well, 0 when the
// task does not exist. specs is the caller's cache of definitions, read on db. audit, unless
// nil, gives the rerun's audit_event row once the workflow instance is known. A task that
// failed at its creation (its when: condition could not be decided) never ran: it is created
// again instead, and its condition decided anew. A for-each task is rerun whole, whether its
// parent or one of its items is named: its failed and killed items go back to the queue (the
// succeeded ones keep their outputs) and its parent waits again, for them and for the items
// never created, which a master creates.
func RerunTask(ctx context.Context, db *dao.DB, specs *Specs, id int64, audit func(workflow int64) *dao.AuditEvent) (dao.RerunResult, int64, error) {
	t, err := db.TaskGet(ctx, id)
	if err != nil {
		return dao.RerunResult{}, 0, err
	}
	if t.State != dao.TaskFailed && t.State != dao.TaskKilled {
		return dao.RerunResult{}, t.WorkflowInstanceID, &dao.ConflictError{Kind: "task", ID: id, State: string(t.State), Action: "rerun"}
	}
	wf, err := db.WorkflowGet(ctx, t.WorkflowInstanceID)
	if err != nil {
		return dao.RerunResult{}, t.WorkflowInstanceID, err
	}
	spec, err := specs.Get(ctx, db.Queries, wf.WorkflowName, wf.WorkflowVersion)
	if err != nil {
		return dao.RerunResult{}, wf.ID, err
	}
	var ev *dao.AuditEvent
	if audit != nil {
		ev = audit(wf.ID)
	}
	ids, recreate := []int64{id}, below(spec, []string{t.Name})
	if neverRan(t) {
		ids, recreate = nil, append(recreate, t.Name)
	}
	if parent, ok := forEachOf(spec, t.Name); ok || t.ItemCount != nil {
		// A for-each task is rerun whole: its parent waits again, with every failed or
		// killed item of it queued.
		if !ok {
			parent = t.Name
		}
		tasks, err := db.TaskListByWorkflow(ctx, wf.ID)
		if err != nil {
			return dao.RerunResult{}, wf.ID, err
		}
		ids, recreate = nil, below(spec, []string{parent})
		for _, ti := range tasks {
			if p, _, item := workflow.ParseItemName(ti.Name); (ti.Name == parent || item && p == parent) &&
				(ti.State == dao.TaskFailed || ti.State == dao.TaskKilled) {
				ids = append(ids, ti.ID)
			}
		}
	}
	res, err := db.TaskRerunIfFailedOrKilled(ctx, wf.ID, ids, recreate, ev)
	return res, wf.ID, err
}

// forEachOf returns the for-each task of spec whose item name names, if it names one.
func forEachOf(spec *workflow.Spec, name string) (string, bool) {
	task, _, ok := workflow.ParseItemName(name)
	if !ok {
		return "", false
	}
	if t, ok := spec.Task(task); !ok || t.ForEach == "" {
		return "", false
	}
	return task, true
}

// ErrNothingToRerun is returned by RerunWorkflow for an instance without a failed or killed
// task.
var ErrNothingToRerun = fmt.Errorf("no failed or killed task to rerun")

// RerunWorkflow is RerunTask for every failed or killed task instance of a workflow instance
// at once. audit, unless nil, gives the rerun's audit_event row once the tasks are known.
func RerunWorkflow(ctx context.Context, db *dao.DB, specs *Specs, id int64, audit func(tasks []int64) *dao.AuditEvent) (dao.RerunResult, error) {
	wf, err := db.WorkflowGet(ctx, id)
	if err != nil {
		return dao.RerunResult{}, err
	}
	tasks, err := db.TaskListByWorkflow(ctx, id)
	if err != nil {
		return dao.RerunResult{}, err
	}
	var ids, all []int64
	var names, recreate []string
	for _, t := range tasks {
		if t.State != dao.TaskFailed && t.State != dao.TaskKilled {
			continue
		}
		all, names = append(all, t.ID), append(names, t.Name)
		if neverRan(&t) {
			recreate = append(recreate, t.Name)
		} else {
			ids = append(ids, t.ID)
		}
	}
	if len(all) == 0 {
		return dao.RerunResult{}, fmt.Errorf("workflow instance %d: %w", id, ErrNothingToRerun)
	}
	spec, err := specs.Get(ctx, db.Queries, wf.WorkflowName, wf.WorkflowVersion)
	if err != nil {
		return dao.RerunResult{}, err
	}
	var ev *dao.AuditEvent
	if audit != nil {
		ev = audit(all)
	}
	return db.TaskRerunIfFailedOrKilled(ctx, id, ids, append(recreate, below(spec, names)...), ev)
}

// neverRan reports whether t ended before any attempt: failed at its creation, a wait task
// (which no worker ever runs) timed out, failed by its signal or killed, or a workflow task
// (which no worker runs either) failed or killed with its child. A rerun creates such a task
// again rather than queueing it: a workflow task with a new child. A for-each task's parent,
// which never runs itself, ended with its items: a rerun has it wait again for them.
func neverRan(t *dao.TaskInstance) bool {
	// A sensor that never had an attempt waited on no worker (a time or workflow sensor): it
	// is created again, to wait again, never queued.
	runsNowhere := t.Type == workflow.TypeWait || t.Type == workflow.TypeWorkflow || t.Type == workflow.TypeSensor
	return t.Attempt == 0 && t.ItemCount == nil && (t.State == dao.TaskFailed || (t.State == dao.TaskKilled && runsNowhere))
}

// Stop stops a submitted or running workflow instance: it ends stopped, its queued and waiting
// tasks are killed and the workers of its running ones are asked to kill them, its children
// are stopped, and if it is a child its parent task fails (dao.WorkflowStopIfActive).
func Stop(ctx context.Context, db *dao.DB, id int64, audit *dao.AuditEvent) (dao.StopResult, error) {
	return db.WorkflowStopIfActive(ctx, id, audit)
}
