package api

import (
	"context"
	"net/http"

	"github.com/zksched/zksched/dao"
)

// The audit rows of sessions: a login and a logout are written with who and their role; a
// request made with a session that the cross-origin or CSRF check refuses is written as a
// refusal of its user. A failed login names no user (the form takes a token only, and a
// wrong token is nobody's), so it is not written: counted in the metrics and logged with its
// address instead, it gives an unauthenticated guesser no way to fill the trail.

// maxAuditPath bounds the path a cross-origin refusal's target keeps.
const maxAuditPath = 200

// auditSession writes the row of a login or a logout of p.
func (s *Server) auditSession(ctx context.Context, r *http.Request, action string, p Principal) error {
	return s.db.AuditInsert(ctx, dao.AuditEvent{Actor: p.Name, Role: string(p.Role), Action: action,
		Target: "user/" + p.Name, Client: clientAddr(r), Outcome: dao.AuditOK})
}

// auditCrossOrigin records that a request of p was refused as cross-origin (err says how).
func (s *Server) auditCrossOrigin(r *http.Request, p Principal, err error) {
	path := r.URL.EscapedPath()
	if len(path) > maxAuditPath {
		path = path[:maxAuditPath] + "…"
	}
	st := &auditState{action: dao.AuditCrossOrigin, target: "route/" + r.Method + " " + path}
	ctx := context.WithValue(withPrincipal(r.Context(), p), auditKey{}, st)
	s.auditRefusal(r.WithContext(ctx), st, err)
}

// refuseCrossOrigin answers a request that http.CrossOriginProtection refused, recording it
// when it came with a live session.
func (s *Server) refuseCrossOrigin(w http.ResponseWriter, r *http.Request) {
	err := errorf(http.StatusForbidden, "cross-origin request refused")
	if c, ok, serr := s.auth.session(r); serr == nil && ok {
		s.auditCrossOrigin(r, Principal{Name: c.name, Role: c.role}, err)
	}
	s.fail(w, r, err)
}
