package api_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

const hookSecret = "the-hook-secret"

// deployFile declares a GitHub hook that runs on pushes to main, its params from the body.
const deployFile = `name: deploy
params:
  ref: {required: true}
  sha: ""
triggers:
  - webhook:
      name: deploy-main
      secret-env: ZKSCHED_HOOK_SECRET_DEPLOY
      signature: github
      params:
        ref: "{{ .body.ref }}"
        sha: "{{ .body.after }}"
      filter: '{{ and (eq (index .headers "x-github-event") "push") (eq .body.ref "refs/heads/main") }}'
tasks: [{name: a, type: noop}]
`

// hookSetup is a master with the deploy workflow stored and its hook's secret set.
func hookSetup(t *testing.T, o setupOpts) *testBundle {
	t.Helper()
	o.token = "s3cret"
	o.hookSecrets = map[string]string{"ZKSCHED_HOOK_SECRET_DEPLOY": hookSecret}
	b := setup(t, o)
	if o.db == nil {
		if r := b.do(t, "POST", "/api/v1/definitions", deployFile, "Content-Type", "application/yaml"); r.status != http.StatusOK {
			t.Fatalf("store deploy: %d %s", r.status, r.body)
		}
	}
	return b
}

// sign is GitHub's signature of body.
func sign(body string) string {
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// push is a GitHub push event's body.
func push(ref string) string {
	return fmt.Sprintf(`{"ref": %q, "after": "0123abc", "repository": {"full_name": "acme/app"}}`, ref)
}

// deliver posts a GitHub delivery of body with id, signed with signature.
func (b *testBundle) deliver(t *testing.T, id, body, signature string) response {
	t.Helper()
	return b.do(t, "POST", "/api/v1/hooks/deploy-main", body, "Authorization", "", "Content-Type", "application/json",
		"X-GitHub-Event", "push", "X-GitHub-Delivery", id, "X-Hub-Signature-256", signature)
}

// runs are the instances of deploy, newest first.
func (b *testBundle) runs(t *testing.T) []map[string]any {
	t.Helper()
	r := b.do(t, "GET", "/api/v1/workflow-instances?name=deploy", "")
	var page struct {
		Items []map[string]any `json:"items"`
	}
	r.json(t, &page)
	return page.Items
}

// TestHookRedelivered: a GitHub-signed delivery redelivered three times starts one run, with
// the params rendered from the body; the redeliveries answer 200 naming that run.
func TestHookRedelivered(t *testing.T) {
	t.Parallel()
	b := hookSetup(t, setupOpts{})
	body := push("refs/heads/main")
	first := b.deliver(t, "delivery-1", body, sign(body))
	if first.status != http.StatusCreated {
		t.Fatalf("first delivery: %d %s", first.status, first.body)
	}
	var created struct {
		Outcome  string `json:"outcome"`
		Instance int64  `json:"workflow_instance_id"`
	}
	first.json(t, &created)
	for i := range 3 {
		r := b.deliver(t, "delivery-1", body, sign(body))
		var again struct {
			Outcome  string `json:"outcome"`
			Instance int64  `json:"workflow_instance_id"`
		}
		r.json(t, &again)
		if r.status != http.StatusOK || again.Outcome != "duplicate" || again.Instance != created.Instance {
			t.Errorf("redelivery %d: %d %s; want 200, a duplicate of instance %d", i+1, r.status, r.body, created.Instance)
		}
	}
	runs := b.runs(t)
	if len(runs) != 1 {
		t.Fatalf("%d runs after a delivery and 3 redeliveries; want 1", len(runs))
	}
	params, _ := runs[0]["params"].(map[string]any)
	if params["ref"] != "refs/heads/main" || params["sha"] != "0123abc" {
		t.Errorf("the run's params = %v; want ref and sha from the body", runs[0]["params"])
	}
	if other := b.deliver(t, "delivery-2", body, sign(body)); other.status != http.StatusCreated {
		t.Errorf("a new delivery id: %d %s; want a second run", other.status, other.body)
	}
	evs, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{Actor: "hook/deploy-main"}, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	var started, duplicates int
	for _, ev := range evs {
		switch {
		case ev.Outcome == dao.AuditOK && strings.HasPrefix(ev.Target, "workflow-instance/"):
			started++
		case strings.Contains(ev.Outcome, "duplicate"):
			duplicates += ev.Count
		}
	}
	if started != 2 || duplicates != 3 {
		t.Errorf("audit rows: %d runs started, %d duplicates; want 2 and 3 (%+v)", started, duplicates, evs)
	}
	r := b.do(t, "GET", "/api/v1/hooks", "")
	if r.status != http.StatusOK || !strings.Contains(r.body, `"url": "/api/v1/hooks/deploy-main"`) || !strings.Contains(r.body, `"delivery_id": "delivery-2"`) {
		t.Errorf("GET /api/v1/hooks: %d %s; want the hook with its deliveries", r.status, r.body)
	}
	page := b.do(t, "GET", "/hooks", "")
	if page.status != http.StatusOK || !strings.Contains(page.body, "deploy-main") || !strings.Contains(page.body, "delivery-1") {
		t.Errorf("GET /hooks: %d; want the hook and its deliveries in the page", page.status)
	}
}

// TestHookForged: a delivery whose signature is not the secret's is refused with 401, starts
// nothing and is in the audit trail; past the burst of wrong signatures the address is
// answered 429, while a right signature from it still starts its run.
func TestHookForged(t *testing.T) {
	t.Parallel()
	b := hookSetup(t, setupOpts{})
	body := push("refs/heads/main")
	forged := b.deliver(t, "forged-1", body, sign(body+" "))
	if forged.status != http.StatusUnauthorized || !strings.Contains(forged.errorMessage(t), "signature is wrong") {
		t.Fatalf("forged delivery: %d %s; want 401", forged.status, forged.body)
	}
	if r := b.deliver(t, "forged-2", body, ""); r.status != http.StatusUnauthorized {
		t.Errorf("unsigned delivery: %d %s; want 401", r.status, r.body)
	}
	if r := b.deliver(t, "forged-3", body, strings.TrimPrefix(sign(body), "sha256=")); r.status != http.StatusUnauthorized {
		t.Errorf("GitHub signature without its sha256= prefix: %d %s; want 401", r.status, r.body)
	}
	if n := len(b.runs(t)); n != 0 {
		t.Errorf("%d runs after forged deliveries; want none", n)
	}
	evs, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{Actor: "hook/deploy-main", Action: "hook.deliver"}, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || !strings.HasPrefix(evs[0].Outcome, "refused: unauthorized") || evs[0].Count != 3 || evs[0].Client != "127.0.0.1" {
		t.Errorf("audit rows of the forged deliveries = %+v; want one refusal of 3 from 127.0.0.1", evs)
	}
	limited := false
	for range 20 {
		r := b.deliver(t, "forged", body, sign("other"))
		if r.status == http.StatusTooManyRequests {
			limited = r.header.Get("Retry-After") != ""
			break
		}
		if r.status != http.StatusUnauthorized {
			t.Fatalf("forged delivery: %d %s", r.status, r.body)
		}
	}
	if !limited {
		t.Fatal("20 wrong signatures from one address were never answered 429 with a Retry-After")
	}
	if r := b.deliver(t, "right-1", body, sign(body)); r.status != http.StatusCreated {
		t.Errorf("a right signature from the limited address: %d %s; want its run", r.status, r.body)
	}
}

// TestHookBodyLimit: a body over api.hook-body-limit is refused with 413, and audited.
func TestHookBodyLimit(t *testing.T) {
	t.Parallel()
	b := hookSetup(t, setupOpts{})
	body := `{"ref": "` + strings.Repeat("x", 10<<20) + `"}`
	r := b.deliver(t, "big", body, sign(body))
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("10 MiB delivery: %d %.200s; want 413", r.status, r.body)
	}
	evs, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{Actor: "hook/deploy-main"}, 0, 10)
	if err != nil || len(evs) != 1 || !strings.Contains(evs[0].Outcome, "request entity too large") {
		t.Errorf("audit rows = %+v, %v; want the refusal", evs, err)
	}
	small := hookSetup(t, setupOpts{db: b.db, hookBodyLimit: 64})
	body = push("refs/heads/main")
	if r := small.deliver(t, "small", body, sign(body)); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a %d-byte delivery to a master with a 64-byte limit: %d; want 413", len(body), r.status)
	}
}

