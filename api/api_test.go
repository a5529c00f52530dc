package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/api"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/metrics"
	"github.com/zksched/zksched/registry"
)

// fakeCluster stands in for ZooKeeper in the cluster view.
type fakeCluster struct {
	cl  registry.Cluster
	err error
}

func (f fakeCluster) Cluster(context.Context) (registry.Cluster, error) { return f.cl, f.err }

type testBundle struct {
	db     *dao.DB
	srv    *httptest.Server
	server *api.Server
	ctx    context.Context
	// token is the API token, "" without authentication.
	token string
}

type setupOpts struct {
	token string
	// open serves without a credential, as an anonymous admin (api.allow-unauthenticated).
	open    bool
	cluster api.ClusterReader
	maxBody int64
	// usersFile, hosts and cookieSecure are api.Config's.
	usersFile    string
	hosts        []string
	cookieSecure bool
	// db, when set, is shared with another bundle (two masters of one cluster).
	db *dao.DB
	// tls serves HTTPS.
	tls bool
	// log receives the server's log.
	log io.Writer
	// instanceRetention is api.Config.InstanceRetention.
	instanceRetention time.Duration
	// heavyReads, heavyReadWait, rateLimit and rateBurst are api.Config's.
	heavyReads    int
	heavyReadWait time.Duration
	rateLimit     float64
	rateBurst     int
	// hookSecrets are the master's environment as the hooks read it; hookBodyLimit and
	// hookDedupeWindow are api.Config's.
	hookSecrets      map[string]string
	hookBodyLimit    int64
	hookDedupeWindow time.Duration
	hookDelivered    func(outcome string)
	// metrics, when set, are served at /metrics and count what the server counts.
	metrics *metrics.Metrics
}

func setup(t *testing.T, o setupOpts) *testBundle {
	t.Helper()
	db := o.db
	if db == nil {
		db, _ = daotest.New(t)
	}
	if o.cluster == nil {
		o.cluster = fakeCluster{}
	}
	log := zerolog.Nop()
	if o.log != nil {
		log = zerolog.New(o.log)
	}
	var served http.Handler
	var emitted func()
	if o.metrics != nil {
		served, emitted = o.metrics.Handler(), o.metrics.AssetEmitted
	}
	s, err := api.New(api.Config{NodeID: "127.0.0.1:5678_1", Version: "test", Token: o.token, AllowUnauthenticated: o.open,
		Cluster: o.cluster, MaxBody: o.maxBody, UsersFile: o.usersFile, Hosts: o.hosts, CookieSecure: o.cookieSecure,
		InstanceRetention: o.instanceRetention, HeavyReads: o.heavyReads, HeavyReadWait: o.heavyReadWait,
		RateLimit: o.rateLimit, RateBurst: o.rateBurst, HookBodyLimit: o.hookBodyLimit, HookDedupeWindow: o.hookDedupeWindow,
		HookDelivered: o.hookDelivered, Metrics: served, AssetEmitted: emitted,
		LookupEnv: func(name string) (string, bool) { v, ok := o.hookSecrets[name]; return v, ok }, Log: log}, db)
	if err != nil {
		t.Fatal(err)
	}
	var srv *httptest.Server
	if o.tls {
		srv = httptest.NewTLSServer(s)
	} else {
		srv = httptest.NewServer(s)
	}
	t.Cleanup(srv.Close)
	return &testBundle{db: db, srv: srv, server: s, ctx: context.Background(), token: o.token}
}

type response struct {
	status int
	header http.Header
	body   string
}

// json decodes the body into v.
func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.body), v); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.body)
	}
}

// errorMessage is the message of a JSON error body.
func (r response) errorMessage(t *testing.T) string {
	t.Helper()
	var e struct {
		Error struct {
			Status  int    `json:"status"`
			Message string `json:"message"`
		} `json:"error"`
	}
	r.json(t, &e)
	if e.Error.Status != r.status {
		t.Errorf("error body status %d, response status %d", e.Error.Status, r.status)
	}
	return e.Error.Message
}

// do sends a request with the bundle's token (if any) unless headers set Authorization.
func (b *testBundle) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	client := *b.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

// fixture is a workflow instance with tasks in every state the tests need.
type fixture struct {
	wf, other int64
	// byName are the task instance ids of wf by name.
	byName map[string]int64
}

// seed creates workflow "wf" (owned by m1) with tasks t0..t(n-1) in group g, and a second
// workflow "other" with one queued task. Tasks t0..t4 are claimed by w1: t0, t1 succeed
// (with a log), t2 fails, t3 and t4 stay running. The rest stay queued.
func (b *testBundle) seed(t *testing.T, n int) fixture {
	t.Helper()
	spec := map[string]any{"name": "wf", "tasks": []map[string]any{}}
	tasks := spec["tasks"].([]map[string]any)
	for i := range n {
		tasks = append(tasks, map[string]any{"name": fmt.Sprintf("t%d", i), "type": "noop"})
	}
	spec["tasks"] = tasks
	f := fixture{byName: map[string]int64{}}
	f.wf = daotest.Submit(t, b.db, "wf", spec)
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	rows := make([]dao.NewTask, n)
	for i := range rows {
		rows[i] = dao.NewTask{WorkflowInstanceID: f.wf, Name: fmt.Sprintf("t%d", i), Type: "noop", State: dao.TaskQueued, Group: "g"}
	}
	if _, err := b.db.TaskCreateMany(b.ctx, rows); err != nil {
		t.Fatal(err)
	}
	all, err := b.db.TaskListByWorkflow(b.ctx, f.wf)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range all {
		f.byName[ti.Name] = ti.ID
	}
	claimed, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 5)
	if err != nil || len(claimed) != 5 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	byID := map[int64]dao.TaskInstance{}
	for _, c := range claimed {
		byID[c.ID] = c
	}
	for _, name := range []string{"t0", "t1", "t2"} {
		c := byID[f.byName[name]]
		tok := c.Token()
		if err := b.db.TaskLogAppendIfRunning(b.ctx, tok, 0, "hello from "+name+"\n"); err != nil {
			t.Fatal(err)
		}
		res := dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}
		if name == "t2" {
			res = dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskFailed, Error: "exit status 3"}
		}
		if err := b.db.TaskFinishIfRunning(b.ctx, tok, res); err != nil {
			t.Fatal(err)
		}
	}
	f.other = daotest.Submit(t, b.db, "other", map[string]any{"name": "other", "tasks": []map[string]any{{"name": "x", "type": "noop"}}})
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{{WorkflowInstanceID: f.other, Name: "x", Type: "noop",
		State: dao.TaskQueued, Group: "h"}}); err != nil {
		t.Fatal(err)
	}
	return f
}

