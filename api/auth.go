package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
)

const (
	sessionCookie = "zksched_session"
	csrfCookie    = "zksched_csrf"
	csrfField     = "csrf"
	// sessionTTL is how long a login lasts: a working day and a night on call.
	sessionTTL = 12 * time.Hour
	// tokenUser is the name of the api.token's user, an admin.
	tokenUser = "admin"
)

// authenticator knows the users (the api.token's admin and those of the users file) and
// checks what a request carries: a bearer token, or a session cookie whose row in
// api_session says who logged in. Sessions live in PostgreSQL, so every master accepts the
// sessions of every other one and a logout ends a session everywhere.
type authenticator struct {
	enabled bool
	token   *credential
	users   *userStore
	db      *dao.DB
	limiter *failLimiter
	// cookieSecure is api.cookie-secure: requests reach a TLS proxy in front (see secure).
	cookieSecure bool

	// failures counts wrong tokens (bearer or login form); limited counts the wrong ones
	// refused with 429 because their address had failed too often.
	failures atomic.Int64
	limited  atomic.Int64

	sessionCheck
}

func newAuthenticator(cfg Config, db *dao.DB, now func() time.Time) (*authenticator, error) {
	a := &authenticator{db: db, limiter: newFailLimiter(now), cookieSecure: cfg.CookieSecure}
	a.sessionCheck.init(cfg.Log, now)
	if cfg.Token != "" {
		a.token = &credential{name: tokenUser, role: RoleAdmin, hash: sha256.Sum256([]byte(cfg.Token))}
	}
	if cfg.UsersFile != "" {
		s, err := newUserStore(cfg.UsersFile, cfg.Log, now)
		if err != nil {
			return nil, err
		}
		s.onRead = a.usersRead
		a.users = s
	}
	a.enabled = a.token != nil || a.users != nil
	switch {
	case !a.enabled && !cfg.AllowUnauthenticated:
		return nil, errors.New("no credential: set a token or a users file, or allow unauthenticated access explicitly")
	case a.enabled && cfg.AllowUnauthenticated:
		return nil, errors.New("unauthenticated access allowed while a token or a users file is set: choose one")
	}
	return a, nil
}

// credentials returns every credential that is valid now, after ending the sessions the
// users as last read no longer allow (endStaleSessions).
func (a *authenticator) credentials() []credential {
	out := a.currentCredentials()
	a.endStaleSessions(a.currentCredentials, false)
	return out
}

// currentCredentials returns every credential that is valid now.
func (a *authenticator) currentCredentials() []credential {
	var out []credential
	if a.token != nil {
		out = append(out, *a.token)
	}
	if a.users != nil {
		out = append(out, a.users.current()...)
	}
	return out
}

// byToken returns the credential of token. It compares the token's hash with every user's in
// constant time and without stopping at a match, so the time taken says nothing of which
// user, if any, the token is close to.
func (a *authenticator) byToken(token string) (credential, bool) {
	h := sha256.Sum256([]byte(token))
	var found credential
	ok := 0
	for _, c := range a.credentials() {
		eq := subtle.ConstantTimeCompare(h[:], c.hash[:])
		if eq == 1 {
			found = c
		}
		ok |= eq
	}
	return found, ok == 1 && token != ""
}

// byName returns the credential of a user that still exists.
func (a *authenticator) byName(name string) (credential, bool) {
	for _, c := range a.credentials() {
		if c.name == name {
			return c, true
		}
	}
	return credential{}, false
}

func sessionHash(value string) []byte {
	h := sha256.Sum256([]byte(value))
	return h[:]
}

// newSession stores a session of c and returns the cookie's value and expiry.
func (a *authenticator) newSession(r *http.Request, c credential) (string, time.Time, error) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	value := base64.RawURLEncoding.EncodeToString(b)
	exp, err := a.db.APISessionCreate(r.Context(), sessionHash(value), c.name, c.id(), sessionTTL)
	return value, exp, err
}