// TestHookFiltered: a delivery the filter says no to is answered 202 and starts nothing; its
// redelivery is a duplicate.
func TestHookFiltered(t *testing.T) {
	t.Parallel()
	b := hookSetup(t, setupOpts{})
	body := push("refs/heads/feature")
	r := b.deliver(t, "feature-1", body, sign(body))
	if r.status != http.StatusAccepted || !strings.Contains(r.body, `"outcome": "filtered"`) {
		t.Fatalf("push to a feature branch: %d %s; want 202 filtered", r.status, r.body)
	}
	if n := len(b.runs(t)); n != 0 {
		t.Errorf("%d runs after a filtered delivery; want none", n)
	}
	if r := b.deliver(t, "feature-1", body, sign(body)); r.status != http.StatusOK || !strings.Contains(r.body, `"outcome": "duplicate"`) {
		t.Errorf("its redelivery: %d %s; want a duplicate", r.status, r.body)
	}
	if r := b.deliver(t, "", body, sign(body)); r.status != http.StatusBadRequest || !strings.Contains(r.body, "X-GitHub-Delivery") {
		t.Errorf("a delivery without its id: %d %s; want 400 naming the header", r.status, r.body)
	}
	notJSON := "ref=refs/heads/main"
	if r := b.deliver(t, "text-1", notJSON, sign(notJSON)); r.status != http.StatusBadRequest || !strings.Contains(r.body, "filter") {
		t.Errorf("a body the filter cannot read: %d %s; want 400 naming the filter", r.status, r.body)
	}
}

