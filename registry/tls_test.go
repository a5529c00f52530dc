package registry

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/zksched/zksched/internal/testenv"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client certificate, as PEM
// files and as Go values.
type testPKI struct {
	caFile, serverFile string // serverFile: the server's key, then its certificate
	roots              *x509.CertPool
	client             tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	key := func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "zksched test ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips ...net.IP) (*rsa.PrivateKey, []byte) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: ips,
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return k, der
	}
	pemOf := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	pkcs8 := func(k *rsa.PrivateKey) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pemOf("PRIVATE KEY", der)
	}
	p := &testPKI{caFile: filepath.Join(dir, "ca.pem"), serverFile: filepath.Join(dir, "server.pem"), roots: x509.NewCertPool()}
	p.roots.AddCert(ca)
	sk, sder := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	ck, cder := issue(3, "zksched node", x509.ExtKeyUsageClientAuth)
	if err := os.WriteFile(p.caFile, pemOf("CERTIFICATE", caDER), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.serverFile, append(pkcs8(sk), pemOf("CERTIFICATE", sder)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if p.client, err = tls.X509KeyPair(pemOf("CERTIFICATE", cder), pkcs8(ck)); err != nil {
		t.Fatal(err)
	}
	return p
}

// A client with Config.TLS works through a ZooKeeper 3.8 server's secureClientPort (Netty, a
// client certificate required): it gets a session with the granted timeout read off the TLS
// stream, registers with the ACL, and reads the tree. Without a client certificate, or without
// TLS, the same port gives no session. With the code before there was no TLS at all.
func TestTLSToZooKeeper(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	srv := testenv.NewZKServer(t)
	secure := srv.StartTLS("data", pki.serverFile, pki.caFile)
	log := newLogSink(t)
	cfg := Config{Servers: []string{secure}, Root: "/zksched-tls", SessionTimeout: 2 * time.Second,
		InfoInterval: 200 * time.Millisecond, Auth: testCreds, Logger: zerolog.New(log),
		TLS: &tls.Config{RootCAs: pki.roots, Certificates: []tls.Certificate{pki.client}, MinVersion: tls.VersionTLS12}}
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
		"no client certificate": {RootCAs: pki.roots, MinVersion: tls.VersionTLS12},
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
	other := newTestPKI(t)
	bad := cfg
	bad.TLS, bad.Logger = &tls.Config{RootCAs: other.roots, Certificates: []tls.Certificate{pki.client}}, zerolog.New(log)
	bctx, bcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer bcancel()
	if c, err := Dial(bctx, bad); err == nil {
		c.Close()
		t.Error("Dial trusting another CA got a session")
	}
	log.waitFor(t, "certificate signed by unknown authority", 5*time.Second)
}
