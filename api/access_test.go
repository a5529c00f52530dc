package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/api"
	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

// Tokens of the users the access tests write in their users files.
const (
	viewerToken   = "viewer-token-0123456789abcdef"
	operatorToken = "operator-token-0123456789abcdef"
	adminToken    = "admin-token-0123456789abcdef"
)

func userLine(name, role, token string) string {
	return conf.User{Name: name, Role: role, TokenHash: sha256.Sum256([]byte(token))}.String() + "\n"
}

// writeUsers writes a users file of a viewer, an operator and an admin and returns its path.
func writeUsers(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "users")
	body := "# test users\n" + userLine("vera", "viewer", viewerToken) + userLine("otto", "operator", operatorToken) +
		userLine("ada", "admin", adminToken)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// session is a browser of the UI: a cookie jar and the CSRF token of the last page read.
type session struct {
	t      *testing.T
	b      *testBundle
	client *http.Client
	csrf   string
}

func newSession(t *testing.T, b *testBundle) *session {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := *b.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &session{t: t, b: b, client: &c}
}

func (s *session) get(path string) response {
	s.t.Helper()
	resp, err := s.client.Get(s.b.srv.URL + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if v := between(string(raw), `name="csrf" value="`, `"`); v != "" {
		s.csrf = v
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func (s *session) post(path string, form url.Values) response {
	s.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", s.csrf)
	}
	resp, err := s.client.PostForm(s.b.srv.URL+path, form)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

// login logs in with token, fails the test unless it is let in, and opens the page it is
// sent to, whose forms carry the session's CSRF token.
func (s *session) login(token string) {
	s.t.Helper()
	s.get("/login")
	if r := s.post("/login", url.Values{"token": {token}, "next": {"/"}}); r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
		s.t.Fatalf("login: status %d to %q: %s", r.status, r.header.Get("Location"), r.body)
	}
	s.get("/")
}

func (s *session) cookie(name string) *http.Cookie {
	u, _ := url.Parse(s.b.srv.URL)
	for _, c := range s.client.Jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestRolesPerRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{usersFile: writeUsers(t), token: "the-admin-token-0123456789"})
	f := b.seed(t, 6)
	b.token = ""
	type call struct{ method, path, body string }
	calls := []struct {
		call
		need string
	}{
		{call{"GET", "/api/v1/task-instances", ""}, "viewer"},
		{call{"GET", "/api/v1/cluster", ""}, "viewer"},
		{call{"POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t5"]), ""}, "operator"},
		{call{"POST", fmt.Sprintf("/api/v1/task-instances/%d/rerun", f.byName["t2"]), ""}, "operator"},
		{call{"POST", fmt.Sprintf("/api/v1/workflow-instances/%d/stop", f.other), ""}, "operator"},
		{call{"POST", fmt.Sprintf("/api/v1/workflow-instances/%d/rerun", f.wf), ""}, "operator"},
		{call{"POST", "/api/v1/schedules/nope/enable", ""}, "operator"},
		{call{"POST", "/api/v1/schedules/nope/disable", ""}, "operator"},
		{call{"POST", "/api/v1/schedules/nope/trigger", ""}, "operator"},
		{call{"POST", "/api/v1/assets/orders/events", `{"output": "x"}`}, "operator"},
		{call{"POST", "/api/v1/definitions", "name: d\ntasks:\n  - {name: a, type: noop}\n"}, "admin"},
		{call{"POST", "/api/v1/workflow-instances", `{"name": "wf"}`}, "admin"},
	}
	rank := map[string]int{"viewer": 1, "operator": 2, "admin": 3}
	for _, user := range []struct{ name, role, token string }{
		{"vera", "viewer", viewerToken}, {"otto", "operator", operatorToken}, {"ada", "admin", adminToken},
		{"admin", "admin", "the-admin-token-0123456789"},
	} {
		for _, c := range calls {
			ct := "application/json"
			if strings.HasSuffix(c.path, "/definitions") {
				ct = "application/yaml"
			}
			r := b.do(t, c.method, c.path, c.body, "Authorization", "Bearer "+user.token, "Content-Type", ct)
			allowed := rank[user.role] >= rank[c.need]
			if allowed && (r.status == 401 || r.status == 403) {
				t.Errorf("%s (%s) %s %s: status %d, want it allowed: %s", user.name, user.role, c.method, c.path, r.status, r.body)
			}
			if !allowed {
				if r.status != 403 {
					t.Errorf("%s (%s) %s %s: status %d, want 403: %s", user.name, user.role, c.method, c.path, r.status, r.body)
					continue
				}
				if msg := r.errorMessage(t); !strings.Contains(msg, "needs the "+c.need+" role; "+user.name+" is "+user.role) {
					t.Errorf("403 message %q", msg)
				}
			}
		}
	}
	// A viewer's form post is refused with an error page, not JSON.
	s := newSession(t, b)
	s.login(viewerToken)
	r := s.post(fmt.Sprintf("/tasks/%d/kill", f.byName["t4"]), nil)
	if r.status != 403 || !strings.Contains(r.body, `id="error-message"`) || !strings.Contains(r.body, "needs the operator role; vera is viewer") {
		t.Fatalf("viewer's kill form: status %d\n%s", r.status, r.body)
	}
	if got := b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d", f.byName["t4"]), "", "Authorization", "Bearer "+viewerToken); !strings.Contains(got.body, `"kill_requested": false`) {
		t.Fatalf("a viewer's refused kill changed the task: %s", got.body)
	}

	// Each refusal for the role is in the audit trail as a refused attempt, under its user.
	b.token = "the-admin-token-0123456789"
	trail := b.audit(t, "actor=vera&limit=500")
	refused, logins := 0, 0
	for _, ev := range trail.Items {
		if ev.Action == dao.AuditLogin && ev.Outcome == dao.AuditOK {
			logins++
			continue
		}
		if ev.Role != "viewer" || !strings.HasPrefix(ev.Outcome, "refused: forbidden: ") || !strings.Contains(ev.Outcome, "needs the") {
			t.Errorf("vera's row %+v: want a refused attempt for the role", ev)
			continue
		}
		refused++
	}
	// Every change above (each call but a GET) needs more than a viewer, and the form's kill
	// makes one more.
	want := 1
	for _, c := range calls {
		if c.method != "GET" {
			want++
		}
	}
	if refused != want || logins != 1 {
		t.Errorf("vera has %d refused rows and %d logins in the trail, want %d and 1", refused, logins, want)
	}
}

