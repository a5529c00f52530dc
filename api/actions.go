package api

import (
	"database/sql"
	"errors"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
)

// The operators' actions, shared by the API and the UI's forms, are lifecycle transitions
// (lifecycle/actions.go), which hold the conditions that make them safe against a worker or a
// master acting at the same moment.

// Each writes its audit_event row in the action's transaction (auditEvent) and marks the
// request audited once that committed.

func (s *Server) killTask(r *http.Request, id int64) (dao.KillResult, error) {
	ctx := r.Context()
	ev := s.auditEvent(r)
	res, err := lifecycle.Kill(ctx, s.db, id, &ev)
	if err != nil {
		return res, err
	}
	auditDone(r)
	log := zerolog.Ctx(ctx).Info().Int64("task_instance", id).Int64("workflow_instance", res.WorkflowInstanceID).
		Int("attempt", res.Attempt)
	switch res.State {
	case dao.TaskKilled:
		log.Msg("killed a queued task instance")
	case dao.TaskWaiting:
		log.Msg("killing the items of a for-each")
	default:
		log.Str("worker", deref(res.WorkerID)).Msg("asked the worker to kill a running task instance")
	}
	return res, nil
}

func (s *Server) signalTask(r *http.Request, id int64, body signalJSON) (dao.Signalled, error) {
	ctx := r.Context()
	// The audit row keeps whether the signal failed the task and its output's size, never the
	// output itself: it may hold what only the workflow's later tasks should read.
	auditOf(r).setParams(map[string]any{"fail": body.Fail, "output_bytes": len(body.Output)})
	ev := s.auditEvent(r)
	res, err := lifecycle.Signal(ctx, s.db, id, body.Output, body.Fail, &ev)
	if err != nil {
		if errors.Is(err, lifecycle.ErrSignalTooLarge) {
			return res, badRequest("%v", err)
		}
		return res, err
	}
	auditDone(r)
	zerolog.Ctx(ctx).Info().Int64("task_instance", id).Int64("workflow_instance", res.WorkflowInstanceID).Bool("fail", body.Fail).
		Str("state", string(res.State)).Msg("signalled a waiting task instance")
	return res, nil
}

func (s *Server) rerunTask(r *http.Request, id int64) (dao.RerunResult, int64, error) {
	ctx := r.Context()
	res, wf, err := lifecycle.RerunTask(ctx, s.db, &s.specs, id, func(wf int64) *dao.AuditEvent {
		auditOf(r).setParams(map[string]any{"workflow_instance": wf})
		ev := s.auditEvent(r)
		return &ev
	})
	if errors.Is(err, sql.ErrNoRows) && wf == 0 {
		return res, 0, notFound("task instance", id)
	}
	if err != nil {
		return res, wf, err
	}
	auditDone(r)
	zerolog.Ctx(ctx).Info().Int64("task_instance", id).Int64("workflow_instance", wf).
		Int("deleted_skipped", res.Deleted).Bool("reopened", res.Reopened).Msg("rerun a task instance")
	return res, wf, nil
}

func (s *Server) rerunWorkflow(r *http.Request, id int64) (dao.RerunResult, error) {
	ctx := r.Context()
	res, err := lifecycle.RerunWorkflow(ctx, s.db, &s.specs, id, func(tasks []int64) *dao.AuditEvent {
		auditOf(r).setParams(map[string]any{"task_instances": tasks})
		ev := s.auditEvent(r)
		return &ev
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return res, notFound("workflow instance", id)
	case errors.Is(err, lifecycle.ErrNothingToRerun):
		return res, errorf(http.StatusConflict, "workflow instance %d has no failed or killed task to rerun", id)
	case err != nil:
		return res, err
	}
	auditDone(r)
	zerolog.Ctx(ctx).Info().Int64("workflow_instance", id).Ints64("task_instances", res.Requeued).
		Int("deleted_skipped", res.Deleted).Bool("reopened", res.Reopened).Msg("rerun a workflow instance from its failed tasks")
	return res, nil
}

func (s *Server) stopWorkflow(r *http.Request, id int64) (dao.StopResult, error) {
	ctx := r.Context()
	ev := s.auditEvent(r)
	res, err := lifecycle.Stop(ctx, s.db, id, &ev)
	if err != nil {
		return res, err
	}
	auditDone(r)
	zerolog.Ctx(ctx).Info().Int64("workflow_instance", id).Int("killed", res.Killed).
		Int("kill_requested", res.KillRequested).Msg("stopped a workflow instance")
	return res, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