type taskPage struct {
	Items []struct {
		ID       int64  `json:"id"`
		Name     string `json:"name"`
		State    string `json:"state"`
		WorkerID string `json:"worker_id"`
	} `json:"items"`
	Older int64 `json:"older"`
	Newer int64 `json:"newer"`
}

func TestTaskListFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 12)
	tomorrow := time.Now().UTC().Add(24 * time.Hour).Format("2006-01-02T15:04")
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"", 13},
		{"state=failed", 1},
		{"state=running", 2},
		{"state=queued", 8},
		{"state=succeeded&worker=w1", 2},
		{"worker=w1", 5},
		{"task=t7", 1},
		{"task=nope", 0},
		{fmt.Sprintf("workflow=%d", f.other), 1},
		{fmt.Sprintf("workflow=%d&state=queued", f.wf), 7},
		{"from=" + tomorrow, 0},
		{"to=" + tomorrow, 13},
		{"from=2020-01-01T00:00:00Z&to=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), 13},
	} {
		var page taskPage
		r := b.do(t, "GET", "/api/v1/task-instances?"+tc.query, "")
		if r.status != http.StatusOK {
			t.Fatalf("%s: status %d %s", tc.query, r.status, r.body)
		}
		r.json(t, &page)
		if got := len(page.Items); got != tc.want {
			t.Errorf("?%s: got %d task instances, want %d", tc.query, got, tc.want)
		}
	}
}

func TestTaskListKeysetPaging(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	b.seed(t, 24) // 25 task instances
	var ids []int64
	var pages []taskPage
	path := "/api/v1/task-instances?limit=10"
	for path != "" {
		var page taskPage
		b.do(t, "GET", path, "").json(t, &page)
		pages = append(pages, page)
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		path = ""
		if page.Older != 0 {
			path = fmt.Sprintf("/api/v1/task-instances?limit=10&before=%d", page.Older)
		}
	}
	if len(pages) != 3 || len(ids) != 25 {
		t.Fatalf("got %d pages with %d ids, want 3 pages with 25", len(pages), len(ids))
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] >= ids[i-1] {
			t.Fatalf("ids not newest first: %v", ids)
		}
	}
	if pages[0].Newer != 0 || pages[2].Older != 0 || pages[1].Newer == 0 {
		t.Errorf("cursors: first page newer %d, last page older %d, middle newer %d", pages[0].Newer, pages[2].Older, pages[1].Newer)
	}
	// Back from the last page: the middle one again, then the first.
	var back taskPage
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances?limit=10&after=%d", pages[2].Newer), "").json(t, &back)
	if len(back.Items) != 10 || back.Items[0].ID != pages[1].Items[0].ID || back.Older != pages[1].Older {
		t.Errorf("previous page of the last = %+v, want the middle page %+v", back, pages[1])
	}
	var first taskPage
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances?limit=10&after=%d", back.Newer), "").json(t, &first)
	if len(first.Items) != 10 || first.Items[0].ID != ids[0] || first.Newer != 0 {
		t.Errorf("previous page of the middle = %d items from %d, newer %d; want the first page", len(first.Items), first.Items[0].ID, first.Newer)
	}
}