func TestUIShowsWhoAndHidesWhatTheRoleCannotDo(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{usersFile: writeUsers(t)})
	f := b.seed(t, 6)
	queued, failed := f.byName["t5"], f.byName["t2"]
	for _, tc := range []struct {
		token, name, role string
		actions           bool
	}{
		{viewerToken, "vera", "viewer", false},
		{operatorToken, "otto", "operator", true},
		{adminToken, "ada", "admin", true},
	} {
		s := newSession(t, b)
		s.login(tc.token)
		home := s.get("/")
		if !strings.Contains(home.body, `<span id="who-name">`+tc.name+`</span> · <span id="who-role">`+tc.role+`</span>`) {
			t.Errorf("%s: the layout does not say who is logged in:\n%s", tc.name, home.body)
		}
		for _, p := range []struct{ path, id string }{
			{fmt.Sprintf("/tasks/%d", queued), `id="kill"`},
			{fmt.Sprintf("/tasks/%d", failed), `id="rerun"`},
			{fmt.Sprintf("/workflows/%d", f.wf), `id="stop"`},
			{fmt.Sprintf("/workflows/%d", f.wf), `id="rerun"`},
		} {
			r := s.get(p.path)
			if r.status != 200 {
				t.Fatalf("%s: GET %s: %d", tc.name, p.path, r.status)
			}
			if got := strings.Contains(r.body, p.id); got != tc.actions {
				t.Errorf("%s (%s) on %s: action %s shown = %v, want %v", tc.name, tc.role, p.path, p.id, got, tc.actions)
			}
		}
	}
}

