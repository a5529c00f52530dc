package api

import (
	"net/http"
	"strconv"
	"time"
)

// hstsMaxAge is the Strict-Transport-Security max-age: a year, so that a browser that once
// reached the master over TLS does not try plain HTTP again for as long, without covering
// the other hosts of the domain (no includeSubDomains), which the master does not speak for.
const hstsMaxAge = 365 * 24 * time.Hour

// secure reports whether r came over TLS, to the master or (api.cookie-secure) to the proxy
// in front of it: cookies set in answer are Secure and "__Host-" prefixed.
func (a *authenticator) secure(r *http.Request) bool { return r.TLS != nil || a.cookieSecure }

// cookieName is the name of the cookie base in answer to r. Under TLS it is "__Host-"
// prefixed: a browser keeps such a cookie only if it is Secure, with Path=/ and no Domain,
// set by this very host, so that no sibling subdomain (nor a plain-HTTP answer) can plant or
// overwrite it. Over plain HTTP the prefix would make browsers drop the cookie.
func (a *authenticator) cookieName(r *http.Request, base string) string {
	if a.secure(r) {
		return "__Host-" + base
	}
	return base
}

// strictTransport tells browsers, under TLS, to use only HTTPS for this host from now on.
func (s *Server) strictTransport(next http.Handler) http.Handler {
	value := "max-age=" + strconv.Itoa(int(hstsMaxAge.Seconds()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth.secure(r) {
			w.Header().Set("Strict-Transport-Security", value)
		}
		next.ServeHTTP(w, r)
	})
}