func TestBadInputIsAJSONErrorWithTheRightStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true, maxBody: 1024})
	f := b.seed(t, 6)
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		msg                      string
	}{
		{"unknown state", "GET", "/api/v1/task-instances?state=bogus", "", nil, 400, `unknown task state "bogus"`},
		{"unknown parameter", "GET", "/api/v1/task-instances?stat=failed", "", nil, 400, `unknown parameter "stat"`},
		{"repeated parameter", "GET", "/api/v1/task-instances?state=failed&state=queued", "", nil, 400, "given 2 times"},
		{"malformed workflow filter", "GET", "/api/v1/task-instances?workflow=abc", "", nil, 400, `workflow: "abc" is not a positive integer id`},
		{"bad limit", "GET", "/api/v1/task-instances?limit=0", "", nil, 400, "limit"},
		{"both cursors", "GET", "/api/v1/task-instances?before=5&after=2", "", nil, 400, "not both"},
		{"bad time", "GET", "/api/v1/task-instances?from=yesterday", "", nil, 400, `from: "yesterday" is not a time`},
		{"time range backwards", "GET", "/api/v1/task-instances?from=2026-01-02&to=2026-01-01", "", nil, 400, "from must be before to"},
		{"malformed id", "GET", "/api/v1/task-instances/12x", "", nil, 400, `"12x" is not a valid task instance id`},
		{"negative id", "GET", "/api/v1/workflow-instances/-1", "", nil, 400, "not a valid workflow instance id"},
		{"missing task", "GET", "/api/v1/task-instances/999999", "", nil, 404, "task instance 999999 not found"},
		{"missing workflow", "POST", "/api/v1/workflow-instances/999999/stop", "", nil, 404, "no such instance"},
		{"unknown workflow state", "GET", "/api/v1/workflow-instances?state=done", "", nil, 400, `unknown workflow state "done"`},
		{"wrong method", "DELETE", "/api/v1/task-instances/1", "", nil, 405, "method DELETE not allowed"},
		{"unknown endpoint", "GET", "/api/v1/nope", "", nil, 404, "no API endpoint /api/v1/nope"},
		{"kill a finished task", "POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t0"]), "", nil, 409, "it is succeeded"},
		{"rerun a queued task", "POST", fmt.Sprintf("/api/v1/task-instances/%d/rerun", f.byName["t2"]+100), "", nil, 404, "not found"},
		{"oversized body", "POST", "/api/v1/definitions", strings.Repeat("x", 4096), nil, 413, "over the limit of 1024 bytes"},
		{"bad workflow file", "POST", "/api/v1/definitions", "name: x\ntasks: []\n", []string{"Content-Type", "application/yaml"}, 400, "nothing stored"},
		{"wrong content type", "POST", "/api/v1/definitions", "{}", []string{"Content-Type", "image/png"}, 415, "application/yaml"},
		{"malformed JSON", "POST", "/api/v1/workflow-instances", `{"name": `, []string{"Content-Type", "application/json"}, 400, "malformed JSON"},
		{"unknown JSON field", "POST", "/api/v1/workflow-instances", `{"nam": "wf"}`, nil, 400, `unknown field "nam"`},
		{"unknown definition", "POST", "/api/v1/workflow-instances", `{"name": "ghost"}`, nil, 404, `no workflow definition "ghost"`},
		{"cross-site post", "POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t5"]), "", []string{"Sec-Fetch-Site", "cross-site"}, 403, "cross-origin"},
		{"cluster without zookeeper", "GET", "/api/v1/cluster", "", nil, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(t, tc.method, tc.path, tc.body, tc.headers...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d; body %s", r.status, tc.status, r.body)
			}
			if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("content type %q, want JSON", r.header.Get("Content-Type"))
			}
			if tc.status >= 400 {
				if msg := r.errorMessage(t); !strings.Contains(msg, tc.msg) {
					t.Errorf("message %q, want it to contain %q", msg, tc.msg)
				}
			}
		})
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-test-token"
	b := setup(t, setupOpts{token: token})
	b.seed(t, 6)
	b.token = "" // send what each case says
	for _, tc := range []struct {
		name, method, path string
		headers            []string
		status             int
	}{
		{"no token", "GET", "/api/v1/task-instances", nil, 401},
		{"wrong token", "GET", "/api/v1/task-instances", []string{"Authorization", "Bearer nope"}, 401},
		{"token of another scheme", "GET", "/api/v1/task-instances", []string{"Authorization", "Basic " + token}, 401},
		{"right token", "GET", "/api/v1/task-instances", []string{"Authorization", "Bearer " + token}, 200},
		{"action without token", "POST", "/api/v1/task-instances/1/kill", nil, 401},
		{"healthz is open", "GET", "/healthz", nil, 200},
		{"readyz is open", "GET", "/readyz", nil, 200},
		{"page redirects to login", "GET", "/?state=failed", nil, 303},
		{"login form is open", "GET", "/login", nil, 200},
		{"static is open", "GET", "/static/style.css", nil, 200},
		{"forged session", "GET", "/", []string{"Cookie", "zksched_session=9999999999.c2lnbmF0dXJl"}, 303},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(t, tc.method, tc.path, "", tc.headers...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d; body %s", r.status, tc.status, r.body)
			}
			if tc.status == 401 && r.errorMessage(t) == "" {
				t.Error("401 without a message")
			}
			if tc.status == 303 && r.header.Get("Location") != "/login?next="+url.QueryEscape(tc.path) {
				t.Errorf("redirect to %q", r.header.Get("Location"))
			}
		})
	}

	// The login form: a wrong token is refused, the right one gives a session that opens the
	// pages; forms need the CSRF token.
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (*http.Response, string) {
		resp, err := client.Get(b.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	post := func(path string, form url.Values) *http.Response {
		resp, err := client.PostForm(b.srv.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	_, page := get("/login?next=/cluster")
	csrf := between(page, `name="csrf" value="`, `"`)
	if csrf == "" {
		t.Fatalf("login page has no CSRF field:\n%s", page)
	}
	if resp := post("/login", url.Values{"csrf": {csrf}, "token": {"wrong"}, "next": {"/cluster"}}); resp.StatusCode != 401 {
		t.Fatalf("login with a wrong token: status %d", resp.StatusCode)
	}
	if resp := post("/login", url.Values{"csrf": {"forged-forged-forged-forged-forged"}, "token": {token}}); resp.StatusCode != 403 {
		t.Fatalf("login without the CSRF token: status %d", resp.StatusCode)
	}
	resp := post("/login", url.Values{"csrf": {csrf}, "token": {token}, "next": {"/cluster"}})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/cluster" {
		t.Fatalf("login: status %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, home := get("/")
	if resp.StatusCode != 200 {
		t.Fatalf("page with a session: status %d", resp.StatusCode)
	}
	preSession := csrf
	if csrf = between(home, `name="csrf" value="`, `"`); csrf == "" || csrf == preSession {
		t.Fatalf("the page with a session has CSRF token %q, the login form had %q: want the session's own", csrf, preSession)
	}
	if resp, body := get("/api/v1/task-instances"); resp.StatusCode != 200 || !strings.Contains(body, `"items"`) {
		t.Fatalf("API with a session cookie: status %d", resp.StatusCode)
	}
	if resp := post("/tasks/1/kill", url.Values{}); resp.StatusCode != 403 {
		t.Fatalf("form without the CSRF token: status %d, want 403", resp.StatusCode)
	}
	if resp := post("/logout", url.Values{"csrf": {preSession}}); resp.StatusCode != 403 {
		t.Fatalf("logout with the login form's CSRF token: status %d, want 403", resp.StatusCode)
	}
	if resp := post("/logout", url.Values{"csrf": {csrf}}); resp.StatusCode != 303 {
		t.Fatalf("logout: status %d", resp.StatusCode)
	}
	if resp, _ := get("/"); resp.StatusCode != 303 {
		t.Fatalf("page after logout: status %d, want a redirect to the login", resp.StatusCode)
	}
}

func TestWithoutATokenEverythingIsOpen(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	for _, p := range []string{"/", "/workflows", "/cluster", "/definitions", "/api/v1/task-instances", "/api/v1/cluster"} {
		if r := b.do(t, "GET", p, ""); r.status != 200 {
			t.Errorf("GET %s: status %d", p, r.status)
		}
	}
	if r := b.do(t, "GET", "/login", ""); r.status != 303 {
		t.Errorf("login page without auth: status %d, want a redirect home", r.status)
	}
}

func between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, end)
	return v
}

func TestTaskDetailShowsAttemptsFailoverAndLog(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	// t3 runs on w1; w1 is lost and the leader fails it over.
	if err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		if _, err := q.TaskRequeueIfRunningOnWorker(b.ctx, "w1"); err != nil {
			return err
		}
		_, err := q.FailoverEventRecord(b.ctx, dao.FailoverEvent{NodeID: "w1", Role: "worker", LostAt: time.Now().Add(-time.Minute),
			FencedAt: time.Now().Add(-50 * time.Second), Leader: "m-leader", TasksRequeued: 2})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Name     string `json:"name"`
		State    string `json:"state"`
		Attempts []struct {
			Attempt  int     `json:"attempt"`
			Outcome  *string `json:"outcome"`
			Failover *struct {
				From     string `json:"from"`
				FencedBy string `json:"fenced_by"`
			} `json:"failover"`
		} `json:"attempts"`
		Log *struct {
			Text string `json:"text"`
		} `json:"log"`
		FailoverCount int `json:"failover_count"`
	}
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d", f.byName["t3"]), "").json(t, &d)
	if d.State != "queued" || d.FailoverCount != 1 || len(d.Attempts) != 1 || d.Attempts[0].Failover == nil ||
		d.Attempts[0].Failover.FencedBy != "m-leader" || d.Attempts[0].Failover.From != "w1" {
		t.Fatalf("failed-over task detail = %+v", d)
	}
	page := b.do(t, "GET", fmt.Sprintf("/tasks/%d", f.byName["t3"]), "")
	if !strings.Contains(page.body, "failed over from <code>w1</code> at ") || !strings.Contains(page.body, "fenced by <code>m-leader</code>") {
		t.Errorf("task page lacks the failover line:\n%s", between(page.body, `<ol class="timeline"`, "</ol>"))
	}
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d", f.byName["t0"]), "").json(t, &d)
	if d.Log == nil || d.Log.Text != "hello from t0\n" {
		t.Errorf("t0 log = %+v", d.Log)
	}
}

func TestLogTailAndEarlierChunks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	b.seed(t, 6)
	wf := daotest.Submit(t, b.db, "chatty", map[string]any{"name": "chatty"})
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{{WorkflowInstanceID: wf, Name: "c", Type: "noop", State: dao.TaskQueued, Group: "chat"}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := b.db.TaskClaimQueued(b.ctx, "w9", []string{"chat"}, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatal(claimed, err)
	}
	for i := range 10 {
		if err := b.db.TaskLogAppendIfRunning(b.ctx, claimed[0].Token(), i, fmt.Sprintf("chunk %d %s\n", i, strings.Repeat("=", 100))); err != nil {
			t.Fatal(err)
		}
	}
	id := claimed[0].ID
	var tail dao.LogTail
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d/log?tail_bytes=250", id), "").json(t, &tail)
	if !tail.Earlier || tail.FirstSeq != 7 || tail.NextSeq != 10 || !strings.HasPrefix(tail.Text, "chunk 7 ") {
		t.Fatalf("tail of 250 bytes = first %d next %d earlier %v %q", tail.FirstSeq, tail.NextSeq, tail.Earlier, tail.Text[:20])
	}
	var follow struct {
		dao.LogTail
		Running bool `json:"running"`
	}
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d/log?from_seq=9", id), "").json(t, &follow)
	if tail = follow.LogTail; tail.FirstSeq != 9 || !strings.HasPrefix(tail.Text, "chunk 9 ") || strings.Count(tail.Text, "\n") != 1 || !follow.Running {
		t.Fatalf("from seq 9 = %+v; want chunk 9, the attempt running", follow)
	}
	if err := b.db.TaskFinishIfRunning(b.ctx, claimed[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}); err != nil {
		t.Fatal(err)
	}
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d/log?from_seq=10", id), "").json(t, &follow)
	if follow.Running || follow.Text != "" || follow.NextSeq != 10 {
		t.Fatalf("from seq 10 once the attempt ended = %+v; want nothing more, not running", follow)
	}
	page := b.do(t, "GET", fmt.Sprintf("/tasks/%d?log_bytes=250", id), "")
	if !strings.Contains(page.body, `id="log-more"`) || strings.Contains(page.body, "chunk 6 ") || !strings.Contains(page.body, "chunk 9 ") {
		t.Errorf("task page with a short tail lacks the load-more link or shows too much")
	}
	if r := b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d/log?attempt=2", id), ""); r.status != 400 {
		t.Errorf("log of a future attempt: status %d", r.status)
	}
}