func TestUsersFileIsReadAgainWhenItChanges(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(path, []byte(userLine("alice", "viewer", viewerToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	b := setup(t, setupOpts{usersFile: path})
	status := func(token string) int {
		return b.do(t, "GET", "/api/v1/task-instances", "", "Authorization", "Bearer "+token).status
	}
	if s := status(viewerToken); s != 200 {
		t.Fatalf("alice: %d", s)
	}
	aliceUI := newSession(t, b)
	aliceUI.login(viewerToken)

	// Bob is added: his token works without a restart.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(userLine("bob", "operator", operatorToken)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitFor(t, 5*time.Second, "bob's token to be accepted", func() bool { return status(operatorToken) == 200 })

	// Alice is removed (the file rewritten by rename): her token and her session stop working.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(userLine("bob", "operator", operatorToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	// Wrong tokens count against the address: wait on the session, which does not.
	waitFor(t, 5*time.Second, "alice's session to end", func() bool { return aliceUI.get("/").status == http.StatusSeeOther })
	if s := status(viewerToken); s != 401 {
		t.Fatalf("alice's token after her removal: %d, want 401", s)
	}

	// A file broken by an edit refuses everyone in it rather than keep a removed user.
	if err := os.WriteFile(path, []byte(userLine("bob", "operator", operatorToken)+"carol\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bobUI := newSession(t, b)
	waitFor(t, 5*time.Second, "the broken file to be read", func() bool {
		return bobUI.get("/login").status == 200 && bobUI.post("/login", url.Values{"token": {operatorToken}}).status == 401
	})
}

// waitFor checks cond every 150 ms for up to d: the users file is read again at a request
// once a second has passed, which gives no signal but the answers. A wrong token counts
// against the address, so the checks are few: at most seven before a change is read, under
// the limiter's burst.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, d, 150*time.Millisecond, what, cond)
}

func TestLogoutEndsTheSessionOnEveryMaster(t *testing.T) {
	t.Parallel()
	users := writeUsers(t)
	a := setup(t, setupOpts{usersFile: users})
	b := setup(t, setupOpts{usersFile: users, db: a.db})
	s := newSession(t, a)
	s.login(operatorToken)
	stolen := s.cookie("zksched_session")
	if stolen == nil {
		t.Fatal("no session cookie after the login")
	}
	withStolen := func(bundle *testBundle, path string) int {
		return bundle.do(t, "GET", path, "", "Cookie", "zksched_session="+stolen.Value).status
	}
	if st := withStolen(b, "/api/v1/task-instances"); st != 200 {
		t.Fatalf("the session on the other master: %d, want 200", st)
	}
	if r := s.post("/logout", nil); r.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", r.status)
	}
	for _, bundle := range []*testBundle{a, b} {
		if st := withStolen(bundle, "/api/v1/task-instances"); st != 401 {
			t.Errorf("API with the cookie after logout: %d, want 401", st)
		}
		if st := withStolen(bundle, "/"); st != http.StatusSeeOther {
			t.Errorf("page with the cookie after logout: %d, want a redirect to the login", st)
		}
	}
}

func TestWrongTokensAreRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: adminToken})
	b.token = ""
	var limited response
	n := 0
	for n = 1; n <= 50; n++ {
		r := b.do(t, "GET", "/api/v1/cluster", "", "Authorization", fmt.Sprintf("Bearer guess-%d", n))
		if r.status == http.StatusTooManyRequests {
			limited = r
			break
		}
		if r.status != 401 {
			t.Fatalf("guess %d: status %d", n, r.status)
		}
	}
	if limited.status != http.StatusTooManyRequests || n < 5 {
		t.Fatalf("after %d wrong tokens: status %d, want 429 after a handful", n, limited.status)
	}
	if ra := limited.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("429 without a Retry-After: %q", ra)
	}
	// While the address is limited, its wrong tokens get 429 and its right ones are served:
	// a user behind the guesser's NAT is not locked out.
	if r := b.do(t, "GET", "/api/v1/cluster", "", "Authorization", "Bearer another-guess"); r.status != http.StatusTooManyRequests {
		t.Errorf("wrong token from a limited address: %d, want 429", r.status)
	}
	if r := b.do(t, "GET", "/api/v1/cluster", "", "Authorization", "Bearer "+adminToken); r.status != http.StatusOK {
		t.Errorf("right token from a limited address: %d, want 200", r.status)
	}
	s := newSession(t, b)
	s.get("/login")
	if r := s.post("/login", url.Values{"token": {"a-wrong-guess"}}); r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "Too many failed logins") {
		t.Errorf("wrong login from a limited address: %d", r.status)
	}
	if r := s.post("/login", url.Values{"token": {adminToken}}); r.status != http.StatusSeeOther {
		t.Errorf("right login from a limited address: %d, want 303", r.status)
	}
	if got := b.server.AuthFailures(); got != int64(n-1) {
		t.Errorf("AuthFailures() = %d, want %d", got, n-1)
	}
	if got := b.server.AuthRateLimited(); got != 3 {
		t.Errorf("AuthRateLimited() = %d, want 3", got)
	}
}

