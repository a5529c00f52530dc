package api

import (
	"database/sql"
	"errors"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// The operators' actions, shared by the API and the UI's forms. The conditions that make them
// safe against a worker or a master acting at the same moment are in dao (task_action.go).

// Each writes its audit_event row in its own transaction (auditEvent) and marks the request
// audited once that committed.

func (s *Server) killTask(r *http.Request, id int64) (dao.KillResult, error) {
	ctx := r.Context()
	res, err := s.db.TaskKillAudited(ctx, id, s.auditEvent(r))
	if err != nil {
		return res, err
	}
	auditDone(r)
	ev := zerolog.Ctx(ctx).Info().Int64("task_instance", id).Int64("workflow_instance", res.WorkflowInstanceID).
		Int("attempt", res.Attempt)
	if res.State == dao.TaskKilled {
		ev.Msg("killed a queued task instance")
	} else {
		ev.Str("worker", deref(res.WorkerID)).Msg("asked the worker to kill a running task instance")
	}
	return res, nil
}

func (s *Server) rerunTask(r *http.Request, id int64) (dao.RerunResult, int64, error) {
	ctx := r.Context()
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
	auditOf(r).setParams(map[string]any{"workflow_instance": wf.ID})
	res, err := s.db.WorkflowRerunAudited(ctx, wf.ID, []int64{id}, below(spec, []string{t.Name}), s.auditEvent(r))
	if err != nil {
		return res, wf.ID, err
	}
	auditDone(r)
	zerolog.Ctx(ctx).Info().Int64("task_instance", id).Int64("workflow_instance", wf.ID).
		Int("deleted_skipped", res.Deleted).Bool("reopened", res.Reopened).Msg("rerun a task instance")
	return res, wf.ID, nil
}

func (s *Server) rerunWorkflow(r *http.Request, id int64) (dao.RerunResult, error) {
	ctx := r.Context()
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
	auditOf(r).setParams(map[string]any{"task_instances": ids})
	res, err := s.db.WorkflowRerunAudited(ctx, id, ids, below(spec, names), s.auditEvent(r))
	if err != nil {
		return res, err
	}
	auditDone(r)
	zerolog.Ctx(ctx).Info().Int64("workflow_instance", id).Ints64("task_instances", res.Requeued).
		Int("deleted_skipped", res.Deleted).Bool("reopened", res.Reopened).Msg("rerun a workflow instance from its failed tasks")
	return res, nil
}

func (s *Server) stopWorkflow(r *http.Request, id int64) (dao.StopResult, error) {
	ctx := r.Context()
	res, err := s.db.WorkflowStopAudited(ctx, id, s.auditEvent(r))
	if err != nil {
		return res, err
	}
	auditDone(r)
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