func TestUserTextIsEscaped(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	var id int64
	if err := b.db.SQL().Get(&id, `INSERT INTO task_instance (workflow_instance_id, name, type, state, output, error)
		VALUES ($1, '<script>alert("name")</script>', 'noop', 'failed', '<img src=x onerror=alert(1)>', '"><b>bold</b>')
		RETURNING id`, f.wf); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.SQL().Exec(`INSERT INTO task_attempt (task_instance_id, attempt, worker_id, started_at) VALUES ($1, 1, 'w<i>', now())`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.SQL().Exec(`UPDATE task_instance SET attempt = 1 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.SQL().Exec(`INSERT INTO task_log (task_instance_id, attempt, seq, data) VALUES ($1, 1, 0, $2)`, id,
		"<h1>not a heading</h1>\n\x1b[31mred\x1b[0m\n"); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/tasks", fmt.Sprintf("/tasks/%d", id), fmt.Sprintf("/workflows/%d", f.wf)} {
		body := b.do(t, "GET", path, "").body
		for _, bad := range []string{"<script>alert", "<img src=x", "<b>bold", "<h1>not", "<i>", "\x1b"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s contains %q unescaped", path, bad)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;name&#34;)&lt;/script&gt;") {
			t.Errorf("%s does not show the task name as text", path)
		}
	}
	body := b.do(t, "GET", fmt.Sprintf("/tasks/%d", id), "").body
	for _, want := range []string{"&lt;h1&gt;not a heading&lt;/h1&gt;", "␛[31mred␛[0m", "&lt;img src=x onerror=alert(1)&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("task page lacks %q", want)
		}
	}
}

// TestEndReasonInTheJSON: task and workflow instances carry end_reason, in their details and
// in the lists: why something other than their own result ended them, null otherwise.
func TestEndReasonInTheJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	if r := b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t5"]), ""); r.status != 200 {
		t.Fatalf("kill: %d %s", r.status, r.body)
	}
	if r := b.do(t, "POST", fmt.Sprintf("/api/v1/workflow-instances/%d/stop", f.other), ""); r.status != 200 {
		t.Fatalf("stop: %d %s", r.status, r.body)
	}
	// reason returns the end_reason of the JSON object at path, "null" for null, and fails
	// the test if the key is missing.
	reason := func(path string) string {
		t.Helper()
		var out map[string]any
		r := b.do(t, "GET", path, "")
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		r.json(t, &out)
		v, ok := out["end_reason"]
		if !ok {
			t.Fatalf("GET %s: no end_reason in %s", path, r.body)
		}
		if v == nil {
			return "null"
		}
		return fmt.Sprint(v)
	}
	for path, want := range map[string]string{
		fmt.Sprintf("/api/v1/task-instances/%d", f.byName["t5"]): "operator-kill",
		fmt.Sprintf("/api/v1/task-instances/%d", f.byName["t2"]): "null",
		fmt.Sprintf("/api/v1/workflow-instances/%d", f.other):    "stop",
		fmt.Sprintf("/api/v1/workflow-instances/%d", f.wf):       "null",
	} {
		if got := reason(path); got != want {
			t.Errorf("GET %s: end_reason %s, want %s", path, got, want)
		}
	}
	var tasks struct {
		Items []struct {
			Name      string  `json:"name"`
			EndReason *string `json:"end_reason"`
		} `json:"items"`
	}
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances?workflow=%d&state=killed", f.other), "").json(t, &tasks)
	if len(tasks.Items) != 1 || tasks.Items[0].EndReason == nil || *tasks.Items[0].EndReason != "stop" {
		t.Errorf("killed tasks of the stopped instance = %+v; want x, stop", tasks.Items)
	}
	var workflows struct {
		Items []struct {
			ID        int64   `json:"id"`
			EndReason *string `json:"end_reason"`
		} `json:"items"`
	}
	b.do(t, "GET", "/api/v1/workflow-instances?state=stopped", "").json(t, &workflows)
	if len(workflows.Items) != 1 || workflows.Items[0].ID != f.other || workflows.Items[0].EndReason == nil || *workflows.Items[0].EndReason != "stop" {
		t.Errorf("stopped instances = %+v; want %d, stop", workflows.Items, f.other)
	}
	// The UI's pages say it in words.
	for path, want := range map[string]string{
		fmt.Sprintf("/tasks/%d", f.byName["t5"]): `<dd id="end-reason">killed by an operator <span class="dim">(operator-kill)</span></dd>`,
		fmt.Sprintf("/workflows/%d", f.other):    `<dd id="end-reason">the workflow was stopped by an operator <span class="dim">(stop)</span></dd>`,
	} {
		if r := b.do(t, "GET", path, ""); r.status != 200 || !strings.Contains(r.body, want) {
			t.Errorf("GET %s: %d, want %s in the page:\n%s", path, r.status, want, r.body)
		}
	}
}

func TestActionsThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	var out map[string]any
	r := b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t5"]), "")
	if r.status != 200 {
		t.Fatalf("kill of a queued task: %d %s", r.status, r.body)
	}
	if r.json(t, &out); out["state"] != "killed" {
		t.Errorf("kill of a queued task = %v", out)
	}
	r = b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", f.byName["t3"]), "")
	if r.status != 202 {
		t.Fatalf("kill of a running task: %d %s", r.status, r.body)
	}
	if r.json(t, &out); out["state"] != "running" || out["worker"] != "w1" {
		t.Errorf("kill of a running task = %v", out)
	}
	reqs, err := b.db.TaskListKillRequested(b.ctx, "w1")
	if err != nil || len(reqs) != 1 || reqs[0].TaskID != f.byName["t3"] {
		t.Errorf("kill requests of w1 = %v, %v", reqs, err)
	}
	var rerun struct {
		Requeued []int64 `json:"requeued"`
		Reopened bool    `json:"reopened"`
	}
	r = b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/rerun", f.byName["t2"]), "")
	if r.status != 200 {
		t.Fatalf("rerun: %d %s", r.status, r.body)
	}
	if r.json(t, &rerun); len(rerun.Requeued) != 1 || rerun.Requeued[0] != f.byName["t2"] || rerun.Reopened {
		t.Errorf("rerun of a failed task of a running workflow = %+v", rerun)
	}
	if r := b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/rerun", f.byName["t2"]), ""); r.status != 409 {
		t.Errorf("second rerun: status %d, want 409", r.status)
	}
	r = b.do(t, "POST", fmt.Sprintf("/api/v1/workflow-instances/%d/stop", f.wf), "")
	if r.status != 200 {
		t.Fatalf("stop: %d %s", r.status, r.body)
	}
	r = b.do(t, "POST", fmt.Sprintf("/api/v1/workflow-instances/%d/rerun", f.wf), "")
	if r.status != 200 {
		t.Fatalf("rerun of the stopped workflow: %d %s", r.status, r.body)
	}
	if r.json(t, &rerun); !rerun.Reopened || len(rerun.Requeued) == 0 {
		t.Errorf("rerun of the stopped workflow = %+v", rerun)
	}
	w, _ := b.db.WorkflowGet(b.ctx, f.wf)
	if w.State != dao.WorkflowRunning || w.Owner != nil {
		t.Errorf("workflow after the rerun: %s owner %v; want running without an owner", w.State, w.Owner)
	}
}

func TestDefinitionsAndSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	yaml := "name: nightly\nparams: {region: {}}\ntasks:\n  - {name: a, type: noop}\n  - {name: b, type: noop, depends-on: [a]}\n"
	var got struct {
		Name    string `json:"name"`
		Version int    `json:"version"`
	}
	for i, tc := range []struct {
		body    string
		version int
	}{{yaml, 1}, {yaml, 1}, {yaml + "  - {name: c, type: noop, depends-on: [b]}\n", 2}} {
		r := b.do(t, "POST", "/api/v1/definitions", tc.body, "Content-Type", "application/yaml")
		if r.status != 200 {
			t.Fatalf("submit %d: %d %s", i, r.status, r.body)
		}
		if r.json(t, &got); got.Name != "nightly" || got.Version != tc.version {
			t.Errorf("submit %d = %+v, want version %d", i, got, tc.version)
		}
	}
	var versions struct {
		Versions []struct {
			Version int `json:"version"`
		} `json:"items"`
	}
	b.do(t, "GET", "/api/v1/definitions/nightly", "").json(t, &versions)
	if len(versions.Versions) != 2 || versions.Versions[0].Version != 2 {
		t.Errorf("versions = %+v", versions)
	}
	if r := b.do(t, "GET", "/api/v1/definitions/nightly/versions/1", ""); r.status != 200 || !strings.Contains(r.body, `"depends-on"`) && !strings.Contains(r.body, `"depends_on"`) && !strings.Contains(r.body, `"b"`) {
		t.Errorf("version 1: %d %s", r.status, r.body)
	}
	r := b.do(t, "POST", "/api/v1/workflow-instances", `{"name": "nightly", "version": 1, "params": {"region": "eu"}}`)
	if r.status != 201 {
		t.Fatalf("create instance: %d %s", r.status, r.body)
	}
	var created struct {
		ID int64 `json:"id"`
	}
	r.json(t, &created)
	var wf struct {
		WorkflowVersion int `json:"workflow_version"`
		Graph           struct {
			Nodes []struct {
				Name  string `json:"name"`
				State string `json:"state"`
				Layer int    `json:"layer"`
			} `json:"nodes"`
			Edges []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"edges"`
		} `json:"graph"`
	}
	// No master runs here: the root task was queued by the submission itself.
	b.do(t, "GET", fmt.Sprintf("/api/v1/workflow-instances/%d", created.ID), "").json(t, &wf)
	if wf.WorkflowVersion != 1 || len(wf.Graph.Nodes) != 2 || len(wf.Graph.Edges) != 1 || wf.Graph.Nodes[1].Layer != 1 ||
		wf.Graph.Nodes[0].State != "queued" || wf.Graph.Nodes[1].State != "pending" || wf.Graph.Edges[0].From != "a" {
		t.Errorf("workflow graph = %+v", wf)
	}
	page := b.do(t, "GET", fmt.Sprintf("/workflows/%d", created.ID), "").body
	if !strings.Contains(page, `<svg`) || !strings.Contains(page, `class="node st-pending" data-task="b"`) {
		t.Errorf("workflow page lacks the SVG graph")
	}
}

