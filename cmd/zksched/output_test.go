package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestStatusSaysAnOutputWasTruncated: status and submit --wait note a task whose output was
// cut at its output-limit (output-overflow: truncate).
func TestStatusSaysAnOutputWasTruncated(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	wf := daotest.Submit(t, db, "cut", map[string]any{"name": "cut"})
	if _, err := db.TaskCreateMany(ctx, []dao.NewTask{{WorkflowInstanceID: wf, Name: "cut", Type: "shell",
		State: dao.TaskQueued, Group: "g"}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := db.TaskClaimQueued(ctx, "w1", []string{"g"}, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	out := "cut short"
	if err := db.TaskFinishIfRunning(ctx, claimed[0].Token(), dao.AttemptResult{Outcome: dao.OutcomeSucceeded,
		Next: dao.TaskSucceeded, Output: &out, OutputTruncated: true}); err != nil {
		t.Fatal(err)
	}
	st, err := (&dbInstances{db: db}).Status(ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := writeStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "output truncated at its output-limit") || !st.Tasks[0].OutputTruncated {
		t.Errorf("status printed\n%s\nwant the task noted as truncated", b.String())
	}

	// --wait reads the same instance to its end.
	if _, err := db.SQL().ExecContext(ctx, `UPDATE workflow_instance SET state = 'succeeded', ended_at = now() WHERE id = $1`, wf); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := waitFor(ctx, db, wf, nil, &b); err != nil {
		t.Fatal(err)
	}
	if line := "cut                  succeeded (output truncated at its output-limit)\n"; !strings.Contains(b.String(), line) {
		t.Errorf("--wait printed\n%s\nwant a line ending %q", b.String(), line)
	}
}
