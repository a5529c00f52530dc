package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testcluster"
)

// TestConcurrencyKeysSurviveAMasterKilled: runs of three keys with max 1, submitted with the
// command line while two masters admit them, one killed with kill -9 on the way: every run
// succeeds, and the database's history shows that within each key no two runs overlapped
// and they started in the order they were submitted.
func TestConcurrencyKeysSurviveAMasterKilled(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	masters := []*testcluster.Proc{e.Master("master-1"), e.Master("master-2")}
	e.Worker("worker-1")
	e.Worker("worker-2")
	file := e.file(t, "thread.yaml", `
name: thread
params: {thread: {}}
concurrency: {key: "{{ .params.thread }}", max: 1}
tasks:
  - {name: think, type: shell, command: 'sleep 0.2'}
  - {name: answer, type: shell, depends-on: [think], command: 'sleep 0.2'}
`)
	keys := []string{"k1", "k2", "k3"}
	const rounds = 6
	var ids []int64
	submit := func(key string) {
		out, code := e.Run("submit", "--param", "thread="+key, file)
		if code != 0 {
			t.Fatalf("submit on %s: exit %d\n%s", key, code, out)
		}
		out = strings.TrimSpace(out)
		id, err := strconv.ParseInt(out[strings.LastIndex(out, "\n")+1:], 10, 64)
		if err != nil {
			t.Fatalf("submit printed %q", out)
		}
		ids = append(ids, id)
	}
	ctx := context.Background()
	byID := map[string]*testcluster.Proc{}
	for _, m := range masters {
		byID[m.ID(t, 30*time.Second)] = m
	}
	var victim *testcluster.Proc
	for r := range rounds {
		for _, k := range keys {
			submit(k)
		}
		if r == 1 {
			// Kill a master that drives a run of a key.
			waitUntil(t, 30*time.Second, "a master to drive a run", func() bool {
				var owners []string
				err := e.db.SQL().SelectContext(ctx, &owners, `SELECT owner FROM workflow_instance
					WHERE state = 'running' AND owner IS NOT NULL`)
				if err != nil || len(owners) == 0 {
					return false
				}
				victim = byID[owners[0]]
				return victim != nil
			})
			if err := victim.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitUntil(t, 120*time.Second, "every run to end", func() bool {
		var n int
		err := e.db.SQL().GetContext(ctx, &n, `SELECT count(*) FROM workflow_instance WHERE state IN ('submitted', 'running')`)
		return err == nil && n == 0
	})
	var runs []struct {
		ID      int64     `db:"id"`
		Key     string    `db:"concurrency_key"`
		State   string    `db:"state"`
		Started time.Time `db:"started_at"`
		Ended   time.Time `db:"ended_at"`
	}
	if err := e.db.SQL().SelectContext(ctx, &runs, `SELECT id, concurrency_key, state, started_at, ended_at
		FROM workflow_instance ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(runs) != rounds*len(keys) {
		t.Fatalf("%d runs; want %d", len(runs), rounds*len(keys))
	}
	byKey := map[string][]int{}
	for i, r := range runs {
		if r.State != "succeeded" {
			t.Errorf("run %d of key %s: %s; want succeeded", r.ID, r.Key, r.State)
		}
		byKey[r.Key] = append(byKey[r.Key], i)
	}
	for k, idx := range byKey {
		// In id order, which is submit order: each started after the one before it ended.
		for j := 1; j < len(idx); j++ {
			prev, cur := runs[idx[j-1]], runs[idx[j]]
			if cur.Started.Before(prev.Ended) {
				t.Errorf("key %s: run %d started at %v, before run %d (submitted earlier) ended at %v",
					k, cur.ID, cur.Started.Format(time.StampMicro), prev.ID, prev.Ended.Format(time.StampMicro))
			}
		}
		started := make([]time.Time, len(idx))
		for j, i := range idx {
			started[j] = runs[i].Started
		}
		if !slices.IsSortedFunc(started, time.Time.Compare) {
			t.Errorf("key %s: runs started out of submit order", k)
		}
	}
	if victim.KilledBy() != syscall.SIGKILL {
		t.Errorf("%s ended by %v; the test meant to kill it", victim.Name, victim.KilledBy())
	}
	t.Logf("%d runs of %d keys, %s killed after round 2: %s", len(runs), len(keys), victim.Name, fmt.Sprint(ids))
}