func TestClusterView(t *testing.T) {
	t.Parallel()
	now := time.Now()
	cl := registry.Cluster{Leader: "m1",
		Masters: []registry.NodeEntry{{ID: "m1", Info: &registry.NodeInfo{ID: "m1", Role: registry.RoleMaster, HeartbeatAt: now}}},
		Workers: []registry.NodeEntry{
			{ID: "w1", Info: &registry.NodeInfo{ID: "w1", Role: registry.RoleWorker, Slots: 8, Running: 2, Groups: []string{"g"}, HeartbeatAt: now.Add(-3 * time.Second)}},
			{ID: "bad", Raw: []byte("\x00garbage"), Err: &registry.DataError{Err: errors.New("not JSON")}},
		},
		ZooKeeper: []registry.Member{{Address: "10.0.0.1:2181", Mode: "leader"},
			{Address: "10.0.0.2:2181", Mode: "unreachable", Error: "srvr from 10.0.0.2:2181: connection refused"}},
	}
	b := setup(t, setupOpts{open: true, cluster: fakeCluster{cl: cl}})
	b.seed(t, 6)
	var got struct {
		Leader  string `json:"leader"`
		Masters []struct {
			ID     string `json:"id"`
			Leader bool   `json:"leader"`
		} `json:"masters"`
		Workers []struct {
			ID           string   `json:"id"`
			RunningTasks []int64  `json:"running_tasks"`
			HeartbeatAge *float64 `json:"heartbeat_age_s"`
			Error        string   `json:"error"`
		} `json:"workers"`
		Fenced    []any             `json:"fenced"`
		Failovers []any             `json:"failovers"`
		ZooKeeper []registry.Member `json:"zookeeper"`
		Postgres  []registry.Member `json:"postgres"`
	}
	b.do(t, "GET", "/api/v1/cluster", "").json(t, &got)
	if len(got.ZooKeeper) != 2 || got.ZooKeeper[1] != cl.ZooKeeper[1] {
		t.Errorf("zookeeper = %+v, want %+v", got.ZooKeeper, cl.ZooKeeper)
	}
	if len(got.Postgres) != 1 || got.Postgres[0].Role != "primary" {
		t.Errorf("postgres = %+v, want the test database, primary", got.Postgres)
	}
	if got.Leader != "m1" || len(got.Masters) != 1 || !got.Masters[0].Leader || len(got.Workers) != 2 {
		t.Fatalf("cluster = %+v", got)
	}
	if w := got.Workers[0]; len(w.RunningTasks) != 2 || w.HeartbeatAge == nil || *w.HeartbeatAge < 2 {
		t.Errorf("worker w1 = %+v, want 2 running tasks and a heartbeat age", w)
	}
	if got.Workers[1].Error == "" || got.Fenced == nil || got.Failovers == nil {
		t.Errorf("garbage worker or empty lists wrong: %+v", got)
	}
	page := b.do(t, "GET", "/cluster", "").body
	for _, want := range []string{"leader</span>", "2 / 8", "unparseable data", "No failover yet.", "10.0.0.2:2181", "connection refused", "primary</span>"} {
		if !strings.Contains(page, want) {
			t.Errorf("cluster page lacks %q", want)
		}
	}

	down := setup(t, setupOpts{open: true, cluster: fakeCluster{err: errors.New("zk: could not connect to a server")}})
	if r := down.do(t, "GET", "/api/v1/cluster", ""); r.status != 503 || !strings.Contains(r.errorMessage(t), "could not connect") {
		t.Errorf("cluster API with zookeeper down: %d %s", r.status, r.body)
	}
	if r := down.do(t, "GET", "/cluster", ""); r.status != 200 || !strings.Contains(r.body, "ZooKeeper could not be read") || !strings.Contains(r.body, "primary</span>") {
		t.Errorf("cluster page with zookeeper down: %d", r.status)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	ready := false
	h := api.NodeHandler("w1", "worker", func() api.Readiness {
		return api.Readiness{Ready: ready, Details: map[string]any{"zookeeper": "disconnected"}}
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "zksched_up 1\n") }))
	for _, tc := range []struct {
		path   string
		ready  bool
		status int
		want   string
	}{
		{"/healthz", false, 200, `"status": "ok"`},
		{"/readyz", false, 503, `"zookeeper": "disconnected"`},
		{"/readyz", true, 200, `"ready": true`},
		{"/metrics", false, 200, "zksched_up 1"},
	} {
		ready = tc.ready
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s (ready %v): %d %s; want %d with %q", tc.path, tc.ready, rec.Code, rec.Body.String(), tc.status, tc.want)
		}
	}
}