// session returns who the session cookie of r belongs to: a live session, of its user's
// current generation, of a user who still has the token the session was started with. An
// error is a failure to read the database, or to end the sessions the users file no longer
// allows (no session is accepted until that is done).
func (a *authenticator) session(r *http.Request) (credential, bool, error) {
	ck, err := r.Cookie(a.cookieName(r, sessionCookie))
	if err != nil || ck.Value == "" {
		return credential{}, false, nil
	}
	a.credentials()
	if err := a.endStaleSessions(a.currentCredentials, true); err != nil {
		return credential{}, false, err
	}
	s, err := a.db.APISessionGetIfLive(r.Context(), sessionHash(ck.Value))
	if errors.Is(err, dao.ErrNoSession) {
		return credential{}, false, nil
	}
	if err != nil {
		return credential{}, false, err
	}
	c, ok := a.byName(s.UserName)
	if !ok || subtle.ConstantTimeCompare([]byte(c.id()), []byte(s.Credential)) != 1 {
		return credential{}, false, nil
	}
	return c, true, nil
}

// errRateLimited is a wrong credential from an address that failed too often.
type errRateLimited struct{ wait time.Duration }

func (e errRateLimited) Error() string {
	return fmt.Sprintf("too many failed authentications from your address: try again in %d s", retrySeconds(e.wait))
}

func retrySeconds(d time.Duration) int { return max(1, int((d+time.Second-1)/time.Second)) }

// checkToken checks a token a client sent, counting a wrong one against its address. An
// address over its limit is still served when its token is right, so that a guesser behind
// the same NAT as a user does not lock the user out; its wrong tokens are answered with
// errRateLimited, the same answer whichever user a token is near, and are not counted again.
// The guesser still learns a right guess from a wrong one, as everyone must be able to
// (tokens are random enough that this is no help: see docs/security.md, Sessions, CSRF and
// guessing).
func (a *authenticator) checkToken(r *http.Request, token string) (credential, error) {
	key := clientKey(r)
	wait := a.limiter.retryAfter(key)
	c, ok := a.byToken(token)
	switch {
	case ok:
		return c, nil
	case wait > 0:
		a.limited.Add(1)
		return credential{}, errRateLimited{wait}
	}
	a.failures.Add(1)
	a.limiter.fail(key)
	return credential{}, errWrongToken
}

var errWrongToken = errors.New("wrong token")

// open reports whether a path is served without authentication.
func open(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics" || path == "/login" || path == openAPIPath ||
		strings.HasPrefix(path, "/static/") || strings.HasPrefix(path, hookPrefix)
}

// requireAuth lets a request through with its principal, or refuses it: 401 for the API (429
// while its address is rate limited), a redirect to the login form for pages.
func (s *Server) requireAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if !s.auth.enabled {
			// No token and no users: the master was told to serve everyone
			// (api.allow-unauthenticated); New refuses it otherwise.
			s.serveAs(w, r, next, Principal{Name: "anonymous", Role: RoleAdmin})
			return
		}
		if h := r.Header.Get("Authorization"); h != "" {
			scheme, token, _ := strings.Cut(h, " ")
			if !strings.EqualFold(scheme, "Bearer") {
				s.refuse(w, r, "authorization scheme is not Bearer")
				return
			}
			c, err := s.auth.checkToken(r, strings.TrimSpace(token))
			var rl errRateLimited
			if errors.As(err, &rl) {
				w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(rl.wait)))
				s.fail(w, r, errorf(http.StatusTooManyRequests, "%s", rl.Error()))
				return
			}
			if err != nil {
				s.refuse(w, r, "wrong bearer token")
				return
			}
			s.serveAs(w, r, next, Principal{Name: c.name, Role: c.role})
			return
		}
		c, ok, err := s.auth.session(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if ok {
			s.serveAs(w, r, next, Principal{Name: c.name, Role: c.role})
			return
		}
		s.refuse(w, r, "no session")
	})
}

// serveAs serves r as p.
func (s *Server) serveAs(w http.ResponseWriter, r *http.Request, next http.Handler, p Principal) {
	if info := infoOf(r); info != nil {
		info.principal = p
	}
	next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
}

