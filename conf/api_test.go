package conf_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zksched/zksched/conf"
)

func TestAPIToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	if err := os.WriteFile(good, []byte("  0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		api       conf.API
		wantErr   string
		wantToken string
	}{
		{"none", conf.API{}, "", ""},
		{"token", conf.API{Token: "0123456789abcdef"}, "", "0123456789abcdef"},
		{"short token", conf.API{Token: "secret"}, "api.token: the token is 6 characters; use at least 16", ""},
		{"file", conf.API{TokenFile: good}, "", "0123456789abcdef0123"},
		{"short file", conf.API{TokenFile: short}, "api.token-file: the token is 3 characters", ""},
		{"missing file", conf.API{TokenFile: filepath.Join(dir, "nope")}, "api.token-file: read token file:", ""},
		{"both", conf.API{Token: "0123456789abcdef", TokenFile: good}, "api.token-file: set api.token or api.token-file, not both", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := conf.Defaults()
			c.Node.Host = "127.0.0.1"
			c.API = tc.api
			err := c.Validate()
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
			if tc.wantErr != "" {
				return
			}
			if got, err := tc.api.ResolveToken(); err != nil || got != tc.wantToken {
				t.Errorf("ResolveToken() = %q, %v; want %q", got, err, tc.wantToken)
			}
		})
	}
}

func TestAPITokenFromEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := conf.Load("", []string{"ZKSCHED_API_TOKEN=from-the-environment-0123"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.API.Token != "from-the-environment-0123" {
		t.Fatalf("api.token = %q", cfg.API.Token)
	}
}
