package conf_test

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/internal/testenv"
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
		{"unreadable file", conf.API{TokenFile: dir}, "api.token-file: read token file:", ""},
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

// TestAPITokenFileMissing: a token file that does not exist yet is valid, since the master
// creates it at start; until then ResolveToken says it is missing.
func TestAPITokenFileMissing(t *testing.T) {
	t.Parallel()
	c := conf.Defaults()
	c.Node.Host = "127.0.0.1"
	c.API.TokenFile = filepath.Join(t.TempDir(), "nope")
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
	if _, err := c.API.ResolveToken(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ResolveToken() error = %v, want one wrapping fs.ErrNotExist", err)
	}
}

// TestStateDir: node.state-dir follows ZKSCHED_NODE_STATE_DIR, then the XDG state folder,
// then the home's, and must be absolute.
func TestStateDir(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"HOME=/home/ann", "XDG_STATE_HOME=/x/state", "ZKSCHED_NODE_STATE_DIR=/srv/zk"}, "/srv/zk"},
		{[]string{"HOME=/home/ann", "XDG_STATE_HOME=/x/state"}, "/x/state/zksched"},
		{[]string{"HOME=/home/ann", "XDG_STATE_HOME=relative"}, "/home/ann/.local/state/zksched"},
		{[]string{"HOME=/home/ann"}, "/home/ann/.local/state/zksched"},
		{nil, ""},
	} {
		cfg, err := conf.Load("", tc.env)
		if err != nil {
			t.Fatalf("Load(%q): %v", tc.env, err)
		}
		if cfg.Node.StateDir != tc.want {
			t.Errorf("Load(%q): node.state-dir = %q, want %q", tc.env, cfg.Node.StateDir, tc.want)
		}
	}
	if _, err := conf.Load("", []string{"ZKSCHED_NODE_STATE_DIR=rel/dir"}); err == nil || !strings.Contains(err.Error(), `node.state-dir: "rel/dir" is not an absolute path`) {
		t.Errorf("Load with a relative state dir: error %v, want node.state-dir named", err)
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

// usersFile writes a users file and returns its path.
func usersFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	hashA = "sha256:" + "a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3"
	hashB = "sha256:" + "b5d4045c3f466fa91fe2cc6abe79232a1a57cdf104f7a26e716e0a1e2789df78"
)

