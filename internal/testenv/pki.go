package testenv

import (
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
	"testing"
	"time"
)

// PKI is a test CA with a server certificate for 127.0.0.1 and a client certificate, as PEM
// files (for ZooKeeper's PEM key and trust stores, and zksched's registry.tls-* keys) and as
// Go values.
type PKI struct {
	// CAFile is the CA certificate; ServerFile the server's key, then its certificate (as
	// ZooKeeper's PEM key store wants them); ServerCertFile and ServerKeyFile the same two
	// apart (as api.tls-cert and api.tls-key want them).
	CAFile, ServerFile, ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile are the client certificate and its key.
	ClientCertFile, ClientKeyFile string
	Roots                         *x509.CertPool
	Client                        tls.Certificate
}

// NewPKI makes a PKI in a temporary directory of the test.
func NewPKI(t testing.TB) *PKI {
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
	p := &PKI{CAFile: filepath.Join(dir, "ca.pem"), ServerFile: filepath.Join(dir, "server.pem"),
		ServerCertFile: filepath.Join(dir, "server-cert.pem"), ServerKeyFile: filepath.Join(dir, "server-key.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"), ClientKeyFile: filepath.Join(dir, "client.key"), Roots: x509.NewCertPool()}
	p.Roots.AddCert(ca)
	sk, sder := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	ck, cder := issue(3, "zksched node", x509.ExtKeyUsageClientAuth)
	for f, data := range map[string][]byte{
		p.CAFile:         pemOf("CERTIFICATE", caDER),
		p.ServerFile:     append(pkcs8(sk), pemOf("CERTIFICATE", sder)...),
		p.ServerCertFile: pemOf("CERTIFICATE", sder),
		p.ServerKeyFile:  pkcs8(sk),
		p.ClientCertFile: pemOf("CERTIFICATE", cder),
		p.ClientKeyFile:  pkcs8(ck),
	} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if p.Client, err = tls.X509KeyPair(pemOf("CERTIFICATE", cder), pkcs8(ck)); err != nil {
		t.Fatal(err)
	}
	return p
}
