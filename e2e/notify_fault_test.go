package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// heldHook is a webhook receiver that holds its first request open until released, and
// answers the others at once; it records each request's Idempotency-Key.
type heldHook struct {
	srv     *httptest.Server
	first   chan struct{} // closed when the first request has arrived
	release chan struct{}
	mu      sync.Mutex
	keys    []string
}

func newHeldHook(t *testing.T) *heldHook {
	h := &heldHook{first: make(chan struct{}), release: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.keys = append(h.keys, r.Header.Get("Idempotency-Key"))
		n := len(h.keys)
		h.mu.Unlock()
		if n == 1 {
			close(h.first)
			select {
			case <-h.release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(func() {
		close(h.release)
		h.srv.Close()
	})
	return h
}

func (h *heldHook) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.keys...)
}

// TestFaultMasterKilledMidDelivery: the master sending a notification is killed with kill -9
// while the webhook holds its request open; the other master sends it again once the dead
// one's hold has lapsed, with the same Idempotency-Key. The outbox has one row, sent.
func TestFaultMasterKilledMidDelivery(t *testing.T) {
	f := setupFault(t)
	hook := newHeldHook(t)
	env := []string{"ZKSCHED_WEBHOOK_OPS=" + hook.srv.URL, "ZKSCHED_NOTIFY_TIMEOUT=3s", "ZKSCHED_NOTIFY_BACKOFF=100ms",
		"ZKSCHED_NOTIFY_ALLOW_PRIVATE_TARGETS=true"}
	victim := f.startMaster(t, "master-1", env...)
	f.startWorker(t, "worker-1", 2)
	file := map[string]any{"name": "notified", "notify": []map[string]any{{"on": []string{"success"}, "webhook-url-env": "ZKSCHED_WEBHOOK_OPS"}},
		"tasks": []map[string]any{{"name": "a", "type": "noop"}}}
	id := f.storeFile(t, file)
	select {
	case <-hook.first:
	case <-time.After(60 * time.Second):
		t.Fatal("the webhook got no request")
	}
	survivor := f.startMaster(t, "master-2", env...)
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	victim.Wait(t, 10*time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for len(hook.got()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no second delivery; %s's log:\n%s", survivor.id, survivor.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	ns, err := f.db.NotificationList(context.Background(), "", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); len(ns) == 1 && ns[0].State != dao.NotificationSent && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if ns, err = f.db.NotificationList(context.Background(), "", 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	keys := hook.got()
	if len(ns) != 1 || ns[0].State != dao.NotificationSent || *ns[0].WorkflowInstanceID != id || ns[0].Attempts != 2 {
		t.Fatalf("outbox = %+v; want one row of instance %d, sent at its second try", ns, id)
	}
	if keys[0] != ns[0].IdempotencyKey || keys[1] != keys[0] {
		t.Fatalf("deliveries' keys %v; want each %s", keys, ns[0].IdempotencyKey)
	}
}

// storeFile stores the workflow file (a mapping as in YAML) and submits an instance of it,
// as `zksched submit` does.
func (f *fault) storeFile(t *testing.T, file map[string]any) int64 {
	t.Helper()
	raw, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := workflow.Parse(raw)
	if err != nil {
		t.Fatalf("workflow: %v\n%s", err, raw)
	}
	st, err := lifecycle.Define(context.Background(), f.db, lifecycle.Definition{Spec: spec, Run: &lifecycle.Run{}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return st.Instance
}

// hookBody is what the test reads of a webhook's JSON body.
type hookBody struct {
	Event string `json:"event"`
	Node  string `json:"node"`
	State string `json:"state"`
	Key   string `json:"-"`
}

// TestFaultWorkerKilledNotifiesTheCluster: the masters' notify.default hears the cluster's
// events; a worker killed with kill -9 while it runs a task is fenced by the leader, which
// moves the task elsewhere. The webhook hears node-fenced and failover for that worker, each
// once, from the outbox rows the failover step's own transaction wrote.
func TestFaultWorkerKilledNotifiesTheCluster(t *testing.T) {
	f := setupFault(t)
	var (
		mu     sync.Mutex
		bodies []hookBody
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b hookBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		b.Key = r.Header.Get("Idempotency-Key")
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	config := filepath.Join(t.TempDir(), "master.yaml")
	if err := os.WriteFile(config, []byte("notify:\n  default:\n    - {on: [node-fenced, failover], webhook-url-env: ZKSCHED_WEBHOOK_OPS}\n"+
		"  allow-private-targets: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.startMaster(t, "master", "ZKSCHED_CONFIG="+config, "ZKSCHED_WEBHOOK_OPS="+hook.URL, "ZKSCHED_NOTIFY_BACKOFF=100ms")
	victim := f.startWorker(t, "worker-1", 1)
	wf := f.submit(t, "fenced-notified", task{name: "long", body: "sleep 3"})
	lost := f.waitAliveOn(t, victim, 1)
	f.startWorker(t, "worker-2", 1)
	faultAt := time.Now()
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})
	f.expectFailedOver(t, victim, lost)

	var ns []dao.Notification
	waitUntil(t, 30*time.Second, "both cluster notifications sent", func() bool {
		var err error
		if ns, err = f.db.NotificationList(context.Background(), "", 0, 10); err != nil {
			t.Fatal(err)
		}
		sent := 0
		for _, n := range ns {
			if n.State == dao.NotificationSent {
				sent++
			}
		}
		return sent == 2
	})
	rows := map[string]dao.Notification{}
	for _, n := range ns {
		rows[n.Event] = n
	}
	if len(ns) != 2 || rows["node-fenced"].ID == 0 || rows["failover"].ID == 0 {
		t.Fatalf("outbox = %+v; want one node-fenced row and one failover row", ns)
	}
	mu.Lock()
	got := append([]hookBody(nil), bodies...)
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("webhook heard %+v; want two requests, one per row", got)
	}
	for _, b := range got {
		n, ok := rows[b.Event]
		if !ok || b.Node != victim.id || b.Key != n.IdempotencyKey {
			t.Errorf("webhook heard %+v; want event node-fenced or failover of node %s with its row's key %s", b, victim.id, n.IdempotencyKey)
		}
	}
}
