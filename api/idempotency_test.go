package api_test

import (
	"strings"
	"testing"
)

// TestSubmissionIdempotencyKey: a submission retried with its Idempotency-Key (its first
// answer lost) creates nothing and answers 200 with the first's instance; another key
// creates another; a key that is not one is a 400 and creates nothing.
func TestSubmissionIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	if r := b.do(t, "POST", "/api/v1/definitions", "name: once\ntasks:\n  - {name: a, type: noop}\n", "Content-Type", "application/yaml"); r.status != 200 {
		t.Fatalf("store: %d %s", r.status, r.body)
	}
	var first, again, other struct {
		ID       int64 `json:"id"`
		Replayed bool  `json:"replayed"`
	}
	body := `{"name": "once"}`
	r := b.do(t, "POST", "/api/v1/workflow-instances", body, "Idempotency-Key", "k-1")
	if r.status != 201 {
		t.Fatalf("first submission: %d %s", r.status, r.body)
	}
	r.json(t, &first)
	r = b.do(t, "POST", "/api/v1/workflow-instances", body, "Idempotency-Key", "k-1")
	if r.status != 200 {
		t.Fatalf("its retry: %d %s; want 200", r.status, r.body)
	}
	r.json(t, &again)
	if again.ID != first.ID || !again.Replayed {
		t.Errorf("the retry answered %+v; want instance %d, replayed", again, first.ID)
	}
	b.do(t, "POST", "/api/v1/workflow-instances", body, "Idempotency-Key", "k-2").json(t, &other)
	if other.ID == first.ID || other.ID == 0 {
		t.Errorf("another key answered instance %d; want a new one (first %d)", other.ID, first.ID)
	}
	if r := b.do(t, "POST", "/api/v1/workflow-instances", body, "Idempotency-Key", strings.Repeat("k", 201)); r.status != 400 ||
		!strings.Contains(r.errorMessage(t), "Idempotency-Key") {
		t.Errorf("a 201-byte key: %d %s; want 400", r.status, r.body)
	}
	var n int
	if err := b.db.SQL().Get(&n, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'once'`); err != nil || n != 2 {
		t.Errorf("%d instances, %v; want 2", n, err)
	}
}
