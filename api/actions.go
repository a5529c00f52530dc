package api

import (
	"context"
	"database/sql"
	"errors"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// The operators' actions, shared by the API and the UI's forms. The conditions that make them
// safe against a worker or a master acting at the same moment are in dao (task_action.go).

func (s *Server) killTask(ctx context.Context, id int64) (dao.KillResult, error) {
	res, err := s.db.TaskKill(ctx, id)
	if err != nil {
		return res, err
	}
	ev := zerolog.Ctx(ctx).Info().Int64("task_instance", id).Int64("workflow_instance", res.WorkflowInstanceID).
		Int("attempt", res.Attempt)
	if res.State == dao.TaskKilled {
		ev.Msg("killed a queued task instance")
	} else {
		ev.Str("worker", deref(res.WorkerID)).Msg("asked the worker to kill a running task instance")
	}
	return res, nil
}

func (s *Server) rerunTask(ctx context.Context, id int64) (dao.RerunResult, int64, error) {
	t, err := s.db.TaskGet(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return dao.RerunResult{}, 0, notFound("task instance", id)
	}
	if err != nil {
		return dao.RerunResult{}, 0, err
	}
	if t.State != dao.TaskFailed && t.State != dao.TaskKilled {
		return dao.RerunResult{}, t.WorkflowInstanceID, &dao.ConflictError{Kind: "task", ID: id, State: string(t.State), Action: "rerun"}
	}
	wf, err := s.db.WorkflowGet(ctx, t.WorkflowInstanceID)
	if err != nil {
		return dao.RerunResult{}, t.WorkflowInstanceID, err
	}
	spec, err := s.spec(ctx, wf)
	if err != nil {
		return dao.RerunResult{}, t.WorkflowInstanceID, err
	}
	res, err := s.db.WorkflowRerun(ctx, wf.ID, []int64{id}, below(spec, []string{t.Name}))
	if err != nil {
		return res, wf.ID, err
	}
	zerolog.Ctx(ctx).Info().Int64("task_instance", id).Int64("workflow_instance", wf.ID).
		Int("deleted_skipped", res.Deleted).Bool("reopened", res.Reopened).Msg("rerun a task instance")
	return res, wf.ID, nil
}

func (s *Server) rerunWorkflow(ctx context.Context, id int64) (dao.RerunResult, error) {
	wf, err := s.db.WorkflowGet(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return dao.RerunResult{}, notFound("workflow instance", id)
	}
	if err != nil {
		return dao.RerunResult{}, err
	}
	tasks, err := s.db.TaskListByWorkflow(ctx, id)
	if err != nil {
		return dao.RerunResult{}, err
	}
	var ids []int64
	var names []string
	for _, t := range tasks {
		if t.State == dao.TaskFailed || t.State == dao.TaskKilled {
			ids = append(ids, t.ID)
			names = append(names, t.Name)
		}
	}
	if len(ids) == 0 {
		return dao.RerunResult{}, errorf(http.StatusConflict, "workflow instance %d has no failed or killed task to rerun", id)
	}
	spec, err := s.spec(ctx, wf)
	if err != nil {
		return dao.RerunResult{}, err
	}
	res, err := s.db.WorkflowRerun(ctx, id, ids, below(spec, names))
	if err != nil {
		return res, err
	}
	zerolog.Ctx(ctx).Info().Int64("workflow_instance", id).Ints64("task_instances", res.Requeued).
		Int("deleted_skipped", res.Deleted).Bool("reopened", res.Reopened).Msg("rerun a workflow instance from its failed tasks")
	return res, nil
}

func (s *Server) stopWorkflow(ctx context.Context, id int64) (dao.StopResult, error) {
	res, err := s.db.WorkflowStop(ctx, id)
	if err != nil {
		return res, err
	}
	zerolog.Ctx(ctx).Info().Int64("workflow_instance", id).Int("killed", res.Killed).
		Int("kill_requested", res.KillRequested).Msg("stopped a workflow instance")
	return res, nil
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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
