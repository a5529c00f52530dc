package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
)

// The attack suite of the API (issue 16, items 1, 2 and 7): each test tries one way into a
// real master process and asserts that it is refused.

const attackToken = "attack-admin-token-0123456789"

// Tokens of the users of attackUsers.
const (
	attackViewer   = "attack-viewer-token-0123456789"
	attackOperator = "attack-operator-token-0123456789"
	attackAdmin    = "attack-admin2-token-0123456789"
)

// attackUsers writes a users file of a viewer, an operator and an admin.
func attackUsers(t *testing.T, e *e2e) string {
	t.Helper()
	line := func(name, role, token string) string {
		return conf.User{Name: name, Role: role, TokenHash: sha256.Sum256([]byte(token))}.String() + "\n"
	}
	return e.file(t, "users", line("vic", "viewer", attackViewer)+line("olga", "operator", attackOperator)+line("adam", "admin", attackAdmin))
}

// client is an HTTP client that connects from the loopback address src (so that rate
// limits, which count per client address, can be tried apart from the other tests' calls),
// trusts pool for TLS, keeps cookies and does not follow redirects.
func client(t *testing.T, src string, pool *x509.CertPool) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	jar, _ := cookiejar.New(nil)
	return &http.Client{Timeout: 20 * time.Second, Jar: jar,
		Transport:     &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type reply struct {
	status int
	header http.Header
	body   string
}

// call sends a request; headers are name, value pairs ("Host" sets the Host).
func call(t *testing.T, c *http.Client, method, u, body string, headers ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// serving waits until the master answers /healthz at base.
func serving(t *testing.T, p *testcluster.Proc, base string, pool *x509.CertPool) {
	t.Helper()
	c := client(t, "127.0.0.1", pool)
	waitUntil(t, 60*time.Second, p.Name+" to serve at "+base, func() bool {
		select {
		case <-p.Exited():
			t.Fatalf("%s exited: %s", p.Name, p.Log())
		default:
		}
		resp, err := c.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// login logs c in at base with token through the form and returns the session cookie.
func login(t *testing.T, c *http.Client, base, token string) *http.Cookie {
	t.Helper()
	page := call(t, c, "GET", base+"/login", "")
	csrf := between(page.body, `name="csrf" value="`, `"`)
	r := call(t, c, "POST", base+"/login", url.Values{"csrf": {csrf}, "token": {token}, "next": {"/"}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded")
	if r.status != http.StatusSeeOther {
		t.Fatalf("login at %s: status %d\n%s", base, r.status, r.body)
	}
	for _, ck := range (&http.Response{Header: r.header}).Cookies() {
		if ck.Name == "zksched_session" {
			return ck
		}
	}
	t.Fatalf("login at %s set no session cookie: %v", base, r.header)
	return nil
}

func between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, end)
	return v
}

// TestAttackOpenMasterServesOnlyOnLoopback: a master without a token does not listen on
// another address than loopback (127.0.0.2 stands for another interface), says why, and does
// with a token or when told to serve unauthenticated (warning about it).
func TestAttackOpenMasterServesOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	open := e.Master("open", "ZKSCHED_NODE_HOST=127.0.0.2")
	withToken := e.Master("with-token", "ZKSCHED_NODE_HOST=127.0.0.2", "ZKSCHED_API_TOKEN="+attackToken)
	told := e.Master("told", "ZKSCHED_NODE_HOST=127.0.0.2", "ZKSCHED_API_ALLOW_UNAUTHENTICATED=true")

	serving(t, open, fmt.Sprintf("http://127.0.0.1:%d", open.Port), nil)
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.2:%d", open.Port), 2*time.Second); err == nil {
		c.Close()
		t.Fatalf("a master without a token accepts connections on 127.0.0.2:%d", open.Port)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial 127.0.0.2:%d: %v, want connection refused", open.Port, err)
	}
	open.WaitLog(t, 5*time.Second, "no api.token and no api.users-file: serving the API on loopback only")
	if id := open.ID(t, time.Second); !strings.HasPrefix(id, "127.0.0.2:") {
		t.Errorf("the open master's identity %s lost its node.host", id)
	}

	c := client(t, "127.0.0.1", nil)
	serving(t, withToken, fmt.Sprintf("http://127.0.0.2:%d", withToken.Port), nil)
	if r := call(t, c, "GET", fmt.Sprintf("http://127.0.0.2:%d/api/v1/cluster", withToken.Port), ""); r.status != 401 {
		t.Errorf("the master with a token on 127.0.0.2 answers %d without it, want 401", r.status)
	}
	serving(t, told, fmt.Sprintf("http://127.0.0.2:%d", told.Port), nil)
	told.WaitLog(t, 5*time.Second, "api.allow-unauthenticated: serving the API without authentication beyond loopback")
}

// TestAttackDNSRebindingRefused: a request whose Host is a name the master does not have (as
// a page whose DNS name was rebound to the master's address sends) is refused, even with the
// right token; the master's own names and api.allowed-hosts pass.
func TestAttackDNSRebindingRefused(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_TOKEN="+attackToken, "ZKSCHED_API_ALLOWED_HOSTS=zksched.lb.example")
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	c := client(t, "127.0.0.1", nil)
	for host, want := range map[string]int{
		"evil.example":                         421,
		fmt.Sprintf("evil.example:%d", m.Port): 421,
		"127.0.0.1.nip.example":                421,
		fmt.Sprintf("127.0.0.1:%d", m.Port):    200,
		"localhost":                            200,
		"zksched.lb.example":                   200,
	} {
		r := call(t, c, "GET", base+"/api/v1/cluster", "", append(bearer(attackToken), "Host", host)...)
		if r.status != want {
			t.Errorf("Host %q: status %d, want %d: %s", host, r.status, want, r.body)
		}
		if want == 421 && !strings.Contains(r.body, "api.allowed-hosts") {
			t.Errorf("Host %q: the refusal does not say what to do: %s", host, r.body)
		}
	}
	m.WaitLog(t, 5*time.Second, "request for another host refused")
}

// TestAttackRolesRefuseWhatTheyDoNotAllow: a viewer cannot kill or submit, an operator cannot
// store a definition; the refusals change nothing and are logged at info with the address.
func TestAttackRolesRefuseWhatTheyDoNotAllow(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_USERS_FILE="+attackUsers(t, e))
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	if out, code := e.Run("submit", e.file(t, "wf.yaml", "name: wf\ntasks:\n  - {name: a, type: shell, command: 'true'}\n")); code != 0 {
		t.Fatalf("submit: %d %s", code, out)
	}
	task := e.tasks(t, 1)["a"]
	c := client(t, "127.0.0.1", nil)
	def := "name: planted\ntasks:\n  - {name: x, type: shell, command: 'id'}\n"
	for _, tc := range []struct {
		who, token, method, path, body, ctype string
		want                                  int
	}{
		{"viewer", attackViewer, "POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", task.ID), "", "", 403},
		{"viewer", attackViewer, "POST", "/api/v1/workflow-instances", `{"name": "wf"}`, "application/json", 403},
		{"viewer", attackViewer, "POST", "/api/v1/workflow-instances/1/stop", "", "", 403},
		{"operator", attackOperator, "POST", "/api/v1/definitions", def, "application/yaml", 403},
		{"operator", attackOperator, "POST", "/api/v1/workflow-instances", `{"name": "wf"}`, "application/json", 403},
		{"viewer", attackViewer, "GET", "/api/v1/task-instances", "", "", 200},
	} {
		r := call(t, c, tc.method, base+tc.path, tc.body, append(bearer(tc.token), "Content-Type", tc.ctype)...)
		if r.status != tc.want {
			t.Errorf("%s %s %s: status %d, want %d: %s", tc.who, tc.method, tc.path, r.status, tc.want, r.body)
		}
	}
	if got := e.tasks(t, 1)["a"]; got.State != dao.TaskQueued || got.KillRequested {
		t.Errorf("after the refused kill the task is %s (kill requested %v)", got.State, got.KillRequested)
	}
	if v, err := e.db.DefinitionLatest(context.Background(), "planted"); err != nil || v != 0 {
		t.Errorf("the operator's refused definition: latest version %d, %v; want none stored", v, err)
	}
	// What they may do, they can.
	if r := call(t, c, "POST", base+fmt.Sprintf("/api/v1/task-instances/%d/kill", task.ID), "", bearer(attackOperator)...); r.status != 200 {
		t.Errorf("operator's kill: %d %s", r.status, r.body)
	}
	if r := call(t, c, "POST", base+"/api/v1/definitions", def, append(bearer(attackAdmin), "Content-Type", "application/yaml")...); r.status != 200 {
		t.Errorf("admin's definition: %d %s", r.status, r.body)
	}
	line := m.WaitLog(t, 5*time.Second, `"status":403`)
	if !strings.Contains(line, `"level":"info"`) || !strings.Contains(line, `"remote":"127.0.0.1:`) || !strings.Contains(line, `"user":"vic"`) {
		t.Errorf("403 logged as %s", line)
	}
}

// TestAttackLogoutRevokesTheSession: a session cookie copied before a logout opens nothing
// after it, on the master that logged out and on another one.
func TestAttackLogoutRevokesTheSession(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	users := attackUsers(t, e)
	a := e.Master("master-a", "ZKSCHED_API_USERS_FILE="+users)
	b := e.Master("master-b", "ZKSCHED_API_USERS_FILE="+users)
	baseA, baseB := fmt.Sprintf("http://127.0.0.1:%d", a.Port), fmt.Sprintf("http://127.0.0.1:%d", b.Port)
	serving(t, a, baseA, nil)
	serving(t, b, baseB, nil)
	user := client(t, "127.0.0.1", nil)
	stolen := login(t, user, baseA, attackOperator)
	thief := client(t, "127.0.0.1", nil)
	withCookie := func(base, path string) int {
		return call(t, thief, "GET", base+path, "", "Cookie", "zksched_session="+stolen.Value).status
	}
	if s := withCookie(baseB, "/api/v1/task-instances"); s != 200 {
		t.Fatalf("the session on the other master before the logout: %d", s)
	}
	page := call(t, user, "GET", baseA+"/", "")
	if !strings.Contains(page.body, `<span id="who-name">olga</span>`) {
		t.Errorf("the page does not say who is logged in")
	}
	csrf := between(page.body, `name="csrf" value="`, `"`)
	if r := call(t, user, "POST", baseA+"/logout", url.Values{"csrf": {csrf}}.Encode(), "Content-Type", "application/x-www-form-urlencoded"); r.status != http.StatusSeeOther {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	for _, base := range []string{baseA, baseB} {
		if s := withCookie(base, "/api/v1/task-instances"); s != 401 {
			t.Errorf("%s: the API with the cookie after the logout: %d, want 401", base, s)
		}
		if s := withCookie(base, "/"); s != http.StatusSeeOther {
			t.Errorf("%s: a page with the cookie after the logout: %d, want a redirect to the login", base, s)
		}
	}
}

// TestAttackRemovedUserLosesAccessAtOnce: users added and removed with `zksched user` while
// the master runs take effect without a restart; a removed user's token and session die.
func TestAttackRemovedUserLosesAccessAtOnce(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	users := filepath.Join(e.dir, "users")
	m := e.Master("master", "ZKSCHED_API_USERS_FILE="+users)
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	m.WaitLog(t, 5*time.Second, "the users file does not exist yet")
	out, code := e.Run("user", "add", "mallory", "--role", "operator", "--users-file", users)
	if code != 0 {
		t.Fatalf("user add: %d %s", code, out)
	}
	token := strings.TrimSpace(out[strings.LastIndex(out, ": ")+2:])
	c := client(t, "127.0.0.1", nil)
	// The file is read again at a request once a second has passed. A wrong token counts
	// against the address: ask every 300 ms, a few times a second.
	testenv.WaitFor(t, 10*time.Second, 300*time.Millisecond, "the new user to be let in", func() bool {
		return call(t, c, "GET", base+"/api/v1/cluster", "", bearer(token)...).status == 200
	})
	session := login(t, c, base, token)
	if out, code := e.Run("user", "remove", "mallory", "--users-file", users); code != 0 {
		t.Fatalf("user remove: %d %s", code, out)
	}
	thief := client(t, "127.0.0.1", nil)
	waitUntil(t, 10*time.Second, "the removed user's session to end", func() bool {
		return call(t, thief, "GET", base+"/api/v1/cluster", "", "Cookie", "zksched_session="+session.Value).status == 401
	})
	// `user remove` ends the sessions in its own transaction; the token goes with the master's
	// next read of the file, a second after the last at most, as it came.
	testenv.WaitFor(t, 10*time.Second, 300*time.Millisecond, "the removed user's token to be refused", func() bool {
		return call(t, c, "GET", base+"/api/v1/cluster", "", bearer(token)...).status == 401
	})
}

// TestAttackTokenGuessingIsRateLimited: an address that sends wrong tokens gets 429 for them
// after a handful, while the right token from that address (a user behind the guesser's NAT)
// and other addresses are still served; the failures are counted in the metrics.
func TestAttackTokenGuessingIsRateLimited(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_TOKEN="+attackToken)
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	guesser := client(t, "127.0.0.7", nil)
	n := 0
	var last reply
	for n = 1; n <= 30; n++ {
		last = call(t, guesser, "GET", base+"/api/v1/cluster", "", bearer(fmt.Sprintf("guess-%d-0123456789", n))...)
		if last.status != 401 {
			break
		}
	}
	if last.status != http.StatusTooManyRequests || n > 12 {
		t.Fatalf("guess %d: status %d, want 429 after a handful of 401s", n, last.status)
	}
	if ra, err := strconv.Atoi(last.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q", last.header.Get("Retry-After"))
	}
	if r := call(t, guesser, "GET", base+"/api/v1/cluster", "", bearer("guess-again-0123456789")...); r.status != http.StatusTooManyRequests {
		t.Errorf("a wrong token from the guessing address: %d, want 429", r.status)
	}
	if r := call(t, guesser, "GET", base+"/api/v1/cluster", "", bearer(attackToken)...); r.status != 200 {
		t.Errorf("the right token from the guessing address: %d, want 200", r.status)
	}
	page := call(t, guesser, "GET", base+"/login", "")
	csrf := between(page.body, `name="csrf" value="`, `"`)
	form := func(token string) string { return url.Values{"csrf": {csrf}, "token": {token}}.Encode() }
	if r := call(t, guesser, "POST", base+"/login", form("guess-login-0123456789"), "Content-Type", "application/x-www-form-urlencoded"); r.status != http.StatusTooManyRequests {
		t.Errorf("a wrong login from the guessing address: %d, want 429", r.status)
	}
	if r := call(t, guesser, "POST", base+"/login", form(attackToken), "Content-Type", "application/x-www-form-urlencoded"); r.status != http.StatusSeeOther {
		t.Errorf("the right login from the guessing address: %d, want 303", r.status)
	}
	if r := call(t, client(t, "127.0.0.1", nil), "GET", base+"/api/v1/cluster", "", bearer(attackToken)...); r.status != 200 {
		t.Errorf("the right token from another address: %d, want 200", r.status)
	}
	metrics := call(t, client(t, "127.0.0.1", nil), "GET", base+"/metrics", "").body
	if !strings.Contains(metrics, fmt.Sprintf("zksched_api_auth_failures_total %d", n-1)) ||
		!strings.Contains(metrics, "zksched_api_auth_rate_limited_total 3") {
		t.Errorf("metrics lack the failures (%d) and refusals (3):\n%s", n-1, grepLines(metrics, "zksched_api_auth"))
	}
}

// TestAttackTLSAndSecureCookies: with api.tls-cert and api.tls-key the master serves HTTPS
// only, sends HSTS, and its cookies are Secure and __Host- prefixed (so no sibling subdomain
// can plant them); a pair that does not load stops it at start.
func TestAttackTLSAndSecureCookies(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	pki := testenv.NewPKI(t)
	cert, key, pool := pki.ServerCertFile, pki.ServerKeyFile, pki.Roots
	m := e.Master("master", "ZKSCHED_API_TOKEN="+attackToken, "ZKSCHED_API_TLS_CERT="+cert, "ZKSCHED_API_TLS_KEY="+key)
	base := fmt.Sprintf("https://127.0.0.1:%d", m.Port)
	serving(t, m, base, pool)
	c := client(t, "127.0.0.1", pool)
	if r := call(t, c, "GET", base+"/api/v1/cluster", "", bearer(attackToken)...); r.status != 200 {
		t.Fatalf("over TLS: %d", r.status)
	}
	if r := call(t, client(t, "127.0.0.1", nil), "GET", fmt.Sprintf("http://127.0.0.1:%d/api/v1/cluster", m.Port), "", bearer(attackToken)...); r.status != 400 {
		t.Errorf("plain HTTP to the TLS port: %d, want 400", r.status)
	}
	page := call(t, c, "GET", base+"/login", "")
	csrf := between(page.body, `name="csrf" value="`, `"`)
	r := call(t, c, "POST", base+"/login", url.Values{"csrf": {csrf}, "token": {attackToken}}.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	cookies := append(page.header.Values("Set-Cookie"), r.header.Values("Set-Cookie")...)
	if len(cookies) < 2 {
		t.Fatalf("cookies set: %v", cookies)
	}
	for _, ck := range cookies {
		if !strings.Contains(ck, "; Secure") || !strings.HasPrefix(ck, "__Host-zksched_") || !strings.Contains(ck, "; Path=/") {
			t.Errorf("cookie over TLS not Secure, __Host- prefixed with Path=/: %s", ck)
		}
	}
	for _, h := range []http.Header{page.header, r.header} {
		if hsts := h.Get("Strict-Transport-Security"); !strings.HasPrefix(hsts, "max-age=") {
			t.Errorf("over TLS: Strict-Transport-Security %q, want max-age=…", hsts)
		}
	}
	if home := call(t, c, "GET", base+"/", ""); home.status != 200 {
		t.Errorf("a page with the __Host- session over TLS: %d, want 200", home.status)
	}
	if id := m.ID(t, time.Second); !strings.Contains(m.WaitLog(t, time.Second, `"message":"starting"`), `"url":"https://`) {
		t.Errorf("%s does not advertise https", id)
	}

	bad := e.Master("swapped", "ZKSCHED_API_TOKEN="+attackToken, "ZKSCHED_API_TLS_CERT="+key, "ZKSCHED_API_TLS_KEY="+cert)
	if code := bad.Wait(t, 30*time.Second); code != exitUsage || !strings.Contains(bad.Log(), "api.tls-cert: load the pair") {
		t.Errorf("master with a swapped pair: exit %d, want %d with a clear message\n%s", code, exitUsage, bad.Log())
	}
}

// TestAttackOpenRedirectRefused: the login's next parameter cannot send the browser off the
// site, however it is encoded.
func TestAttackOpenRedirectRefused(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_TOKEN="+attackToken)
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	for _, next := range []string{"/%09/evil.example/", "/\t/evil.example", "//evil.example", "/\\evil.example",
		"/%2F%2Fevil.example", "/%5C%5Cevil.example", "https://evil.example", "/%0d%0a/evil.example"} {
		c := client(t, "127.0.0.1", nil)
		page := call(t, c, "GET", base+"/login?next="+url.QueryEscape(next), "")
		if v := between(page.body, `name="next" value="`, `"`); v != "/" {
			t.Errorf("next %q: the login form keeps %q, want /", next, v)
		}
		csrf := between(page.body, `name="csrf" value="`, `"`)
		r := call(t, c, "POST", base+"/login", url.Values{"csrf": {csrf}, "token": {attackToken}, "next": {next}}.Encode(),
			"Content-Type", "application/x-www-form-urlencoded")
		if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || loc != "/" {
			t.Errorf("login with next %q: %d to %q, want /", next, r.status, loc)
		}
	}
}

// TestAttackStaticListsNothing: /static/ and its folders list no files; the files are served.
func TestAttackStaticListsNothing(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_TOKEN="+attackToken)
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	c := client(t, "127.0.0.1", nil)
	for path, want := range map[string]int{"/static/": 404, "/static/x/": 404, "/static/style.css": 200} {
		r := call(t, c, "GET", base+path, "")
		if r.status != want || (want == 404 && strings.Contains(r.body, `href="style.css"`)) {
			t.Errorf("GET %s: %d, want %d\n%s", path, r.status, want, r.body)
		}
	}
}

// TestAttackHugeHeaderRefused: a request header over the cap is refused before any handler.
func TestAttackHugeHeaderRefused(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_TOKEN="+attackToken)
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	r := call(t, client(t, "127.0.0.1", nil), "GET", base+"/healthz", "", "X-Padding", strings.Repeat("a", 200<<10))
	if r.status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 200 KiB header: %d, want 431", r.status)
	}
}
