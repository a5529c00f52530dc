package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/zksched/zksched/dao"
)

// notificationStates are the states a notification list may be filtered by.
var notificationStates = []string{dao.NotificationPending, dao.NotificationSending, dao.NotificationSent, dao.NotificationDead}

// notificationFilter reads the notification list's parameters: state, before (an id) and
// limit.
func notificationFilter(q query) (state string, before int64, limit int, err error) {
	if state, err = q.str("state", 16); err != nil {
		return "", 0, 0, err
	}
	if state != "" && !slices.Contains(notificationStates, state) {
		return "", 0, 0, badRequest("state: %q is not one of %s", state, strings.Join(notificationStates, ", "))
	}
	if before, err = q.id("before"); err != nil {
		return "", 0, 0, err
	}
	limit, err = q.intRange("limit", 100, 1, 1000)
	return state, before, limit, err
}

// notificationList returns a page of notifications and the cursor of the next, 0 for none.
func (s *Server) notificationList(r *http.Request, q query) ([]dao.Notification, int64, error) {
	state, before, limit, err := notificationFilter(q)
	if err != nil {
		return nil, 0, err
	}
	ns, err := s.db.NotificationList(r.Context(), state, before, limit)
	if err != nil {
		return nil, 0, err
	}
	var next int64
	if len(ns) == limit {
		next = ns[len(ns)-1].ID
	}
	return ns, next, nil
}

// apiNotifications lists the notifications, newest first, with each delivery's state,
// attempts and last error: GET /api/v1/notifications?state=&before=&limit=.
func (s *Server) apiNotifications(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r.URL.Query(), "state", "before", "limit")
	if err != nil {
		return err
	}
	ns, next, err := s.notificationList(r, q)
	if err != nil {
		return err
	}
	if ns == nil {
		ns = []dao.Notification{}
	}
	out := map[string]any{"items": ns}
	if next != 0 {
		out["next"] = next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type notificationsPage struct {
	base
	State    string
	States   []string
	Rows     []dao.Notification
	OlderURL string
	Error    string
}

func (s *Server) pageNotifications(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	for k, vals := range v {
		if len(vals) == 1 && vals[0] == "" {
			v.Del(k)
		}
	}
	p := &notificationsPage{base: base{Title: "Notifications", Nav: "notifications"}, States: notificationStates,
		State: v.Get("state")}
	status := http.StatusOK
	q, err := newQuery(v, "state", "before", "limit")
	if err == nil {
		var next int64
		if p.Rows, next, err = s.notificationList(r, q); err == nil {
			p.OlderURL = pageURL("/notifications", v, "before", next)
		}
	}
	if err != nil {
		status, p.Error = classify(err)
		if status >= 500 {
			logFor(r).Error().Err(err).Msg("notification list")
		}
	}
	s.render(w, r, status, "notifications", p)
	return nil
}