// TestSignalThroughTheAPI: a signal ends a waiting task once, with the output, and writes an
// audit row without the output; a second, or one to a task that does not wait, is a 409; a
// body that is not JSON is a 400.
func TestSignalThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{{WorkflowInstanceID: f.wf, Name: "review",
		Type: "wait", State: dao.TaskWaiting, Group: "g"}}); err != nil {
		t.Fatal(err)
	}
	all, err := b.db.TaskListByWorkflow(b.ctx, f.wf)
	if err != nil {
		t.Fatal(err)
	}
	var review int64
	for _, ti := range all {
		if ti.Name == "review" {
			review = ti.ID
		}
	}
	path := fmt.Sprintf("/api/v1/task-instances/%d/signal", review)
	if r := b.do(t, "POST", path, `not json`, "Content-Type", "application/json"); r.status != 400 {
		t.Errorf("signal with a body that is not JSON: %d %s", r.status, r.body)
	}
	r := b.do(t, "POST", path, `{"output": "secret plan approved"}`, "Content-Type", "application/json")
	var out map[string]any
	if r.status != 200 {
		t.Fatalf("signal: %d %s", r.status, r.body)
	}
	if r.json(t, &out); out["state"] != "succeeded" || out["workflow_instance"] != float64(f.wf) {
		t.Errorf("signal = %v", out)
	}
	ti, err := b.db.TaskGet(b.ctx, review)
	if err != nil || ti.State != dao.TaskSucceeded || ti.Output == nil || *ti.Output != "secret plan approved" {
		t.Fatalf("review after the signal = %+v, %v", ti, err)
	}
	if r := b.do(t, "POST", path, `{"fail": true}`); r.status != 409 || !strings.Contains(r.errorMessage(t), "it is succeeded") {
		t.Errorf("second signal: %d %s; want 409", r.status, r.body)
	}
	if r := b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/signal", f.byName["t5"]), `{}`); r.status != 409 ||
		!strings.Contains(r.errorMessage(t), "it is queued") {
		t.Errorf("signal of a queued task: %d %s; want 409", r.status, r.body)
	}
	events, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{}, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	var ok int
	for _, ev := range events {
		if strings.Contains(string(ev.Params), "secret plan") {
			t.Errorf("audit row %+v holds the signal's output", ev)
		}
		if ev.Action == dao.AuditTaskSignal && ev.Outcome == dao.AuditOK {
			ok++
			if ev.Target != fmt.Sprintf("task-instance/%d", review) {
				t.Errorf("signal row target %q", ev.Target)
			}
		}
	}
	if ok != 1 {
		t.Errorf("%d committed signal rows, want 1", ok)
	}
}

