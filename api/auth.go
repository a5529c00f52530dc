package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	sessionCookie = "zksched_session"
	csrfCookie    = "zksched_csrf"
	csrfField     = "csrf"
	// sessionTTL is how long a login lasts: a working day and a night on call.
	sessionTTL = 12 * time.Hour
)

// authenticator checks the API token and the UI's session cookies. Sessions are signed with a
// key derived from the token, so every master accepts the sessions of every other one and
// changing the token ends them all.
type authenticator struct {
	enabled   bool
	tokenHash [sha256.Size]byte
	key       []byte
	now       func() time.Time
}

func newAuthenticator(token string) *authenticator {
	a := &authenticator{enabled: token != "", now: time.Now}
	if a.enabled {
		a.tokenHash = sha256.Sum256([]byte(token))
		mac := hmac.New(sha256.New, []byte(token))
		mac.Write([]byte("zksched session key v1"))
		a.key = mac.Sum(nil)
	}
	return a
}

// tokenOK compares in constant time; hashing first makes the time independent of the length.
func (a *authenticator) tokenOK(token string) bool {
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], a.tokenHash[:]) == 1
}

func (a *authenticator) sign(expiry int64) string {
	mac := hmac.New(sha256.New, a.key)
	mac.Write([]byte("session|" + strconv.FormatInt(expiry, 10)))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// newSession returns the value of a session cookie that expires after sessionTTL.
func (a *authenticator) newSession() (string, time.Time) {
	exp := a.now().Add(sessionTTL)
	return strconv.FormatInt(exp.Unix(), 10) + "." + a.sign(exp.Unix()), exp
}

func (a *authenticator) sessionOK(value string) bool {
	expStr, sig, ok := strings.Cut(value, ".")
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if err != nil || a.now().Unix() >= exp {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(a.sign(exp)))
}

// allowed reports whether r carries the token or a valid session.
func (a *authenticator) allowed(r *http.Request) bool {
	if !a.enabled {
		return true
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, _ := strings.Cut(h, " ")
		return strings.EqualFold(scheme, "Bearer") && a.tokenOK(strings.TrimSpace(token))
	}
	c, err := r.Cookie(sessionCookie)
	return err == nil && a.sessionOK(c.Value)
}

// open reports whether a path is served without authentication.
func open(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics" || path == "/login" ||
		strings.HasPrefix(path, "/static/")
}

// requireAuth refuses requests without the token or a session: 401 for the API, a redirect to
// the login form for pages.
func (s *Server) requireAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if s.auth.allowed(r) {
			// One token, or none at all: whoever passes is the administrator.
			p := Principal{Name: "admin", Role: RoleAdmin}
			if !s.auth.enabled {
				p.Name = "anonymous"
			}
			next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
			return
		}
		if isAPI(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="zksched"`)
			s.writeError(w, r, errorf(http.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer <api.token>"))
			return
		}
		if r.Method != http.MethodGet {
			s.fail(w, r, errorf(http.StatusUnauthorized, "your session has ended: log in again"))
			return
		}
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
	})
}

// csrfToken returns the request's CSRF token, setting the cookie that holds it when there is
// none. Forms send it back in the csrf field; checkCSRF compares the two.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	// A second call within the same request must return the same value.
	r.AddCookie(&http.Cookie{Name: csrfCookie, Value: v})
	return v
}

// checkCSRF refuses a form whose csrf field does not match the cookie. A cross-site page can
// make the browser post a form, but cannot read the cookie to fill the field in.
func checkCSRF(r *http.Request) error {
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) < 32 {
		return errorf(http.StatusForbidden, "missing CSRF cookie: reload the page and try again")
	}
	if err := r.ParseForm(); err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get(csrfField)), []byte(c.Value)) != 1 {
		return errorf(http.StatusForbidden, "CSRF token mismatch: reload the page and try again")
	}
	return nil
}

// safeNext keeps a post-login redirect on this site.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	return next
}

func (s *Server) pageLogin(w http.ResponseWriter, r *http.Request) error {
	if !s.auth.enabled {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	s.render(w, r, http.StatusOK, "login", &loginPage{base: base{Title: "Log in", Nav: "login"}, Next: safeNext(r.URL.Query().Get("next"))})
	return nil
}

func (s *Server) formLogin(w http.ResponseWriter, r *http.Request) error {
	if err := checkCSRF(r); err != nil {
		return err
	}
	next := safeNext(r.PostForm.Get("next"))
	if !s.auth.enabled {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	if !s.auth.tokenOK(r.PostForm.Get("token")) {
		logFor(r).Warn().Str("remote", r.RemoteAddr).Msg("login with a wrong token")
		s.render(w, r, http.StatusUnauthorized, "login", &loginPage{base: base{Title: "Log in", Nav: "login"}, Next: next, Error: "Wrong token."})
		return nil
	}
	value, exp := s.auth.newSession()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: "/", Expires: exp, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	logFor(r).Info().Str("remote", r.RemoteAddr).Msg("logged in")
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

func (s *Server) formLogout(w http.ResponseWriter, r *http.Request) error {
	if err := checkCSRF(r); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}