// TestHookRace: two masters given the same delivery at once start one run.
func TestHookRace(t *testing.T) {
	t.Parallel()
	a := hookSetup(t, setupOpts{})
	b := hookSetup(t, setupOpts{db: a.db})
	body := push("refs/heads/main")
	for round := range 10 {
		id := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i, m := range []*testBundle{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = m.deliver(t, id, body, sign(body)).status
			}()
		}
		wg.Wait()
		created := 0
		for _, s := range statuses {
			if s == http.StatusCreated {
				created++
			} else if s != http.StatusOK {
				t.Errorf("round %d: a master answered %d", round, s)
			}
		}
		if created != 1 {
			t.Errorf("round %d: %d masters started a run (%v); want exactly one", round, created, statuses)
		}
	}
	if n := len(a.runs(t)); n != 10 {
		t.Errorf("%d runs after 10 rounds of two racing deliveries; want 10", n)
	}
}

// TestHookDefinitionRules: a hook belongs to one workflow, and its secret variable must match
// the masters' pattern.
func TestHookDefinitionRules(t *testing.T) {
	t.Parallel()
	b := hookSetup(t, setupOpts{})
	thief := strings.Replace(deployFile, "name: deploy\n", "name: thief\n", 1)
	r := b.do(t, "POST", "/api/v1/definitions", thief, "Content-Type", "application/yaml")
	if r.status != http.StatusConflict || !strings.Contains(r.errorMessage(t), `hook "deploy-main" belongs to workflow "deploy"`) {
		t.Errorf("a second workflow claiming deploy-main: %d %s; want 409 naming its owner", r.status, r.body)
	}
	leaky := strings.Replace(deployFile, "ZKSCHED_HOOK_SECRET_DEPLOY", "PGPASSWORD", 1)
	r = b.do(t, "POST", "/api/v1/definitions", leaky, "Content-Type", "application/yaml")
	if r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(t), `secret-env "PGPASSWORD" is not a hook secret variable`) {
		t.Errorf("a hook naming PGPASSWORD: %d %s; want 400", r.status, r.body)
	}
	gone := strings.Replace(deployFile, "triggers:", "unused:", 1)
	gone = gone[:strings.Index(gone, "unused:")] + "tasks: [{name: a, type: noop}]\n"
	if r := b.do(t, "POST", "/api/v1/definitions", gone, "Content-Type", "application/yaml"); r.status != http.StatusOK {
		t.Fatalf("deploy without its hook: %d %s", r.status, r.body)
	}
	body := push("refs/heads/main")
	if r := b.deliver(t, "after-removal", body, sign(body)); r.status != http.StatusNotFound {
		t.Errorf("a delivery to the removed hook: %d %s; want 404", r.status, r.body)
	}
}