// TestConcurrencyKeyThroughTheAPI: an instance's key is in its JSON and on its page, a
// submission to a full key with when-full: skip is a 409 naming the key, and one whose key
// renders empty is refused.
func TestConcurrencyKeyThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	yaml := "name: chat\nparams: {thread: {}}\nconcurrency: {key: 'thread-{{ .params.thread }}', when-full: skip}\ntasks:\n  - {name: a, type: noop}\n"
	if r := b.do(t, "POST", "/api/v1/definitions", yaml, "Content-Type", "application/yaml"); r.status != 200 {
		t.Fatalf("store: %d %s", r.status, r.body)
	}
	r := b.do(t, "POST", "/api/v1/workflow-instances", `{"name": "chat", "params": {"thread": "t1"}}`)
	if r.status != 201 {
		t.Fatalf("create instance: %d %s", r.status, r.body)
	}
	var created struct {
		ID int64 `json:"id"`
	}
	r.json(t, &created)
	var wf struct {
		State          string  `json:"state"`
		ConcurrencyKey *string `json:"concurrency_key"`
	}
	b.do(t, "GET", fmt.Sprintf("/api/v1/workflow-instances/%d", created.ID), "").json(t, &wf)
	if wf.State != "submitted" || wf.ConcurrencyKey == nil || *wf.ConcurrencyKey != "thread-t1" {
		t.Errorf("instance = %+v; want it submitted (waiting for a master's admission) with key thread-t1", wf)
	}
	if page := b.do(t, "GET", fmt.Sprintf("/workflows/%d", created.ID), "").body; !strings.Contains(page, `<code id="concurrency-key">thread-t1</code>`) {
		t.Errorf("workflow page does not show the key")
	}
	r = b.do(t, "POST", "/api/v1/workflow-instances", `{"name": "chat", "params": {"thread": "t1"}}`)
	if msg := r.errorMessage(t); r.status != 409 || !strings.Contains(msg, `concurrency key "thread-t1" has 1 active of max 1`) {
		t.Errorf("submission to a full key: %d %q; want 409 naming the key", r.status, msg)
	}
	if r := b.do(t, "POST", "/api/v1/workflow-instances", `{"name": "chat", "params": {"thread": "t2"}}`); r.status != 201 {
		t.Errorf("submission to another key: %d %s", r.status, r.body)
	}
	r = b.do(t, "POST", "/api/v1/workflow-instances", `{"name": "chat"}`)
	if msg := r.errorMessage(t); r.status != 400 || !strings.Contains(msg, "concurrency key") {
		t.Errorf("submission without the key's param: %d %q; want 400 saying the key cannot be rendered", r.status, msg)
	}
}

