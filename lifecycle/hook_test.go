package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

func hookSpec(t *testing.T, name, hook string) *workflow.Spec {
	t.Helper()
	spec, err := workflow.Parse([]byte("name: " + name + "\nparams: {who: x}\ntriggers:\n  - webhook: {name: " + hook +
		", secret-env: ZKSCHED_HOOK_SECRET_X, signature: bearer, params: {who: '{{ .body.who }}'}}\ntasks: [{name: a, type: noop}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestDefineHooks: storing a file indexes its hooks; a second workflow claiming one stores
// nothing at all, not even its new version.
func TestDefineHooks(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	if _, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: hookSpec(t, "deploy", "push")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: hookSpec(t, "thief", "push")}, time.Now())
	var taken *dao.HookTakenError
	if !errors.As(err, &taken) || taken.Owner != "deploy" {
		t.Fatalf("Define(thief) = %v; want a HookTakenError naming deploy", err)
	}
	if v, err := db.DefinitionLatest(ctx, "thief"); err != nil || v != 0 {
		t.Errorf("thief's latest version = %d, %v; want none stored", v, err)
	}
	if _, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: hookSpec(t, "deploy", "release")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.HookGet(ctx, "push"); !errors.Is(err, dao.ErrNoHook) {
		t.Errorf("push after deploy version 2 dropped it: %v; want ErrNoHook", err)
	}
	if h, err := db.HookGet(ctx, "release"); err != nil || h.WorkflowVersion != 2 {
		t.Errorf("release = %+v, %v; want deploy version 2", h, err)
	}
	if _, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: hookSpec(t, "thief", "push")}, time.Now()); err != nil {
		t.Errorf("thief claiming the freed push: %v", err)
	}
}

// TestDeliver: many deliveries of one id at once start one run; a refused run records
// nothing, so its retry is no duplicate.
func TestDeliver(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	spec := hookSpec(t, "deploy", "push")
	stored, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: spec}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	delivery := func(id string, params map[string]string) lifecycle.Delivery {
		return lifecycle.Delivery{Hook: "push", Spec: spec, Version: stored.Version, ID: &id, Window: time.Hour, Params: params,
			Client: "10.0.0.1", Audit: dao.AuditEvent{Actor: "hook/push", Role: "hook", Action: "hook.deliver", Client: "10.0.0.1"}}
	}
	var wg sync.WaitGroup
	results := make([]lifecycle.Delivered, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = lifecycle.Deliver(ctx, db, delivery("d-1", map[string]string{"who": "me"}))
		}()
	}
	wg.Wait()
	var started []int64
	for i, r := range results {
		switch {
		case errs[i] != nil:
			t.Errorf("delivery %d: %v", i, errs[i])
		case !r.Duplicate:
			started = append(started, r.Instance)
		}
	}
	if len(started) != 1 {
		t.Fatalf("8 deliveries of one id at once started %v; want one run", started)
	}
	for i, r := range results {
		if r.Duplicate && (r.Previous.WorkflowInstanceID == nil || *r.Previous.WorkflowInstanceID != started[0]) {
			t.Errorf("duplicate %d names %+v; want run %d", i, r.Previous, started[0])
		}
	}
	_, err = lifecycle.Deliver(ctx, db, delivery("d-2", map[string]string{"nope": "x"}))
	if !lifecycle.IsRefusal(err) {
		t.Fatalf("a delivery with an undeclared param = %v; want a refusal", err)
	}
	if r, err := lifecycle.Deliver(ctx, db, delivery("d-2", map[string]string{"who": "you"})); err != nil || r.Duplicate || r.Instance == 0 {
		t.Errorf("its retry with right params = %+v, %v; want a run", r, err)
	}
}
