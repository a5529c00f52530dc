package registry

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/zksched/zksched/internal/testenv"
)

// A client with Config.TLS works through a ZooKeeper 3.8 server's secureClientPort (Netty, a
// client certificate required): it gets a session with the granted timeout read off the TLS
// stream, registers with the ACL, and reads the tree. Without a client certificate, or without
// TLS, the same port gives no session.
func TestTLSToZooKeeper(t *testing.T) {
	t.Parallel()
	pki := testenv.NewPKI(t)
	srv := testenv.NewZKServer(t)
	secure := srv.StartTLS("data", pki.ServerFile, pki.CAFile)
	log := newLogSink(t)
	cfg := Config{Servers: []string{secure}, Root: "/zksched-tls", SessionTimeout: 2 * time.Second,
		InfoInterval: 200 * time.Millisecond, Auth: testCreds, Logger: zerolog.New(log),
		TLS: &tls.Config{RootCAs: pki.Roots, Certificates: []tls.Certificate{pki.Client}, MinVersion: tls.VersionTLS12}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("Dial over TLS: %v", err)
	}
	defer c.Close()
	if got := c.SessionTimeout(); got != 2*time.Second {
		t.Errorf("SessionTimeout() over TLS = %v, want the granted 2s", got)
	}
	r, err := c.Register(ctx, nodeInfo(RoleWorker, "1"))
	if err != nil {
		t.Fatalf("Register over TLS: %v", err)
	}
	defer r.Close(context.Background())
	cl, err := c.Cluster(ctx)
	if err != nil || len(cl.Workers) != 1 || cl.Workers[0].ID != r.ID() {
		t.Fatalf("Cluster over TLS: %+v, %v", cl, err)
	}

	for name, tc := range map[string]*tls.Config{
		"no client certificate": {RootCAs: pki.Roots, MinVersion: tls.VersionTLS12},
		"no tls":                nil,
	} {
		bad := cfg
		bad.TLS, bad.Logger = tc, zerolog.Nop()
		bctx, bcancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := Dial(bctx, bad)
		bcancel()
		if err == nil {
			c.Close()
			t.Errorf("Dial to the TLS port with %s got a session", name)
		} else if !strings.Contains(err.Error(), "deadline") {
			t.Errorf("Dial with %s: %v, want it to time out", name, err)
		}
	}
	// The server's certificate is checked: a client that trusts another CA is refused.
	other := testenv.NewPKI(t)
	bad := cfg
	bad.TLS, bad.Logger = &tls.Config{RootCAs: other.Roots, Certificates: []tls.Certificate{pki.Client}}, zerolog.New(log)
	bctx, bcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer bcancel()
	if c, err := Dial(bctx, bad); err == nil {
		c.Close()
		t.Error("Dial trusting another CA got a session")
	}
	log.waitFor(t, "certificate signed by unknown authority", 5*time.Second)
}
