package api

import (
	"net"
	"net/http"
	"strings"
)

// A web page can have a browser inside the network reach a master by rebinding its own DNS
// name to the master's address: the browser then sends the page's name as Host. Refusing
// every Host that is not a name of the master (or one the operator allowed, such as a load
// balancer's) closes that way in, whatever the authentication.

// hostSet is the lower-cased host names and addresses a request's Host may name.
type hostSet map[string]bool

// newHostSet returns the loopback names plus hosts (host or host:port each).
func newHostSet(hosts []string) hostSet {
	set := hostSet{}
	for _, h := range append([]string{"127.0.0.1", "localhost", "::1"}, hosts...) {
		if h != "" {
			set[hostOnly(h)] = true
		}
	}
	return set
}

// hostOnly strips the port and the IPv6 brackets from a Host value and lower-cases it.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}

// checkHost refuses with 421 a request whose Host is not one of the master's names. A request
// without a Host (HTTP/1.0) names nothing a DNS rebinding could use and goes through.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "" && !s.hosts[hostOnly(r.Host)] {
			logFor(r).Info().Str("remote", r.RemoteAddr).Str("host", r.Host).Msg("request for another host refused")
			s.writeError(w, r, errorf(http.StatusMisdirectedRequest,
				"host %q is not a name of this master: use its address, or add the name to api.allowed-hosts", cut(r.Host, 100)))
			return
		}
		next.ServeHTTP(w, r)
	})
}