// TestSignalResumesAPausedAgentThroughTheAPI: a paused agent's JSON and page say which step
// waits; a signal gives that step its output and queues the agent again (state queued,
// paused_step in the answer), and a second signal is a 409.
func TestSignalResumesAPausedAgentThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	id := f.byName["t3"]
	tok := dao.Token{TaskID: id, WorkerID: "w1", Attempt: 1}
	if err := b.db.TaskFinishIfRunning(b.ctx, tok, dao.AttemptResult{Outcome: dao.OutcomePaused, Next: dao.TaskWaiting,
		PausedStep: "approve"}); err != nil {
		t.Fatal(err)
	}
	var task struct {
		State      string  `json:"state"`
		PausedStep *string `json:"paused_step"`
		Attempts   []struct {
			Outcome *string `json:"outcome"`
		} `json:"attempts"`
	}
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d", id), "").json(t, &task)
	if task.State != "waiting" || task.PausedStep == nil || *task.PausedStep != "approve" || len(task.Attempts) != 1 ||
		task.Attempts[0].Outcome == nil || *task.Attempts[0].Outcome != "paused" {
		t.Fatalf("paused agent = %+v; want waiting at approve, its attempt paused", task)
	}
	page := b.do(t, "GET", fmt.Sprintf("/tasks/%d", id), "").body
	if !strings.Contains(page, "is paused at its step <code>approve</code>") || !strings.Contains(page, `id="approve"`) {
		t.Errorf("the page of the paused agent does not offer to approve its step approve:\n%s", page)
	}

	path := fmt.Sprintf("/api/v1/task-instances/%d/signal", id)
	r := b.do(t, "POST", path, `{"output": "ship it"}`, "Content-Type", "application/json")
	var out map[string]any
	if r.status != 200 {
		t.Fatalf("signal: %d %s", r.status, r.body)
	}
	if r.json(t, &out); out["state"] != "queued" || out["paused_step"] != "approve" || out["workflow_instance"] != float64(f.wf) {
		t.Errorf("signal = %v; want the agent queued again from approve", out)
	}
	cps, err := b.db.CheckpointListForTask(b.ctx, id)
	if err != nil || len(cps) != 1 || cps[0].Step != "approve" || cps[0].Output != "ship it" {
		t.Errorf("checkpoints = %+v, %v; want the signal's output as approve's", cps, err)
	}
	task.PausedStep = nil
	b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d", id), "").json(t, &task)
	if task.State != "queued" || task.PausedStep != nil {
		t.Errorf("resumed agent = %+v; want queued, no longer paused", task)
	}
	if r := b.do(t, "POST", path, `{"fail": true}`); r.status != 409 || !strings.Contains(r.errorMessage(t), "it is queued") {
		t.Errorf("second signal: %d %s; want 409", r.status, r.body)
	}
}

// TestForEachThroughTheAPI: a for-each's parent shows how many items it has, offers a kill
// and no signal; the kill answers 202 for the items, which the list shows like any task; a
// signal to it is a 409.
func TestForEachThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{
		{WorkflowInstanceID: f.wf, Name: "sum", Type: "noop", State: dao.TaskWaiting, Group: "g", Items: []string{"a", "b"}},
		{WorkflowInstanceID: f.wf, Name: "sum[0]", Type: "noop", State: dao.TaskQueued, Group: "g", Params: []byte(`{"item": {"value": "a", "index": 0}}`)},
	}); err != nil {
		t.Fatal(err)
	}
	all, err := b.db.TaskListByWorkflow(b.ctx, f.wf)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for _, ti := range all {
		ids[ti.Name] = ti.ID
	}
	page := b.do(t, "GET", fmt.Sprintf("/tasks/%d", ids["sum"]), "").body
	if !strings.Contains(page, `id="items">2 items`) || !strings.Contains(page, `id="kill"`) || strings.Contains(page, `id="approve"`) {
		t.Errorf("the parent's page lacks its items or its kill, or offers a signal:\n%s", page)
	}
	if item := b.do(t, "GET", fmt.Sprintf("/tasks/%d", ids["sum[0]"]), "").body; !strings.Contains(item, `id="item">#0 of its for-each: a`) {
		t.Errorf("the item's page does not show its item:\n%s", item)
	}
	if r := b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/signal", ids["sum"]), `{}`); r.status != 409 {
		t.Errorf("signal of a for-each's parent: %d %s; want 409", r.status, r.body)
	}
	r := b.do(t, "POST", fmt.Sprintf("/api/v1/task-instances/%d/kill", ids["sum"]), "")
	var out map[string]any
	if r.json(t, &out); r.status != 202 || out["state"] != "waiting" {
		t.Errorf("kill of a for-each's parent: %d %v; want 202, waiting for its items", r.status, out)
	}
	if ti, err := b.db.TaskGet(b.ctx, ids["sum[0]"]); err != nil || ti.State != dao.TaskKilled {
		t.Errorf("its queued item after the kill = %+v, %v; want killed", ti, err)
	}
	if list := b.do(t, "GET", fmt.Sprintf("/tasks?workflow=%d", f.wf), "").body; !strings.Contains(list, "sum[0]") {
		t.Errorf("the task list lacks the item")
	}
}
