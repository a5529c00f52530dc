package main

import (
	"crypto/tls"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/registry"
)

// The HTTP server's limits, on masters and workers alike. No endpoint streams or waits for
// long (the UI's refresh and a log's follower poll; `submit --wait` reads the database), so
// one bound fits every response.
const (
	// httpReadHeaderTimeout bounds a request's header: a client that trickles one (slowloris)
	// holds a connection for no longer.
	httpReadHeaderTimeout = 10 * time.Second
	// httpReadTimeout bounds the whole request, its body of at most 1 MiB included.
	httpReadTimeout = time.Minute
	// httpWriteTimeout bounds a response: above the 30 s a request's work may take, with
	// time to send a large log tail to a slow client.
	httpWriteTimeout = 2 * time.Minute
	// httpIdleTimeout is how long a kept-alive connection may wait for its next request.
	httpIdleTimeout = 2 * time.Minute
	// httpMaxHeaderBytes caps a request's header, far above a browser's with its cookies.
	httpMaxHeaderBytes = 64 << 10
)

// newHTTPServer returns the server of a node's port, logging its own errors (a failed TLS
// handshake, a broken connection) at debug level through log.
func newHTTPServer(h http.Handler, log zerolog.Logger) *http.Server {
	errLog := log.Level(zerolog.DebugLevel).With().Str("component", "http").Logger()
	return &http.Server{Handler: h, ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout,
		WriteTimeout: httpWriteTimeout, IdleTimeout: httpIdleTimeout, MaxHeaderBytes: httpMaxHeaderBytes,
		ErrorLog: stdlog.New(debugWriter{errLog}, "", 0)}
}

// debugWriter writes each line of the standard logger at debug level.
type debugWriter struct{ log zerolog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.log.Debug().Msg(string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}

// listenNode binds the node's HTTP port. A master serves on node.host only when it was given
// a credential (a token or a users file) or api.allow-unauthenticated says so; with the token
// it generated (masterToken) on loopback alone, since its operator set nothing up for
// callers from elsewhere. A master with api.tls-cert serves TLS. It returns the listener and
// the URL the node advertises.
func listenNode(cfg *conf.Config, role registry.Role, port int, authenticated bool, log zerolog.Logger) (net.Listener, string, error) {
	host := cfg.Node.Host
	if role == registry.RoleMaster && !isLocalhost(host) {
		switch {
		case authenticated:
		case cfg.API.AllowUnauthenticated:
			log.Warn().Str("host", host).Msg("api.allow-unauthenticated: serving the API without authentication beyond loopback: " +
				"anyone who reaches this port may read everything, store definitions and run them, that is run shell commands on every worker")
		default:
			log.Warn().Str("node_host", host).Str("listen", "127.0.0.1").Msg("no api.token and no api.users-file: serving the API " +
				"on loopback only, with the admin token generated into node.state-dir, since anyone who reached it could run shell " +
				"commands on every worker; set a token or a users file (zksched user add) to serve on node.host")
			host = "127.0.0.1"
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, "", fmt.Errorf("http port: %w", err)
	}
	scheme := "http"
	if role == registry.RoleMaster && cfg.API.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.API.TLSCert, cfg.API.TLSKey)
		if err != nil {
			ln.Close()
			return nil, "", exitError{code: exitUsage, msg: fmt.Sprintf("conf: api.tls-cert: %v", err)}
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
			NextProtos: []string{"h2", "http/1.1"}})
		scheme = "https"
	}
	return ln, scheme + "://" + ln.Addr().String(), nil
}

// isLocalhost reports whether host is the loopback address an open master may serve on:
// 127.0.0.1, ::1 or localhost. Another loopback address (127.0.0.2) may stand for a machine
// of its own, as in tests, so it is not one.
func isLocalhost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// ownHosts are the names a request to this master may carry in its Host header: node.host,
// the address it listens on (every interface's when that is a wildcard), the machine's
// hostname and api.allowed-hosts. The api package adds the loopback names.
func ownHosts(cfg *conf.Config, ln net.Listener) []string {
	hosts := append([]string{cfg.Node.Host}, cfg.API.AllowedHosts...)
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name)
	}
	if addr, ok := ln.Addr().(*net.TCPAddr); ok {
		hosts = append(hosts, addr.IP.String())
		if addr.IP.IsUnspecified() {
			if addrs, err := net.InterfaceAddrs(); err == nil {
				for _, a := range addrs {
					if ipnet, ok := a.(*net.IPNet); ok {
						hosts = append(hosts, ipnet.IP.String())
					}
				}
			}
		}
	}
	return hosts
}
