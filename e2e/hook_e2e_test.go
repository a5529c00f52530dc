package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

// TestHookDeliveredToTwoMasters: a GitHub-signed push delivered to one master and redelivered
// three times, twice at once to both, starts one run, which a worker runs with the params the
// body gave; a forged delivery starts nothing; zksched hooks list shows the hook and its
// deliveries.
func TestHookDeliveredToTwoMasters(t *testing.T) {
	t.Parallel()
	const secret = "e2e-hook-secret"
	e := setupE2E(t, nil, "", "ZKSCHED_HOOK_SECRET_DEPLOY="+secret, "ZKSCHED_API_PUBLIC_URL=https://zksched.example.com")
	f := e.file(t, "deploy.yaml", `name: deploy
params:
  ref: {required: true}
triggers:
  - webhook:
      name: deploy-main
      secret-env: ZKSCHED_HOOK_SECRET_DEPLOY
      signature: github
      params: {ref: "{{ .body.ref }}"}
      filter: '{{ eq (index .headers "x-github-event") "push" }}'
tasks:
  - {name: deploy, type: shell, command: 'echo "deploying $ZKSCHED_PARAM_ref"'}
`)
	if out, code := e.Run("define", f); code != 0 {
		t.Fatalf("define: exit %d\n%s", code, out)
	}
	a, b := e.Master("master-a"), e.Master("master-b")
	e.Worker("worker")
	bases := []string{fmt.Sprintf("http://127.0.0.1:%d", a.Port), fmt.Sprintf("http://127.0.0.1:%d", b.Port)}
	serving(t, a, bases[0], nil)
	serving(t, b, bases[1], nil)

	body := `{"ref": "refs/heads/main", "after": "0123abc"}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	signature := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	c := client(t, "127.0.0.1", nil)
	deliver := func(base, sig string) reply {
		return call(t, c, "POST", base+"/api/v1/hooks/deploy-main", body, "Content-Type", "application/json",
			"X-GitHub-Event", "push", "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-Hub-Signature-256", sig)
	}
	if r := deliver(bases[0], signature); r.status != http.StatusCreated {
		t.Fatalf("delivery: %d %s", r.status, r.body)
	}
	if r := deliver(bases[1], signature); r.status != http.StatusOK || !strings.Contains(r.body, "duplicate") {
		t.Errorf("redelivery to the other master: %d %s; want a duplicate", r.status, r.body)
	}
	var wg sync.WaitGroup
	for _, base := range bases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := deliver(base, signature); r.status != http.StatusOK {
				t.Errorf("redelivery to %s at once with the other: %d %s; want 200", base, r.status, r.body)
			}
		}()
	}
	wg.Wait()
	if r := deliver(bases[1], "sha256="+strings.Repeat("0", 64)); r.status != http.StatusUnauthorized {
		t.Errorf("forged delivery: %d %s; want 401", r.status, r.body)
	}

	var ids []int64
	if err := e.db.SQL().SelectContext(context.Background(), &ids, `SELECT id FROM workflow_instance WHERE workflow_name = 'deploy'`); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 {
		t.Fatalf("%d runs of deploy after a delivery and 3 redeliveries; want 1", len(ids))
	}
	waitUntil(t, 60*time.Second, "the run to succeed", func() bool {
		wf, err := e.db.WorkflowGet(context.Background(), ids[0])
		return err == nil && wf.State == dao.WorkflowSucceeded
	})
	if out := e.tasks(t, ids[0])["deploy"].Output; out == nil || !strings.Contains(*out, "deploying refs/heads/main") {
		t.Errorf("the task's output = %v; want the ref from the body", out)
	}
	out, code := e.Run("hooks", "list")
	for _, want := range []string{"deploy-main", "https://zksched.example.com/api/v1/hooks/deploy-main", "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		fmt.Sprintf("submitted → workflow instance %d", ids[0])} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("hooks list: exit %d\n%s\nwant %q in it", code, out, want)
		}
	}
}

// TestHookMasterKilledMidDelivery: the master a delivery reaches dies with SIGKILL after it
// recorded the delivery and created its run but before it committed them. The sender gets no
// answer and delivers again to the other master, which starts the one run: the first
// master's work was rolled back whole, the delivery neither lost nor run twice.
func TestHookMasterKilledMidDelivery(t *testing.T) {
	t.Parallel()
	const secret = "e2e-hook-secret"
	e := setupE2E(t, nil, "", "ZKSCHED_HOOK_SECRET_BUILD="+secret)
	f := e.file(t, "build.yaml", `name: build
params: {ref: {required: true}}
triggers:
  - webhook: {name: build, secret-env: ZKSCHED_HOOK_SECRET_BUILD, signature: github, params: {ref: "{{ .body.ref }}"}}
tasks:
  - {name: build, type: shell, command: 'echo "building $ZKSCHED_PARAM_ref"'}
`)
	if out, code := e.Run("define", f); code != 0 {
		t.Fatalf("define: exit %d\n%s", code, out)
	}
	a := e.Master("master-a", "ZKSCHED_TEST_FAULT=hook-before-commit")
	b := e.Master("master-b")
	e.Worker("worker")
	bases := []string{fmt.Sprintf("http://127.0.0.1:%d", a.Port), fmt.Sprintf("http://127.0.0.1:%d", b.Port)}
	serving(t, a, bases[0], nil)
	serving(t, b, bases[1], nil)
	body := `{"ref": "v2"}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	c := client(t, "127.0.0.1", nil)
	deliver := func(base string) (int, error) {
		req, err := http.NewRequest("POST", base+"/api/v1/hooks/build", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Delivery", "d6b1c2e0-0001")
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if status, err := deliver(bases[0]); err == nil {
		t.Fatalf("the delivery to master-a was answered %d; want no answer, the master killed mid-delivery", status)
	}
	a.WaitLog(t, 30*time.Second, "SIGKILL at hook-before-commit")
	if status, err := deliver(bases[1]); err != nil || status != http.StatusCreated {
		t.Fatalf("the delivery again, to master-b: %d, %v; want 201, the first rolled back", status, err)
	}
	if status, err := deliver(bases[1]); err != nil || status != http.StatusOK {
		t.Errorf("a third time: %d, %v; want 200, a duplicate", status, err)
	}
	var ids []int64
	if err := e.db.SQL().SelectContext(context.Background(), &ids, `SELECT id FROM workflow_instance WHERE workflow_name = 'build'`); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 {
		t.Fatalf("%d runs of build; want 1", len(ids))
	}
	waitUntil(t, 60*time.Second, "the run to succeed", func() bool {
		wf, err := e.db.WorkflowGet(context.Background(), ids[0])
		return err == nil && wf.State == dao.WorkflowSucceeded
	})
}

// TestHookRefusalsOverTheWire sends a master process what an attacker or a broken sender
// would: a forged GitHub signature, an hmac-sha256 delivery signed right but captured ten
// minutes ago and sent again, and a 10 MiB body. Each is refused with its status and audited,
// and none starts a run; the same hmac delivery sent fresh starts one.
func TestHookRefusalsOverTheWire(t *testing.T) {
	t.Parallel()
	const secret = "e2e-hook-secret"
	e := setupE2E(t, nil, "", "ZKSCHED_HOOK_SECRET_PUSH="+secret)
	f := e.file(t, "push.yaml", `name: push
params: {ref: ""}
triggers:
  - webhook: {name: push-github, secret-env: ZKSCHED_HOOK_SECRET_PUSH, signature: github, params: {ref: "{{ .body.ref }}"}}
  - webhook: {name: push-signed, secret-env: ZKSCHED_HOOK_SECRET_PUSH, signature: hmac-sha256, params: {ref: "{{ .body.ref }}"}}
tasks:
  - {name: build, type: shell, command: 'echo "building $ZKSCHED_PARAM_ref"'}
`)
	if out, code := e.Run("define", f); code != 0 {
		t.Fatalf("define: exit %d\n%s", code, out)
	}
	m := e.Master("master")
	base := fmt.Sprintf("http://127.0.0.1:%d/api/v1/hooks/", m.Port)
	serving(t, m, fmt.Sprintf("http://127.0.0.1:%d", m.Port), nil)
	c := client(t, "127.0.0.1", nil)
	sign := func(msg string) string {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(msg))
		return hex.EncodeToString(mac.Sum(nil))
	}
	body := `{"ref": "refs/heads/main"}`
	timed := func(id string, at time.Time) reply {
		stamp := fmt.Sprint(at.Unix())
		return call(t, c, "POST", base+"push-signed", body, "Content-Type", "application/json",
			"X-Zksched-Delivery", id, "X-Zksched-Timestamp", stamp, "X-Zksched-Signature-256", sign(stamp+"."+body))
	}

	if r := call(t, c, "POST", base+"push-github", body, "Content-Type", "application/json", "X-GitHub-Delivery", "d-forged",
		"X-Hub-Signature-256", "sha256="+sign(body+" ")); r.status != http.StatusUnauthorized {
		t.Errorf("a forged signature: %d %s; want 401", r.status, r.body)
	}
	if r := timed("d-replayed", time.Now().Add(-10*time.Minute)); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "X-Zksched-Timestamp") {
		t.Errorf("a delivery replayed 10 minutes later: %d %s; want 401 naming the timestamp", r.status, r.body)
	}
	big := `{"ref": "` + strings.Repeat("x", 10<<20) + `"}`
	if r := call(t, c, "POST", base+"push-github", big, "Content-Type", "application/json", "X-GitHub-Delivery", "d-big",
		"X-Hub-Signature-256", "sha256="+sign(big)); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 10 MiB body: %d %.200s; want 413", r.status, r.body)
	}
	var runs, refused int
	if err := e.db.SQL().QueryRow(`SELECT (SELECT count(*) FROM workflow_instance WHERE workflow_name = 'push'),
		(SELECT count(*) FROM audit_event WHERE action = 'hook.deliver' AND outcome <> 'ok')`).Scan(&runs, &refused); err != nil {
		t.Fatal(err)
	}
	if runs != 0 || refused < 3 {
		t.Errorf("after three refused deliveries: %d runs, %d refusals audited; want 0 and 3", runs, refused)
	}
	if r := timed("d-fresh", time.Now()); r.status != http.StatusCreated {
		t.Errorf("the same delivery signed now: %d %s; want 201", r.status, r.body)
	}
}
