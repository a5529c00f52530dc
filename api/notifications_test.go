package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestNotifications: the API and the page list each delivery with its state, tries and last
// error, filtered by state; a bad filter is refused with what to write instead.
func TestNotifications(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	wf := daotest.Submit(t, b.db, "nightly", map[string]any{"name": "nightly", "notify": []map[string]any{
		{"on": []string{"failure"}, "webhook-url-env": "OPS_WEBHOOK", "email": []string{"ops@example.com"}}}})
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	if err := b.db.WorkflowFinishIfOwned(b.ctx, wf, "m1", dao.WorkflowFailed, "boom"); err != nil {
		t.Fatal(err)
	}
	ns, err := b.db.NotificationClaimDue(b.ctx, 1, 0)
	if err != nil || len(ns) != 1 {
		t.Fatalf("claim = %v, %v", ns, err)
	}
	if _, err := b.db.NotificationDoneIfSending(b.ctx, ns[0].ID, 1, dao.NotificationDead, 0, "the webhook in OPS_WEBHOOK answered 410 Gone"); err != nil {
		t.Fatal(err)
	}

	r := b.do(t, "GET", "/api/v1/notifications", "")
	var all struct {
		Items []struct {
			ID                 int64   `json:"id"`
			Event              string  `json:"event"`
			Channel            string  `json:"channel"`
			State              string  `json:"state"`
			Attempts           int     `json:"attempts"`
			LastError          *string `json:"last_error"`
			WorkflowInstanceID int64   `json:"workflow_instance_id"`
		} `json:"items"`
	}
	r.json(t, &all)
	if r.status != http.StatusOK || len(all.Items) != 2 {
		t.Fatalf("list: %d %s; want two notifications", r.status, r.body)
	}
	r = b.do(t, "GET", "/api/v1/notifications?state=dead", "")
	var dead struct {
		Items []struct {
			ID        int64   `json:"id"`
			Attempts  int     `json:"attempts"`
			LastError *string `json:"last_error"`
		} `json:"items"`
	}
	r.json(t, &dead)
	if len(dead.Items) != 1 || dead.Items[0].ID != ns[0].ID || dead.Items[0].Attempts != 1 || dead.Items[0].LastError == nil ||
		*dead.Items[0].LastError != "the webhook in OPS_WEBHOOK answered 410 Gone" {
		t.Fatalf("dead: %s", r.body)
	}
	for _, bad := range []struct{ query, want string }{
		{"state=lost", `state: \"lost\" is not one of pending, sending, sent, dead`},
		{"limit=0", "limit"},
		{"before=x", "before"},
		{"status=dead", `unknown parameter \"status\"`},
	} {
		r := b.do(t, "GET", "/api/v1/notifications?"+bad.query, "")
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, bad.want) {
			t.Errorf("%s: %d %s; want 400 with %s", bad.query, r.status, r.body, bad.want)
		}
	}
	r = b.do(t, "GET", "/notifications?state=dead", "")
	if r.status != http.StatusOK || !strings.Contains(r.body, "410 Gone") || !strings.Contains(r.body, fmt.Sprintf(`href="/workflows/%d"`, wf)) ||
		strings.Contains(r.body, "ops@example.com") {
		t.Fatalf("page: %d %s; want the dead webhook alone, with its error and instance", r.status, r.body)
	}
}
