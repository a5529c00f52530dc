package api

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// The audit trail of the API and the UI. Every route that changes something is registered
// through audited: the handler's change writes its audit_event row in the change's own
// transaction (dao.*Audited, master's audit arguments), built by auditEvent from the
// request's principal, its client address and what the handler learnt of the action's
// target and parameters. When the handler refuses the change instead (400, 403, 404, 409 and
// every other 4xx but 401, whose request has no identity), audited records the attempt in a
// row of its own, outcome "refused: …", on the pool (dao.AuditRefusal), where the identical
// refusals of a minute fold into one row with their count. That record is best effort, since
// the refusal must be answered whether or not it can be written: one that cannot is logged at
// error level and counted (RefusalsUnrecorded, zksched_api_audit_refusals_unrecorded_total).
// A refusal's reason names the route, never the path: the refusals of a flood over many ids
// or names are identical, and fold.

// auditState is what a change's handler has learnt of its audit row so far.
type auditState struct {
	action string
	target string
	params json.RawMessage
	// recorded is set once the change committed with its row: a later error of the handler
	// is no refusal.
	recorded bool
}

type auditKey struct{}

// auditOf returns the request's audit state; a request outside audited gets a throwaway one.
func auditOf(r *http.Request) *auditState {
	if st, ok := r.Context().Value(auditKey{}).(*auditState); ok {
		return st
	}
	return &auditState{}
}

// setTarget and setParams tell the audit row what the handler learnt.
func (st *auditState) setTarget(t string) { st.target = t }
func (st *auditState) setParams(v any)    { st.params = dao.AuditParams(v) }

// audited wraps the handler of a change recorded as action; target names its object from
// the path, until the handler knows better.
func (s *Server) audited(action string, target func(r *http.Request) string, h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		st := &auditState{action: action, target: target(r)}
		r = r.WithContext(context.WithValue(r.Context(), auditKey{}, st))
		err := h(w, r)
		if err != nil && !st.recorded {
			s.auditRefusal(r, st, err)
		}
		return err
	}
}

// auditEvent is the row of the request's change, as its handler knows it now.
func (s *Server) auditEvent(r *http.Request) dao.AuditEvent {
	st := auditOf(r)
	p := principalOf(r)
	return dao.AuditEvent{Actor: p.Name, Role: string(p.Role), Action: st.action, Target: st.target,
		Params: st.params, Client: clientAddr(r), Outcome: dao.AuditOK}
}

// auditDone marks the request's change as committed with its row.
func auditDone(r *http.Request) { auditOf(r).recorded = true }

// maxRefusalReason bounds the reason a refused row keeps of the error's message.
const maxRefusalReason = 200

// auditRefusal records a refused attempt at the request's change.
func (s *Server) auditRefusal(r *http.Request, st *auditState, err error) {
	status, msg := classify(err)
	if status < 400 || status >= 500 || status == http.StatusUnauthorized {
		return
	}
	if len(msg) > maxRefusalReason {
		msg = msg[:maxRefusalReason] + "…"
	}
	ev := s.auditEvent(r)
	ev.Outcome = dao.AuditRefused(strings.ToLower(http.StatusText(status)) + ": " + msg)
	// The request may be at its deadline: the record gets a few seconds of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if werr := s.db.AuditRefusal(ctx, ev); werr != nil {
		s.refusalsUnrecorded.Add(1)
		logFor(r).Error().Err(werr).Str("user", ev.Actor).Str("action", ev.Action).Int("status", status).
			Msg("refused change not recorded in the audit trail")
	}
}

// clientAddr is the address of the request's client: the connection's peer. A header set by
// a proxy is not taken, since any client can send one.
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// The targets of the audited routes, from their paths.
func taskTarget(r *http.Request) string     { return "task-instance/" + r.PathValue("id") }
func workflowTarget(r *http.Request) string { return "workflow-instance/" + r.PathValue("id") }
func scheduleTarget(r *http.Request) string { return "schedule/" + r.PathValue("name") }
func noTarget(*http.Request) string         { return "" }

func definitionTarget(r *http.Request) string { return "definition/" + r.PathValue("name") }

// auditListParams are the parameters of the audit list.
var auditListParams = []string{"actor", "action", "target", "since", "until", "before", "limit"}