func TestHostHeaderIsChecked(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true, hosts: []string{"zksched.internal.example", "10.1.2.3"}})
	port := b.srv.URL[strings.LastIndex(b.srv.URL, ":")+1:]
	for host, want := range map[string]int{
		"127.0.0.1:" + port:                 200,
		"localhost:" + port:                 200,
		"LOCALHOST":                         200,
		"[::1]:" + port:                     200,
		"zksched.internal.example:" + port:  200,
		"10.1.2.3":                          200,
		"evil.example":                      421,
		"evil.example:" + port:              421,
		"127.0.0.1.evil.example:" + port:    421,
		"zksched.internal.example.evil.com": 421,
	} {
		r := b.do(t, "GET", "/api/v1/cluster", "", "Host", host)
		if r.status != want {
			t.Errorf("Host %q: status %d, want %d", host, r.status, want)
		}
		if want == 421 && !strings.Contains(r.errorMessage(t), "api.allowed-hosts") {
			t.Errorf("Host %q: message %q does not say what to do", host, r.errorMessage(t))
		}
	}
}

func TestCookiesAreSecureOverTLSOrWhenAsked(t *testing.T) {
	t.Parallel()
	db := setup(t, setupOpts{open: true}).db
	for _, tc := range []struct {
		name         string
		tls, setting bool
		want         bool
	}{
		{"plain http", false, false, false},
		{"behind a tls proxy", false, true, true},
		{"tls", true, false, true},
	} {
		b := setup(t, setupOpts{db: db, token: adminToken, tls: tc.tls, cookieSecure: tc.setting})
		s := newSession(t, b)
		page := s.get("/login")
		r := s.post("/login", url.Values{"token": {adminToken}})
		// Under TLS the cookies are __Host- prefixed (Secure, Path=/, no Domain), so that no
		// other host of the domain can plant them, and HSTS is sent; over plain HTTP neither.
		var cookies []string
		for _, h := range append(page.header.Values("Set-Cookie"), r.header.Values("Set-Cookie")...) {
			cookies = append(cookies, h)
			if got := strings.Contains(h, "; Secure"); got != tc.want {
				t.Errorf("%s: cookie %q Secure = %v, want %v", tc.name, h, got, tc.want)
			}
			if got := strings.HasPrefix(h, "__Host-zksched_"); got != tc.want {
				t.Errorf("%s: cookie %q __Host- prefixed = %v, want %v", tc.name, h, got, tc.want)
			}
			if !strings.Contains(h, "; Path=/") || strings.Contains(h, "Domain=") {
				t.Errorf("%s: cookie %q: want Path=/ and no Domain", tc.name, h)
			}
		}
		if len(cookies) < 2 {
			t.Errorf("%s: the login form and the login set cookies %v, want the pre-session's and the session's", tc.name, cookies)
		}
		for _, h := range []http.Header{page.header, r.header} {
			if got := h.Get("Strict-Transport-Security"); (got == "max-age=31536000") != tc.want || (got != "") != tc.want {
				t.Errorf("%s: Strict-Transport-Security %q, want it = %v", tc.name, got, tc.want)
			}
		}
		if home := s.get("/"); home.status != http.StatusOK {
			t.Errorf("%s: a page with the session: status %d, want 200", tc.name, home.status)
		}
		if r := s.post("/logout", nil); r.status != http.StatusSeeOther {
			t.Errorf("%s: logout: status %d, want 303", tc.name, r.status)
		}
	}
}

func TestStaticListsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	for path, want := range map[string]int{"/static/": 404, "/static/x/": 404, "/static/style.css": 200, "/static/app.js": 200,
		"/static/nope.css": 404} {
		r := b.do(t, "GET", path, "")
		if r.status != want {
			t.Errorf("GET %s: %d, want %d", path, r.status, want)
		}
		if want == 404 && strings.Contains(r.body, `href="style.css"`) {
			t.Errorf("GET %s lists the files:\n%s", path, r.body)
		}
	}
}

func TestLoginRedirectStaysOnSite(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: adminToken})
	for _, next := range []string{"/%09/evil.example/", "/\t/evil.example", "//evil.example", "/\\evil.example",
		"/%2F%2Fevil.example", "/%252F%252Fevil.example", "https://evil.example/", "/%5Cevil.example", "\x00/x", "/%0d%0aSet-Cookie:x=1",
		"javascript:alert(1)", "evil.example"} {
		s := newSession(t, b)
		page := s.get("/login?next=" + url.QueryEscape(next))
		if strings.ContainsRune(next, 0) {
			// A NUL in a query parameter is refused before any page reads it.
			if page.status != http.StatusBadRequest {
				t.Errorf("login page for next %q: status %d, want 400", next, page.status)
			}
			s.get("/login")
		} else if v := between(page.body, `name="next" value="`, `"`); v != "/" {
			t.Errorf("login page for next %q keeps %q, want /", next, v)
		}
		// Escaped by the query and raw (where a client can send it raw): both land on /.
		if !strings.ContainsFunc(next, unicode.IsControl) {
			raw := s.get("/login?next=" + next)
			if v := between(raw.body, `name="next" value="`, `"`); v != "/" {
				t.Errorf("login page for raw next %q keeps %q, want /", next, v)
			}
		}
		r := s.post("/login", url.Values{"token": {adminToken}, "next": {next}})
		if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || loc != "/" {
			t.Errorf("login with next %q: %d to %q, want / ", next, r.status, loc)
		}
	}
	s := newSession(t, b)
	s.get("/login")
	if r := s.post("/login", url.Values{"token": {adminToken}, "next": {"/tasks/3?attempt=2#log"}}); r.header.Get("Location") != "/tasks/3?attempt=2#log" {
		t.Errorf("a same-site next is lost: %q", r.header.Get("Location"))
	}
}

// syncBuffer is a log sink the server writes from its goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(s.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func TestRefusalsAreLoggedAtInfoWithTheAddress(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	b := setup(t, setupOpts{usersFile: writeUsers(t), log: &log})
	b.do(t, "GET", "/api/v1/cluster", "", "Authorization", "Bearer wrong")
	b.do(t, "POST", "/api/v1/task-instances/1/kill", "", "Authorization", "Bearer "+viewerToken)
	seen := map[float64]bool{}
	for _, l := range log.lines() {
		if l["message"] != "http request" {
			continue
		}
		st, _ := l["status"].(float64)
		if st != 401 && st != 403 {
			continue
		}
		seen[st] = true
		if l["level"] != "info" || !strings.HasPrefix(fmt.Sprint(l["remote"]), "127.0.0.1:") {
			t.Errorf("refusal logged as %v", l)
		}
		if st == 403 && l["user"] != "vera" {
			t.Errorf("403 logged without its user: %v", l)
		}
	}
	if !seen[401] || !seen[403] {
		t.Fatalf("refusals logged: %v", seen)
	}
}

// TestNoServerWithoutCredential: a server is given a token or a users file, or is told
// explicitly to serve everyone; nothing else grants a role (issue 29: loopback is no
// boundary between local users).
func TestNoServerWithoutCredential(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cfg     api.Config
		wantErr string
	}{
		{"nothing", api.Config{}, "no credential"},
		{"token", api.Config{Token: "the-admin-token-0123456789"}, ""},
		{"users file", api.Config{UsersFile: filepath.Join(t.TempDir(), "users")}, ""},
		{"open", api.Config{AllowUnauthenticated: true}, ""},
		{"open with a token", api.Config{Token: "the-admin-token-0123456789", AllowUnauthenticated: true}, "choose one"},
	} {
		tc.cfg.Log = zerolog.Nop()
		_, err := api.New(tc.cfg, nil)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: New() = %v, want nil", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: New() = %v, want an error containing %q", tc.name, err, tc.wantErr)
		}
	}
}
