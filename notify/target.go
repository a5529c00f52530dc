package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrPrivateTarget is a webhook refused at connect time because the address its host resolved
// to is the master's own (loopback, unspecified), link-local (where the clouds' metadata
// services answer) or a metadata service's.
var ErrPrivateTarget = errors.New("the webhook's address is loopback, link-local, unspecified or a cloud metadata " +
	"service, which notify.allow-private-targets: true would allow")

// metadataAddrs are the cloud metadata services outside the link-local ranges: AWS's IPv6
// one (in fd00::/8, which stays allowed otherwise) and Alibaba's (in 100.64.0.0/10).
var metadataAddrs = []netip.Addr{netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}

// nat64 is the well-known NAT64 prefix, whose addresses reach the IPv4 address in their last
// four bytes through a NAT64 gateway.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// PrivateTarget reports whether a webhook must not connect to addr unless
// notify.allow-private-targets is set: loopback, unspecified (0.0.0.0/8 and ::, which reach
// the host itself), link-local (169.254.0.0/16, fe80::/10, the metadata services' home) and
// the metadata services elsewhere, in any spelling that reaches one of them (IPv4-mapped,
// IPv4-compatible and NAT64 IPv6). The private ranges of RFC 1918 and fc00::/7 are not: an
// internal chat server is a webhook's usual target.
func PrivateTarget(addr netip.Addr) bool {
	addr = addr.WithZone("").Unmap()
	if b := addr.As16(); addr.Is6() && ([12]byte(b[:12]) == [12]byte{} || nat64.Contains(addr)) {
		// IPv4-compatible (::a.b.c.d, :: and ::1 among them) or NAT64: the IPv4 address is reached.
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	if addr.IsLoopback() || addr.IsUnspecified() || addr.IsLinkLocalUnicast() || addr.Is4() && addr.As4()[0] == 0 {
		return true
	}
	for _, m := range metadataAddrs {
		if addr == m {
			return true
		}
	}
	return false
}

// refusePrivate is a net.Dialer's Control: it sees the address each connection is about to be
// made to, after the name was resolved, so neither a name that resolves differently at each
// lookup nor a spelling the resolver alone understands gets past it.
func refusePrivate(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook address %q: %w", address, err)
	}
	if PrivateTarget(ap.Addr()) {
		return ErrPrivateTarget
	}
	return nil
}

// webhookClient is the client of the webhooks: it follows no redirect (a 3xx is an answer,
// and a failure), uses no proxy (HTTP_PROXY and the like would resolve and connect where the
// check below does not see), and unless allowPrivate refuses PrivateTarget addresses when it
// connects. timeout bounds one request.
func webhookClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = refusePrivate
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         dialer.DialContext,
			TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout: timeout,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// OutboundClient is the client of the webhooks (see webhookClient), for other requests that
// a workflow's author aims and a node sends: the http tools of agents.
func OutboundClient(timeout time.Duration, allowPrivate bool) *http.Client {
	return webhookClient(timeout, allowPrivate)
}

// postError is a failed webhook try: Error is what the notification's last_error shows to
// every viewer (the class of the failure and the variable, never the URL, its host or
// address, nor anything the target answered but its status code); the cause, for the
// master's log, is under Unwrap.
type postError struct {
	msg   string
	cause error
}

func (e *postError) Error() string { return e.msg }

func (e *postError) Unwrap() error { return e.cause }

// classify turns the error of a webhook's request through the variable env into a postError.
func classify(env string, err error) error {
	var dnsErr *net.DNSError
	var netErr net.Error
	var msg string
	switch {
	case errors.Is(err, ErrPrivateTarget):
		msg = fmt.Sprintf("the webhook in %s was refused: %v", env, ErrPrivateTarget)
	case errors.As(err, &dnsErr):
		msg = fmt.Sprintf("the host of the webhook in %s did not resolve", env)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		msg = fmt.Sprintf("the webhook in %s did not answer within notify.timeout", env)
	default:
		msg = fmt.Sprintf("could not post to the webhook in %s: no connection (the master's log says why)", env)
	}
	return &postError{msg: msg, cause: err}
}