// auditFilter reads the filters and cursor of the audit list.
func auditFilter(q query) (f dao.AuditFilter, before int64, limit int, err error) {
	if f.Actor, err = q.str("actor", 256); err != nil {
		return
	}
	if f.Action, err = q.str("action", 64); err != nil {
		return
	}
	if f.TargetPrefix, err = q.str("target", 512); err != nil {
		return
	}
	if f.Since, err = q.time("since"); err != nil {
		return
	}
	if f.Until, err = q.time("until"); err != nil {
		return
	}
	if before, err = q.id("before"); err != nil {
		return
	}
	limit, err = q.intRange("limit", defaultPageSize, 1, dao.MaxAuditPage)
	return
}

// auditPageJSON is a page of the audit trail.
type auditPageJSON struct {
	Items []dao.AuditEvent `json:"items"`
	// Next is the ?before= of the next, older page; absent on the last one.
	Next int64 `json:"next,omitempty"`
}

// apiAuditEvents lists the audit trail, newest first: GET /api/v1/audit-events.
func (s *Server) apiAuditEvents(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r.URL.Query(), auditListParams...)
	if err != nil {
		return err
	}
	f, before, limit, err := auditFilter(q)
	if err != nil {
		return err
	}
	evs, next, err := s.db.AuditList(r.Context(), f, before, limit)
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []dao.AuditEvent{}
	}
	writeJSON(w, http.StatusOK, auditPageJSON{Items: evs, Next: next})
	return nil
}

type auditPage struct {
	base
	Form     struct{ Actor, Action, Target, Since, Until string }
	Actions  []string
	Rows     []auditRow
	OlderURL string
	Error    string
}

// auditRow is an event with a link to its target's page, when it has one, and the reason of
// a refusal.
type auditRow struct {
	dao.AuditEvent
	Link   string
	Reason string
}

// targetLink is the UI page of an audit target: a task or workflow instance's, a
// definition's or its schedule's definition page; "" for the others.
func targetLink(target string) string {
	kind, id, _ := strings.Cut(target, "/")
	switch kind {
	case "schedule", "definition":
		if !workflow.ValidName(id) {
			return "/definitions"
		}
		return "/definitions/" + id
	case "task-instance", "workflow-instance":
		if _, err := strconv.ParseInt(id, 10, 64); err != nil {
			return ""
		}
		if kind == "task-instance" {
			return "/tasks/" + id
		}
		return "/workflows/" + id
	}
	return ""
}

// auditActions are the actions the Audit page offers in its filter.
var auditActions = []string{dao.AuditDefinitionStore, dao.AuditWorkflowSubmit, dao.AuditTaskKill, dao.AuditTaskRerun,
	dao.AuditWorkflowStop, dao.AuditWorkflowRerun, dao.AuditScheduleEnable, dao.AuditScheduleDisable,
	dao.AuditScheduleTrigger, dao.AuditBackfill, dao.AuditUserAdd, dao.AuditUserRemove,
	dao.AuditLogin, dao.AuditLogout, dao.AuditCrossOrigin}

// pageAudit is the Audit page: the trail with the API's filters and an "older" link.
func (s *Server) pageAudit(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	for k, vals := range v {
		if len(vals) == 1 && vals[0] == "" {
			v.Del(k)
		}
	}
	p := &auditPage{base: base{Title: "Audit", Nav: "audit"}, Actions: auditActions}
	p.Form.Actor, p.Form.Action, p.Form.Target = v.Get("actor"), v.Get("action"), v.Get("target")
	p.Form.Since, p.Form.Until = v.Get("since"), v.Get("until")
	status := http.StatusOK
	q, err := newQuery(v, auditListParams...)
	var f dao.AuditFilter
	var before int64
	var limit int
	if err == nil {
		f, before, limit, err = auditFilter(q)
	}
	if err == nil {
		var evs []dao.AuditEvent
		var next int64
		if evs, next, err = s.db.AuditList(r.Context(), f, before, limit); err == nil {
			for _, e := range evs {
				reason, _ := strings.CutPrefix(e.Outcome, dao.AuditRefused(""))
				p.Rows = append(p.Rows, auditRow{AuditEvent: e, Link: targetLink(e.Target), Reason: reason})
			}
			p.OlderURL = pageURL("/audit", v, "before", next)
		}
	}
	if err != nil {
		status, p.Error = classify(err)
		if status >= 500 {
			logFor(r).Error().Err(err).Msg("audit list")
		}
	}
	s.render(w, r, status, "audit", p)
	return nil
}
