package conf_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zksched/zksched/conf"
)

func TestRegistryAuthFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, file, wantErr, wantUser, wantPassword string
	}{
		{"none", "", "", "", ""},
		{"good", file("good", "  zksched:s3cret:with:colons \n"), "", "zksched", "s3cret:with:colons"},
		{"no colon", file("nocolon", "zksched\n"), "registry.auth-file: registry auth file " + dir + "/nocolon: want user:password, found no colon", "", ""},
		{"empty user", file("nouser", ":secret"), "the user is empty", "", ""},
		{"empty password", file("nopass", "zksched:"), "the password is empty", "", ""},
		{"two lines", file("lines", "zksched:a\nb"), "found a control character", "", ""},
		{"missing", filepath.Join(dir, "nope"), "registry.auth-file: read registry auth file:", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := conf.Defaults()
			c.Node.Host = "127.0.0.1"
			c.Registry.AuthFile = tc.file
			err := c.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			user, password, ok, err := c.Registry.ReadAuth()
			if err != nil || ok != (tc.file != "") || user != tc.wantUser || password != tc.wantPassword {
				t.Fatalf("ReadAuth() = %q, %q, %v, %v; want %q, %q", user, password, ok, err, tc.wantUser, tc.wantPassword)
			}
		})
	}
}

func TestRegistryTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		reg     func(*conf.Registry)
		wantErr string
	}{
		{"none", func(*conf.Registry) {}, ""},
		{"ca not pem", func(r *conf.Registry) { r.TLSCA = notPEM }, "registry.tls-ca: registry tls ca " + notPEM + " holds no PEM certificate"},
		{"ca missing", func(r *conf.Registry) { r.TLSCA = filepath.Join(dir, "nope") }, "registry.tls-ca: read registry tls ca:"},
		{"cert without key", func(r *conf.Registry) { r.TLSCert = notPEM }, "set registry.tls-cert and registry.tls-key together"},
		{"bad pair", func(r *conf.Registry) { r.TLSCert, r.TLSKey = notPEM, notPEM }, "load registry tls client certificate:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := conf.Defaults()
			c.Node.Host = "127.0.0.1"
			tc.reg(&c.Registry)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				if cfg, err := c.Registry.TLSConfig(); cfg != nil || err != nil {
					t.Fatalf("TLSConfig() = %v, %v; want nil (plain TCP)", cfg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