// TestDocsWebhookTrigger stores the example of docs/workflows.md's Webhook triggers and
// delivers it a GitHub push to main and one to another branch: one run, its params from the
// body.
func TestDocsWebhookTrigger(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: "s3cret", hookSecrets: map[string]string{"ZKSCHED_HOOK_SECRET_DEPLOY": hookSecret}})
	// The API takes no relative workdir (zksched define resolves it from the file's folder).
	file := strings.Replace(testenv.DocBlock(t, "docs/workflows.md", "Webhook triggers", "yaml", 1),
		"workdir: .", "workdir: "+filepath.Join(testenv.RepoRoot(), "examples", "hooks"), 1)
	if r := b.do(t, "POST", "/api/v1/definitions", file, "Content-Type", "application/yaml"); r.status != http.StatusOK {
		t.Fatalf("store the docs' example: %d %s", r.status, r.body)
	}
	main, feature := push("refs/heads/main"), push("refs/heads/feature")
	if r := b.deliver(t, "docs-1", main, sign(main)); r.status != http.StatusCreated {
		t.Errorf("push to main: %d %s; want a run", r.status, r.body)
	}
	if r := b.deliver(t, "docs-2", feature, sign(feature)); r.status != http.StatusAccepted {
		t.Errorf("push to a feature branch: %d %s; want 202", r.status, r.body)
	}
	runs := b.runs(t)
	if len(runs) != 1 {
		t.Fatalf("%d runs; want 1", len(runs))
	}
	if params, _ := runs[0]["params"].(map[string]any); params["ref"] != "refs/heads/main" || params["sha"] != "0123abc" {
		t.Errorf("the run's params = %v; want ref and sha from the body", runs[0]["params"])
	}
}

// TestHookOutcomes: each delivery is counted by its outcome, and deliveries to hooks that do
// not exist, whatever their names, fold into one audit row.
func TestHookOutcomes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	counts := map[string]int{}
	b := hookSetup(t, setupOpts{hookDelivered: func(outcome string) { mu.Lock(); counts[outcome]++; mu.Unlock() }})
	main, feature := push("refs/heads/main"), push("refs/heads/feature")
	b.deliver(t, "o-1", main, sign(main))
	b.deliver(t, "o-1", main, sign(main))
	b.deliver(t, "o-2", feature, sign(feature))
	b.deliver(t, "o-3", main, sign("forged"))
	for i := range 5 {
		if r := b.do(t, "POST", fmt.Sprintf("/api/v1/hooks/nothing-%d", i), "{}", "Authorization", ""); r.status != http.StatusNotFound {
			t.Fatalf("a delivery to no hook: %d %s; want 404", r.status, r.body)
		}
	}
	mu.Lock()
	want := map[string]int{"submitted": 1, "duplicate": 1, "filtered": 1, "bad_signature": 1, "refused": 5}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("deliveries by outcome = %v; want %v", counts, want)
	}
	mu.Unlock()
	evs, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{Actor: "hook"}, 0, 10)
	if err != nil || len(evs) != 1 || evs[0].Count != 5 || evs[0].Outcome != "refused: not found: no such hook" {
		t.Errorf("audit rows of deliveries to no hook = %+v, %v; want one row of 5", evs, err)
	}
}

// TestHookHeadersHideCredentials: a hook's templates see the delivery's headers but not its
// Authorization (a bearer hook's secret) nor its Cookie (the session of a browser that
// posted it).
func TestHookHeadersHideCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: "s3cret", hookSecrets: map[string]string{"ZKSCHED_HOOK_SECRET_ECHO": hookSecret}})
	file := "name: echo\nparams-extra: allow\ntriggers:\n  - webhook: {name: echo, secret-env: ZKSCHED_HOOK_SECRET_ECHO, signature: bearer, " +
		"params: {auth: '{{ index .headers \"authorization\" }}', cookie: '{{ index .headers \"cookie\" }}', agent: '{{ index .headers \"x-agent\" }}'}}\n" +
		"tasks: [{name: a, type: noop}]\n"
	if r := b.do(t, "POST", "/api/v1/definitions", file, "Content-Type", "application/yaml"); r.status != http.StatusOK {
		t.Fatalf("store echo: %d %s", r.status, r.body)
	}
	r := b.do(t, "POST", "/api/v1/hooks/echo", "{}", "Authorization", "Bearer "+hookSecret, "Cookie", "zksched_session=stolen", "X-Agent", "ci")
	if r.status != http.StatusCreated {
		t.Fatalf("delivery: %d %s", r.status, r.body)
	}
	runs := b.do(t, "GET", "/api/v1/workflow-instances?name=echo", "")
	var page struct {
		Items []struct {
			Params map[string]string `json:"params"`
		} `json:"items"`
	}
	runs.json(t, &page)
	if len(page.Items) != 1 || page.Items[0].Params["agent"] != "ci" || page.Items[0].Params["auth"] != "" || page.Items[0].Params["cookie"] != "" {
		t.Errorf("the run's params = %+v; want the agent header alone", page.Items)
	}
}

