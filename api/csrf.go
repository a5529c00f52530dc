package api

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"

	"github.com/zksched/zksched/dao"
)

// CSRF tokens. A form of the UI carries a token in its csrf field that a cross-site page
// cannot know: an HMAC, under a key every master shares (api_secret "csrf" in PostgreSQL, as
// any master serves any session), of what the browser holds:
//
//   - with a session (a page behind the login), the session cookie: a sibling subdomain that
//     can plant cookies cannot plant a session the victim is logged into, nor compute the
//     token of one without the key, and the token changes with every login;
//   - without one (the login form; every page of a master without users), a random
//     pre-session cookie set with the form, its token bound to it in the same way.
//
// A pre-session token only proves that the form came from this site to a browser holding
// that cookie. Over plain HTTP a sibling subdomain can plant a pre-session cookie together
// with the token it fetched for it itself; the worst it can then do is log the victim in as
// the attacker, which needs the attacker's own valid token, and a browser that sends
// Sec-Fetch-Site or Origin is stopped before that by the cross-origin check. Under TLS the
// cookies are "__Host-" prefixed (see cookieName): no other host can set them at all.
const (
	csrfSessionTag    = "session\x00"
	csrfPreSessionTag = "pre-session\x00"
)

// csrfKey is the HMAC key of CSRF tokens, read from PostgreSQL at first use (or stored
// there, by the first master to need it) and kept for the life of the server.
type csrfKey struct {
	db  *dao.DB
	mu  sync.Mutex
	key []byte
}

func (k *csrfKey) get(ctx context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return k.key, nil
	}
	v := make([]byte, 32)
	_, _ = rand.Read(v)
	key, err := k.db.APISecretGetOrCreate(ctx, "csrf", v)
	if err != nil {
		return nil, err
	}
	k.key = key
	return key, nil
}

// csrfBinding is what the CSRF token of r is bound to: the session cookie on a route behind
// the login, else the pre-session cookie ("" when the request has none yet).
func (s *Server) csrfBinding(r *http.Request) (tag, value string) {
	if !open(r.URL.Path) {
		if c, err := r.Cookie(s.auth.cookieName(r, sessionCookie)); err == nil && c.Value != "" {
			return csrfSessionTag, c.Value
		}
	}
	if c, err := r.Cookie(s.auth.cookieName(r, csrfCookie)); err == nil && len(c.Value) >= 32 {
		return csrfPreSessionTag, c.Value
	}
	return csrfPreSessionTag, ""
}

func (s *Server) csrfMAC(ctx context.Context, tag, value string) (string, error) {
	key, err := s.csrf.get(ctx)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(tag + value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// csrfToken returns the request's CSRF token for its forms, setting a pre-session cookie
// when the request has neither session nor pre-session cookie.
func (s *Server) csrfToken(w http.ResponseWriter, r *http.Request) (string, error) {
	tag, value := s.csrfBinding(r)
	if value == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		value = base64.RawURLEncoding.EncodeToString(b)
		name := s.auth.cookieName(r, csrfCookie)
		http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: s.auth.secure(r)})
		// A second call within the same request must return the same token.
		r.AddCookie(&http.Cookie{Name: name, Value: value})
	}
	return s.csrfMAC(r.Context(), tag, value)
}

// checkCSRF refuses a form whose csrf field is not the token of what the browser holds. A
// refusal of a request made with a session is written to the audit trail (by the route's own
// audit when it has one).
func (s *Server) checkCSRF(r *http.Request) error {
	tag, value := s.csrfBinding(r)
	if value == "" {
		return errorf(http.StatusForbidden, "missing CSRF cookie: reload the page and try again")
	}
	if err := r.ParseForm(); err != nil {
		return err
	}
	want, err := s.csrfMAC(r.Context(), tag, value)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get(csrfField)), []byte(want)) == 1 {
		return nil
	}
	refused := errorf(http.StatusForbidden, "CSRF token mismatch: reload the page and try again")
	if tag == csrfSessionTag && auditOf(r).action == "" {
		s.auditCrossOrigin(r, principalOf(r), refused)
	}
	return refused
}
