package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// apiSchedules lists every schedule with its next fire times (?next=N, default 3, at most 100).
func (s *Server) apiSchedules(w http.ResponseWriter, r *http.Request) error {
	n := 3
	if v := r.URL.Query().Get("next"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 || n > 100 {
			return badRequest("next %q is not a number of fire times from 0 to 100", v)
		}
	}
	views, err := lifecycle.Schedules(r.Context(), s.db, n)
	if err != nil {
		return err
	}
	out := make([]lifecycle.ScheduleJSON, len(views))
	for i, v := range views {
		out[i] = v.JSON()
	}
	writeJSON(w, http.StatusOK, map[string]any{"schedules": out})
	return nil
}

// apiScheduleEnable enables (on true) or disables the schedule of {name}.
func (s *Server) apiScheduleEnable(on bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		name := r.PathValue("name")
		ev := s.auditEvent(r)
		sched, err := lifecycle.SetScheduleEnabled(r.Context(), s.db, name, on, time.Now(), &ev)
		if err != nil {
			return err
		}
		auditDone(r)
		logFor(r).Info().Str("workflow", name).Bool("enabled", on).Msg("schedule switched")
		writeJSON(w, http.StatusOK, map[string]any{"workflow": name, "enabled": sched.Enabled, "next_fire_at": sched.NextFireAt})
		return nil
	}
}

// apiScheduleTrigger fires the schedule of {name} now; the body, optional, is
// {"params": {"k": "v"}}.
func (s *Server) apiScheduleTrigger(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Params map[string]string `json:"params"`
	}
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &body); err != nil {
			return err
		}
	}
	if err := workflow.CheckParams(body.Params); err != nil {
		return badRequest("the params are rejected, nothing triggered:\n%v", err)
	}
	name := r.PathValue("name")
	auditOf(r).setParams(body)
	ev := s.auditEvent(r)
	res, err := lifecycle.TriggerSchedule(r.Context(), s.db, name, body.Params, "api:"+s.cfg.NodeID, time.Now(), &ev)
	var paramsErr *lifecycle.ParamsError
	if errors.As(err, &paramsErr) {
		return badRequest("the params are rejected, nothing triggered:\n%v", err)
	}
	if err != nil {
		return err
	}
	// A fire that created no instance (when-full: skip) is recorded too: it was handled.
	auditDone(r)
	if res.Instance == 0 {
		return errorf(http.StatusConflict, "trigger of %s created no instance: %s", name, res.Skipped)
	}
	logFor(r).Info().Str("workflow", name).Int64("workflow_instance", res.Instance).Msg("schedule triggered")
	writeJSON(w, http.StatusCreated, map[string]any{"id": res.Instance, "workflow_name": name, "fire_time": res.Time})
	return nil
}

// schedulesPage is the Schedules page: every schedule with its next fire times and, for who
// may, the buttons that switch it and fire it now.
type schedulesPage struct {
	base
	Schedules  []lifecycle.ScheduleView
	CanSwitch  bool
	CanTrigger bool
	// Triggered is the instance the last Trigger now created; 0 for none.
	Triggered int64
}

func (s *Server) pageSchedules(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r.URL.Query(), "done", "instance")
	if err != nil {
		return err
	}
	triggered, err := q.id("instance")
	if err != nil {
		return err
	}
	views, err := lifecycle.Schedules(r.Context(), s.db, 3)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "schedules", &schedulesPage{
		base:      base{Title: "Schedules", Nav: "schedules", Flash: flashes[r.URL.Query().Get("done")]},
		Schedules: views, CanSwitch: s.may(r, "POST /schedules/{name}/enable"), CanTrigger: s.may(r, "POST /schedules/{name}/trigger"),
		Triggered: triggered})
	return nil
}

// formScheduleEnable is the Schedules page's Enable (on true) and Disable.
func (s *Server) formScheduleEnable(on bool) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.checkCSRF(r); err != nil {
			return err
		}
		name := r.PathValue("name")
		ev := s.auditEvent(r)
		if _, err := lifecycle.SetScheduleEnabled(r.Context(), s.db, name, on, time.Now(), &ev); err != nil {
			return err
		}
		auditDone(r)
		logFor(r).Info().Str("workflow", name).Bool("enabled", on).Msg("schedule switched")
		done := "schedule-disabled"
		if on {
			done = "schedule-enabled"
		}
		http.Redirect(w, r, "/schedules?done="+done, http.StatusSeeOther)
		return nil
	}
}

// formScheduleTrigger is the Schedules page's Trigger now: a fire of the schedule now, with
// its workflow's default params (a scheduled workflow has a default for each param, since
// its fires give none but the fire's time). The run form of the workflow's page triggers
// with other params (runStored).
func (s *Server) formScheduleTrigger(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkCSRF(r); err != nil {
		return err
	}
	name := r.PathValue("name")
	ev := s.auditEvent(r)
	res, err := lifecycle.TriggerSchedule(r.Context(), s.db, name, nil, "ui:"+s.cfg.NodeID, time.Now(), &ev)
	if err != nil {
		return err
	}
	auditDone(r)
	if res.Instance == 0 {
		return errorf(http.StatusConflict, "trigger of %s created no instance: %s", name, res.Skipped)
	}
	logFor(r).Info().Str("workflow", name).Int64("workflow_instance", res.Instance).Msg("schedule triggered")
	http.Redirect(w, r, "/schedules?done=triggered&instance="+strconv.FormatInt(res.Instance, 10), http.StatusSeeOther)
	return nil
}