// TestHookSecretUnset: a master without the hook's secret variable answers 503 and names no
// variable to the sender; the log does.
func TestHookSecretUnset(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	var mu sync.Mutex
	b := setup(t, setupOpts{token: "s3cret", log: hookLogWriter{&mu, &log}})
	if r := b.do(t, "POST", "/api/v1/definitions", deployFile, "Content-Type", "application/yaml"); r.status != http.StatusOK {
		t.Fatalf("store deploy: %d %s", r.status, r.body)
	}
	body := push("refs/heads/main")
	r := b.deliver(t, "unset-1", body, sign(body))
	if r.status != http.StatusServiceUnavailable || strings.Contains(r.body, "ZKSCHED_HOOK_SECRET_DEPLOY") {
		t.Errorf("delivery with the secret unset: %d %s; want 503 naming no variable", r.status, r.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(log.String(), "its secret variable ZKSCHED_HOOK_SECRET_DEPLOY is not set on this master") {
		t.Errorf("the log does not say which variable is unset:\n%s", log.String())
	}
}

// hookLogWriter is an io.Writer safe for the server's goroutines.
type hookLogWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l hookLogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestHookTimestampedHMAC: an hmac-sha256 delivery signs its timestamp with its body. A
// fresh one runs; its redelivery within the window starts nothing; the same request sent
// again once its timestamp is stale, or with another timestamp, or none, is refused 401.
func TestHookTimestampedHMAC(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: "s3cret", hookSecrets: map[string]string{"ZKSCHED_HOOK_SECRET_BUILD": hookSecret}})
	file := "name: build\nparams: {ref: {required: true}}\ntriggers:\n  - webhook: {name: build, secret-env: ZKSCHED_HOOK_SECRET_BUILD, " +
		"signature: hmac-sha256, params: {ref: '{{ .body.ref }}'}}\ntasks: [{name: a, type: noop}]\n"
	if r := b.do(t, "POST", "/api/v1/definitions", file, "Content-Type", "application/yaml"); r.status != http.StatusOK {
		t.Fatalf("store build: %d %s", r.status, r.body)
	}
	body := `{"ref": "v1.2"}`
	signed := func(stamp string) string {
		mac := hmac.New(sha256.New, []byte(hookSecret))
		mac.Write([]byte(stamp + "." + body))
		return hex.EncodeToString(mac.Sum(nil))
	}
	send := func(id, stamp, sig string) response {
		return b.do(t, "POST", "/api/v1/hooks/build", body, "Authorization", "", "Content-Type", "application/json",
			"X-Zksched-Delivery", id, "X-Zksched-Timestamp", stamp, "X-Zksched-Signature-256", sig)
	}
	now := strconv.FormatInt(time.Now().Unix(), 10)
	if r := send("d-1", now, signed(now)); r.status != http.StatusCreated {
		t.Fatalf("a fresh delivery: %d %s", r.status, r.body)
	}
	if r := send("d-1", now, signed(now)); r.status != http.StatusOK {
		t.Errorf("its redelivery: %d %s; want 200, nothing started", r.status, r.body)
	}
	stale := strconv.FormatInt(time.Now().Add(-6*time.Minute).Unix(), 10)
	for name, r := range map[string]response{
		"a replay with a stale timestamp":  send("d-2", stale, signed(stale)),
		"another timestamp than it signed": send("d-3", now, signed(stale)),
		"no timestamp":                     send("d-4", "", signed("")),
		"a body signed without its stamp":  send("d-5", now, sign(body)[len("sha256="):]),
	} {
		if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "X-Zksched-Timestamp") {
			t.Errorf("%s: %d %s; want 401 naming the timestamp", name, r.status, r.body)
		}
	}
	var page struct {
		Items []map[string]any `json:"items"`
	}
	b.do(t, "GET", "/api/v1/workflow-instances?name=build", "").json(t, &page)
	if len(page.Items) != 1 {
		t.Errorf("%d runs of build; want the fresh delivery's alone", len(page.Items))
	}
	if r := send("", now, signed(now)); r.status != http.StatusBadRequest {
		t.Errorf("a delivery without X-Zksched-Delivery: %d %s; want 400", r.status, r.body)
	}
}
