package dao_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestHookPutAll: a workflow's hooks follow its latest version, a hook it drops goes, and a
// hook another workflow holds refuses the change whole.
func TestHookPutAll(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	put := func(workflow string, version int, hooks map[string]string) error {
		return db.Tx(ctx, func(q *dao.Queries) error { return q.HookPutAll(ctx, workflow, version, hooks) })
	}
	if err := put("deploy", 1, map[string]string{"push": "github", "manual": "bearer"}); err != nil {
		t.Fatal(err)
	}
	if err := put("deploy", 2, map[string]string{"push": "hmac-sha256"}); err != nil {
		t.Fatal(err)
	}
	h, err := db.HookGet(ctx, "push")
	if err != nil || h.WorkflowName != "deploy" || h.WorkflowVersion != 2 || h.Signature != "hmac-sha256" {
		t.Errorf("HookGet(push) = %+v, %v; want deploy version 2, hmac-sha256", h, err)
	}
	if _, err := db.HookGet(ctx, "manual"); !errors.Is(err, dao.ErrNoHook) {
		t.Errorf("HookGet(manual), dropped by version 2 = %v; want ErrNoHook", err)
	}
	err = put("report", 1, map[string]string{"nightly": "bearer", "push": "github"})
	var taken *dao.HookTakenError
	if !errors.As(err, &taken) || taken.Owner != "deploy" || taken.Hook != "push" || taken.Workflow != "report" {
		t.Fatalf("another workflow claiming push = %v; want a HookTakenError naming deploy", err)
	}
	if _, err := db.HookGet(ctx, "nightly"); !errors.Is(err, dao.ErrNoHook) {
		t.Errorf("HookGet(nightly) = %v; the refused change stored it", err)
	}
	hooks, err := db.HookList(ctx)
	if err != nil || len(hooks) != 1 || hooks[0].Name != "push" {
		t.Errorf("HookList = %+v, %v; want push alone", hooks, err)
	}
}

// TestHookDeliveryRecord: a delivery id is taken once within the window, given up after it;
// deliveries without an id are never duplicates; the list shows the latest first.
func TestHookDeliveryRecord(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	record := func(id *string, window time.Duration) int64 {
		t.Helper()
		var row int64
		if err := db.Tx(ctx, func(q *dao.Queries) error {
			var err error
			row, err = q.HookDeliveryRecord(ctx, "push", id, dao.HookSubmitted, "10.0.0.1", window)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return row
	}
	id := "d-1"
	first := record(&id, time.Hour)
	if first == 0 {
		t.Fatal("the first delivery of d-1 is a duplicate")
	}
	if err := db.HookDeliverySetInstance(ctx, first, 42); err != nil {
		t.Fatal(err)
	}
	if again := record(&id, time.Hour); again != 0 {
		t.Errorf("d-1 again within the window = row %d; want a duplicate", again)
	}
	prev, err := db.HookDeliveryGet(ctx, "push", id)
	if err != nil || prev.WorkflowInstanceID == nil || *prev.WorkflowInstanceID != 42 {
		t.Errorf("HookDeliveryGet(d-1) = %+v, %v; want instance 42", prev, err)
	}
	if again := record(&id, 0); again != first {
		t.Errorf("d-1 after the window = row %d; want row %d taken over", again, first)
	}
	if a, b := record(nil, time.Hour), record(nil, time.Hour); a == 0 || b == 0 || a == b {
		t.Errorf("two deliveries without an id = rows %d, %d; want two rows", a, b)
	}
	if err := db.HookDeliveryRefuse(ctx, "push", dao.AuditRefused("bad request: params"), "10.0.0.2"); err != nil {
		t.Fatal(err)
	}
	got, err := db.HookDeliveries(ctx, []string{"push", "none"}, 2)
	if err != nil || len(got["push"]) != 2 || got["push"][0].Outcome != dao.AuditRefused("bad request: params") || len(got["none"]) != 0 {
		t.Errorf("HookDeliveries = %+v, %v; want the refusal and one more of push", got, err)
	}
}

// TestPurgeHookDeliveries: deliveries go once older than the period, a batch at a time.
func TestPurgeHookDeliveries(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	for range 3 {
		if err := db.HookDeliveryRefuse(ctx, "push", dao.AuditRefused("x"), "10.0.0.1"); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.PurgeHookDeliveries(ctx, time.Hour, 10); err != nil || n != 0 {
		t.Errorf("purge of deliveries older than an hour = %d, %v; want none", n, err)
	}
	if n, err := db.PurgeHookDeliveries(ctx, 0, 2); err != nil || n != 2 {
		t.Errorf("purge of a batch of 2 = %d, %v; want 2", n, err)
	}
	if n, err := db.PurgeHookDeliveries(ctx, 0, 2); err != nil || n != 1 {
		t.Errorf("purge of the rest = %d, %v; want 1", n, err)
	}
}
