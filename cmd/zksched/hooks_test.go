package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// TestHooksList: hooks list shows each hook's URL under api.public-url and its latest
// deliveries, the sender's text escaped.
func TestHooksList(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := writeHooks(&out, nil, false); err != nil || !strings.Contains(out.String(), "no hooks") {
		t.Errorf("no hooks: %q, %v", out.String(), err)
	}
	spec, err := workflow.Parse([]byte("name: deploy\ntriggers:\n  - webhook: {name: push, secret-env: ZKSCHED_HOOK_SECRET_X, signature: github}\n" +
		"tasks: [{name: a, type: noop}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: spec}, time.Now()); err != nil {
		t.Fatal(err)
	}
	id := "d-1\x1b[2J"
	if err := db.Tx(ctx, func(q *dao.Queries) error {
		row, err := q.HookDeliveryRecord(ctx, "push", &id, dao.HookFiltered, "10.0.0.9", time.Hour)
		if row == 0 && err == nil {
			t.Error("the delivery was taken for a duplicate")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	views, err := loadHookViews(ctx, db, "https://zksched.example.com/", 5)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := writeHooks(&out, views, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"push", "deploy v1", "https://zksched.example.com/api/v1/hooks/push", `d-1\x1b[2J`, "10.0.0.9", "filtered"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("hooks list printed\n%s\nwant %q in it", out.String(), want)
		}
	}
	if strings.Contains(out.String(), "\x1b") {
		t.Errorf("hooks list printed the sender's escape sequence raw:\n%q", out.String())
	}
}
