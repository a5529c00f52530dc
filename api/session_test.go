package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
)

// TestCSRFTokenIsAnHMACOfTheSession: a page's CSRF token is neither the session cookie nor
// a cookie a sibling subdomain could plant: planting a pre-session cookie and sending its
// value (the old double-submit) or sending the session id itself is refused, while the
// session's own token is accepted on every master, which share the key. The login form's
// token is bound to its pre-session cookie in the same way.
func TestCSRFTokenIsAnHMACOfTheSession(t *testing.T) {
	t.Parallel()
	users := writeUsers(t)
	a := setup(t, setupOpts{usersFile: users, token: "the-admin-token-0123456789"})
	b := setup(t, setupOpts{usersFile: users, db: a.db})
	f := a.seed(t, 6)
	s := newSession(t, a)
	s.login(operatorToken)
	victim := s.cookie("zksched_session")
	if victim == nil || s.csrf == "" || s.csrf == victim.Value {
		t.Fatalf("session cookie %v, page token %q: want a token that is not the session id", victim, s.csrf)
	}
	if pre := s.cookie("zksched_csrf"); pre != nil && pre.Value == s.csrf {
		t.Fatalf("the page's token is the pre-session cookie's value")
	}
	planted := strings.Repeat("p", 43)
	form := func(csrf string) string { return url.Values{"csrf": {csrf}}.Encode() }
	kill := fmt.Sprintf("/tasks/%d/kill", f.byName["t4"])
	for what, tc := range map[string]struct{ cookie, csrf string }{
		"a planted CSRF cookie and its value": {"zksched_session=" + victim.Value + "; zksched_csrf=" + planted, planted},
		"the session id as the token":         {"zksched_session=" + victim.Value, victim.Value},
		"the login form's token":              {"zksched_session=" + victim.Value, loginToken(t, a)},
	} {
		r := a.do(t, "POST", kill, form(tc.csrf), "Authorization", "", "Cookie", tc.cookie,
			"Content-Type", "application/x-www-form-urlencoded")
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "CSRF token mismatch") {
			t.Errorf("%s: status %d, want 403 for a CSRF mismatch", what, r.status)
		}
	}
	r := b.do(t, "POST", kill, form(s.csrf), "Cookie", "zksched_session="+victim.Value,
		"Content-Type", "application/x-www-form-urlencoded")
	if r.status != http.StatusSeeOther {
		t.Errorf("the session's token on the other master: status %d, want 303\n%.300s", r.status, r.body)
	}

	// The login form: its token is bound to its pre-session cookie.
	login := newSession(t, a)
	login.get("/login")
	pre := login.cookie("zksched_csrf")
	if pre == nil || login.csrf == "" || login.csrf == pre.Value {
		t.Fatalf("login form: pre-session cookie %v, token %q: want a token that is not the cookie", pre, login.csrf)
	}
	r = a.do(t, "POST", "/login", url.Values{"csrf": {planted}, "token": {operatorToken}}.Encode(), "Authorization", "",
		"Cookie", "zksched_csrf="+planted, "Content-Type", "application/x-www-form-urlencoded")
	if r.status != http.StatusForbidden {
		t.Errorf("login with a planted pre-session cookie and its value: status %d, want 403", r.status)
	}
	if r := login.post("/login", url.Values{"token": {operatorToken}}); r.status != http.StatusSeeOther {
		t.Errorf("login with the form's token: status %d, want 303", r.status)
	}
}

// loginToken returns the CSRF token of a fresh login form of b.
func loginToken(t *testing.T, b *testBundle) string {
	t.Helper()
	s := newSession(t, b)
	s.get("/login")
	return s.csrf
}

// TestSessionsAreAudited: a login and a logout are in the audit trail under their user and
// role; so are a cross-origin request and a CSRF mismatch made with a session, while the
// same without a session, and a wrong token at the login, leave nothing.
func TestSessionsAreAudited(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{usersFile: writeUsers(t), token: "the-admin-token-0123456789"})
	anon := newSession(t, b)
	anon.get("/login")
	if r := anon.post("/login", url.Values{"token": {"a-wrong-token-0123456789"}}); r.status != http.StatusUnauthorized {
		t.Fatalf("wrong login: %d", r.status)
	}
	cross := []string{"Authorization", "", "Sec-Fetch-Site", "cross-site", "Content-Type", "application/x-www-form-urlencoded"}
	if r := b.do(t, "POST", "/logout", "csrf=x", cross...); r.status != http.StatusForbidden {
		t.Fatalf("cross-origin logout without a session: %d", r.status)
	}
	s := newSession(t, b)
	s.login(viewerToken)
	cookie := s.cookie("zksched_session")
	if r := b.do(t, "POST", "/logout", "csrf="+s.csrf, append(cross, "Cookie", "zksched_session="+cookie.Value)...); r.status != http.StatusForbidden {
		t.Fatalf("cross-origin logout with a session: %d", r.status)
	}
	if r := s.post("/logout", url.Values{"csrf": {"forged"}}); r.status != http.StatusForbidden {
		t.Fatalf("logout with a forged CSRF token: %d", r.status)
	}
	if r := s.post("/logout", nil); r.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", r.status)
	}
	var got []string
	for _, ev := range b.audit(t, "limit=100").Items {
		if ev.Client == "" {
			t.Errorf("row %+v without its client", ev)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s %s", ev.Actor, ev.Role, ev.Action, ev.Target, ev.Outcome))
	}
	want := []string{
		"vera viewer " + dao.AuditLogout + " user/vera ok",
		"vera viewer " + dao.AuditCrossOrigin + " route/POST /logout refused: forbidden: CSRF token mismatch: reload the page and try again",
		"vera viewer " + dao.AuditCrossOrigin + " route/POST /logout refused: forbidden: cross-origin request refused",
		"vera viewer " + dao.AuditLogin + " user/vera ok",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit trail, newest first:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