// refuse answers a request that is not authenticated: 401 for the API, the login form for a
// page.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, why string) {
	logFor(r).Info().Str("remote", r.RemoteAddr).Str("path", r.URL.Path).Str("reason", why).Msg("unauthenticated request refused")
	if isAPI(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="zksched"`)
		s.writeError(w, r, errorf(http.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer <token>"))
		return
	}
	if r.Method != http.MethodGet {
		s.fail(w, r, errorf(http.StatusUnauthorized, "your session has ended: log in again"))
		return
	}
	http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
}

// safeNext keeps a post-login redirect on this site: next must be a path of this site ("/"
// and not "//"), with no control character and no backslash, which browsers drop or read as
// a slash (so "/\t/evil.example" and "/\\evil.example" lead to another host), and so must
// each decoding of it (a path like "/%2F%2Fevil.example" may be decoded on its way). Anything
// else goes to "/".
func safeNext(next string) string {
	s := next
	for range 4 {
		if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") ||
			strings.ContainsFunc(s, func(r rune) bool { return r == '\\' || unicode.IsControl(r) || r == unicode.ReplacementChar }) {
			return "/"
		}
		d, err := url.PathUnescape(s)
		if err != nil {
			return "/"
		}
		if d == s {
			return next
		}
		s = d
	}
	return "/"
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
	if err := s.checkCSRF(r); err != nil {
		return err
	}
	next := safeNext(r.PostForm.Get("next"))
	if !s.auth.enabled {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	loginFailed := func(status int, msg string) {
		s.render(w, r, status, "login", &loginPage{base: base{Title: "Log in", Nav: "login"}, Next: next, Error: msg})
	}
	c, err := s.auth.checkToken(r, r.PostForm.Get("token"))
	var rl errRateLimited
	switch {
	case errors.As(err, &rl):
		logFor(r).Info().Str("remote", r.RemoteAddr).Msg("login refused: too many failures from this address")
		w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(rl.wait)))
		loginFailed(http.StatusTooManyRequests, "Too many failed logins from your address: try again in "+strconv.Itoa(retrySeconds(rl.wait))+" s.")
		return nil
	case err != nil:
		logFor(r).Info().Str("remote", r.RemoteAddr).Msg("login with a wrong token")
		loginFailed(http.StatusUnauthorized, "Wrong token.")
		return nil
	}
	value, exp, err := s.auth.newSession(r, c)
	if err != nil {
		return err
	}
	// A login that cannot be written to the audit trail does not happen.
	if err := s.auditSession(r.Context(), r, dao.AuditLogin, Principal{Name: c.name, Role: c.role}); err != nil {
		if rerr := s.auth.db.APISessionRevoke(context.WithoutCancel(r.Context()), sessionHash(value)); rerr != nil {
			logFor(r).Error().Err(rerr).Str("user", c.name).Msg("unaudited session not revoked")
		}
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: s.auth.cookieName(r, sessionCookie), Value: value, Path: "/", Expires: exp, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.auth.secure(r)})
	logFor(r).Info().Str("remote", r.RemoteAddr).Str("user", c.name).Str("role", string(c.role)).Msg("logged in")
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// formLogout ends the session in the database, so that its cookie, wherever a copy of it
// went, opens nothing any more.
func (s *Server) formLogout(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkCSRF(r); err != nil {
		return err
	}
	name := s.auth.cookieName(r, sessionCookie)
	if ck, err := r.Cookie(name); err == nil && ck.Value != "" && s.auth.enabled {
		if err := s.auth.db.APISessionRevoke(r.Context(), sessionHash(ck.Value)); err != nil {
			return err
		}
		// The session has ended whether or not its row is written: a logout is never
		// refused.
		p := principalOf(r)
		if err := s.auditSession(context.WithoutCancel(r.Context()), r, dao.AuditLogout, p); err != nil {
			logFor(r).Error().Err(err).Str("user", p.Name).Msg("logout not recorded in the audit trail")
		}
	}
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.auth.secure(r)})
	logFor(r).Info().Str("remote", r.RemoteAddr).Str("user", principalOf(r).Name).Msg("logged out")
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// requestInfo is what the access log learns from the layers below it.
type requestInfo struct {
	principal Principal
	// busy is set on a heavy read refused for want of a place (see heavy).
	busy bool
}

type requestInfoKey struct{}

func infoOf(r *http.Request) *requestInfo {
	info, _ := r.Context().Value(requestInfoKey{}).(*requestInfo)
	return info
}

// logUser adds the request's user to an access log line.
func logUser(ev *zerolog.Event, info *requestInfo) *zerolog.Event {
	if info.principal.Name == "" {
		return ev
	}
	return ev.Str("user", info.principal.Name)
}