func TestParseUsers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, wantErr string
		want                []string
	}{
		{"empty", "", "", nil},
		{"comments and blanks", "# users\n\n  alice operator " + hashA + "  # on call\n\tbob viewer " + hashB + "\n", "", []string{"alice operator", "bob viewer"}},
		{"too few fields", "alice operator\n", "line 1: 2 fields; want NAME ROLE sha256:HEX", nil},
		{"too many fields", "# x\nalice operator " + hashA + " extra\n", "line 2: 4 fields", nil},
		{"bad role", "alice root " + hashA + "\n", `line 1: role "root": want one of viewer, operator, admin`, nil},
		{"bad hash", "alice viewer sha256:abc\n", `line 1: token hash "sha256:abc": want sha256: and 64 hexadecimal digits`, nil},
		{"plain token", "alice viewer 0123456789abcdef0123456789abcdef\n", "line 1: token hash", nil},
		{"duplicate name", "alice viewer " + hashA + "\nalice admin " + hashB + "\n", `line 2: user "alice" is already on line 1`, nil},
		{"shared token", "alice viewer " + hashA + "\nbob admin " + hashA + "\n", "line 2: the same token as the user on line 1", nil},
		{"control character", "al\x01ice viewer " + hashA + "\n", "line 1: user name", nil},
		{"long name", strings.Repeat("n", conf.MaxUserName+1) + " viewer " + hashA + "\n", "line 1: user name of 129 bytes: at most 128", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			users, err := conf.ParseUsers(strings.NewReader(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseUsers() = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range users {
				got = append(got, u.Name+" "+u.Role)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("users = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUserLineRoundTrip(t *testing.T) {
	t.Parallel()
	u := conf.User{Name: "alice", Role: "admin", TokenHash: sha256.Sum256([]byte("123"))}
	got, err := conf.ParseUsers(strings.NewReader(u.String() + "\n"))
	if err != nil || len(got) != 1 || got[0].Name != u.Name || got[0].Role != u.Role || got[0].TokenHash != u.TokenHash {
		t.Fatalf("ParseUsers(%q) = %+v, %v", u.String(), got, err)
	}
}

func TestAPIAccessValidation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pki := testenv.NewPKI(t)
	cert, key := pki.ServerCertFile, pki.ServerKeyFile
	malformed := usersFile(t, "alice viewer\n")
	adminUser := usersFile(t, "admin admin "+hashA+"\n")
	for _, tc := range []struct {
		name    string
		api     conf.API
		wantErr string
	}{
		{"nothing", conf.API{}, ""},
		{"users file", conf.API{UsersFile: usersFile(t, "alice viewer "+hashA+"\n")}, ""},
		{"users file not there yet", conf.API{UsersFile: filepath.Join(dir, "none")}, ""},
		{"malformed users file", conf.API{UsersFile: malformed}, "api.users-file: users file " + malformed + ": line 1: 2 fields"},
		{"admin in the file beside the token", conf.API{Token: "0123456789abcdef", UsersFile: adminUser}, "api.users-file: line 1: the user admin is the api.token's"},
		{"admin in the file alone", conf.API{UsersFile: adminUser}, ""},
		{"open and a token", conf.API{Token: "0123456789abcdef", AllowUnauthenticated: true}, "api.allow-unauthenticated: true while a token"},
		{"open", conf.API{AllowUnauthenticated: true}, ""},
		{"bad allowed host", conf.API{AllowedHosts: []string{"ok.example", "no/path"}}, `api.allowed-hosts[1]: "no/path"`},
		{"tls pair", conf.API{TLSCert: cert, TLSKey: key}, ""},
		{"tls cert alone", conf.API{TLSCert: cert}, "api.tls-cert: set api.tls-cert and api.tls-key together"},
		{"tls key alone", conf.API{TLSKey: key}, "api.tls-cert: set api.tls-cert and api.tls-key together"},
		{"tls swapped", conf.API{TLSCert: key, TLSKey: cert}, "api.tls-cert: load the pair"},
		{"tls missing", conf.API{TLSCert: filepath.Join(dir, "nope"), TLSKey: key}, "api.tls-cert: load the pair"},
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
		})
	}
}

func TestAPIAccessFromEnvironment(t *testing.T) {
	t.Parallel()
	users := usersFile(t, "")
	cfg, err := conf.Load("", []string{"ZKSCHED_API_ALLOW_UNAUTHENTICATED=true", "ZKSCHED_API_ALLOWED_HOSTS=a.example, b.example",
		"ZKSCHED_API_COOKIE_SECURE=true"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.API.AllowUnauthenticated || !cfg.API.CookieSecure || strings.Join(cfg.API.AllowedHosts, ",") != "a.example,b.example" {
		t.Fatalf("api = %+v", cfg.API)
	}
	cfg, err = conf.Load("", []string{"ZKSCHED_API_USERS_FILE=" + users})
	if err != nil || cfg.API.UsersFile != users || !cfg.API.Authenticated() {
		t.Fatalf("api.users-file = %q, %v", cfg.API.UsersFile, err)
	}
}

// TestAPILimitsAreChecked: the rate limit and the heavy reads' bounds refuse what cannot
// work, naming the key; the defaults pass.
func TestAPILimitsAreChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		set     func(a *conf.API)
		wantErr string
	}{
		{"defaults", func(*conf.API) {}, ""},
		{"rate limit off", func(a *conf.API) { a.RateLimit, a.RateBurst = 0, 0 }, ""},
		{"negative rate", func(a *conf.API) { a.RateLimit = -1 }, "api.rate-limit: -1 is out of range"},
		{"no burst", func(a *conf.API) { a.RateBurst = 0 }, "api.rate-burst: 0 is out of range"},
		{"too many heavy reads", func(a *conf.API) { a.HeavyReads = 5000 }, "api.heavy-reads: 5000 is out of range"},
		{"negative wait", func(a *conf.API) { a.HeavyReadWait = -time.Second }, "api.heavy-read-wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := conf.Defaults()
			c.Node.Host = "127.0.0.1"
			tc.set(&c.API)
			err := c.Validate()
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
