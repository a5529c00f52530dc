package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestWaitAndStatusSayTheEndReason: --wait and status say why an instance, and each of its
// tasks, ended when something other than its own result ended it: here its workflow timeout,
// which used to show as an operator's kill of its running tasks.
func TestWaitAndStatusSayTheEndReason(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	wf := daotest.Submit(t, db, "slow", map[string]any{"name": "slow"})
	if _, err := db.WorkflowClaimUnowned(ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := db.TaskCreateMany(ctx, []dao.NewTask{{WorkflowInstanceID: wf, Name: "hold", Type: "noop",
		State: dao.TaskQueued, Group: "g"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Tx(ctx, func(q *dao.Queries) error {
		_, err := q.WorkflowTimeOutIfOwned(ctx, wf, "m1", "workflow timeout 1s exceeded")
		return err
	}); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	err := waitFor(ctx, db, wf, nil, &out)
	var exit exitError
	want := fmt.Sprintf("workflow instance %d failed (end reason timeout: its timeout passed): workflow timeout 1s exceeded", wf)
	if !errors.As(err, &exit) || exit.msg != want {
		t.Errorf("--wait = %v, want %q", err, want)
	}
	if line := "hold                 killed: killed: workflow timeout 1s exceeded (end reason workflow-timeout: the workflow's timeout passed)"; !strings.Contains(out.String(), line) {
		t.Errorf("--wait printed\n%s\nwant a line ending %q", out.String(), line)
	}

	st, err := (&dbInstances{db: db}).Status(ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := writeStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  ended because: its timeout passed (timeout)\n", "the workflow's timeout passed; killed: workflow timeout 1s exceeded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status printed\n%s\nwant %q in it", out.String(), want)
		}
	}
}
