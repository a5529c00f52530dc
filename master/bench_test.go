package master

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// The master's advance, one transaction for 100 workflow instances of one noop task each: the
// first advance creates their tasks, the second, once the tasks succeeded, finishes them. Run
// with: go test -run '^$' -bench Advance -benchtime 100x ./master

const benchBatch = 100

// benchCreate stores the benchmarks' workflow, one noop task, and creates its instances with
// create, in the same transaction.
func benchCreate(b *testing.B, db *dao.DB, create func(q *dao.Queries, spec *workflow.Spec, version int) error) {
	b.Helper()
	spec := &workflow.Spec{Name: "bench", Tasks: []workflow.Task{{Name: "t", Type: "noop", Group: workflow.DefaultGroup}}}
	raw, _ := json.Marshal(spec)
	err := db.Tx(context.Background(), func(q *dao.Queries) error {
		v, err := q.DefinitionEnsure(context.Background(), spec.Name, raw, lifecycle.Facts(spec))
		if err != nil {
			return err
		}
		return create(q, spec, v)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// benchOwned creates n instances owned by the master m1 and returns their ids in batches.
func benchOwned(b *testing.B, db *dao.DB, n int) (*Master, [][]int64) {
	b.Helper()
	ctx := context.Background()
	benchCreate(b, db, func(q *dao.Queries, spec *workflow.Spec, v int) error {
		return q.WorkflowCreateMany(ctx, dao.Submission{Name: spec.Name, Version: v}, n)
	})
	var batches [][]int64
	for len(batches)*benchBatch < n {
		got, err := db.WorkflowClaimUnowned(ctx, "m1", benchBatch)
		if err != nil || len(got) == 0 {
			b.Fatalf("claim: %d, %v", len(got), err)
		}
		ids := make([]int64, len(got))
		for i, wf := range got {
			ids[i] = wf.ID
		}
		batches = append(batches, ids)
	}
	if _, err := db.SQL().Exec(`ANALYZE`); err != nil {
		b.Fatal(err)
	}
	m := New(Config{ID: "m1", PollInterval: time.Second, Log: zerolog.Nop()}, db, newGate(true))
	for _, ids := range batches {
		for _, id := range ids {
			m.owned[id] = struct{}{}
		}
	}
	return m, batches
}

func BenchmarkAdvanceCreate(b *testing.B) {
	db, _ := daotest.New(b)
	m, batches := benchOwned(b, db, b.N*benchBatch)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if err := m.advance(ctx, batches[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "workflows/s")
}

func BenchmarkAdvanceFinish(b *testing.B) {
	db, _ := daotest.New(b)
	m, batches := benchOwned(b, db, b.N*benchBatch)
	ctx := context.Background()
	for i := range b.N {
		if err := m.advance(ctx, batches[i]); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.SQL().Exec(`UPDATE task_instance SET state = 'succeeded', output = 'ok', ended_at = now(); ANALYZE`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if err := m.advance(ctx, batches[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var left int
	if err := db.SQL().Get(&left, `SELECT count(*) FROM workflow_instance WHERE state = 'running'`); err != nil || left != 0 {
		b.Fatalf("%d instances still running, %v", left, err)
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "workflows/s")
}

// BenchmarkAdvanceUnowned is the burn-down's path for single-task workflows submitted with
// their root: no master drives them; once their tasks succeeded, a master locks each batch by
// id (a task-end wake-up) and finishes it in the same transaction, never taking them.
func BenchmarkAdvanceUnowned(b *testing.B) {
	db, _ := daotest.New(b)
	ctx := context.Background()
	benchCreate(b, db, func(q *dao.Queries, spec *workflow.Spec, v int) error {
		return lifecycle.SubmitMany(ctx, q, lifecycle.Submission{Spec: spec, Version: v}, b.N*benchBatch)
	})
	var ids []int64
	if err := db.SQL().Select(&ids, `SELECT id FROM workflow_instance ORDER BY id`); err != nil || len(ids) != b.N*benchBatch {
		b.Fatalf("%d instances, %v", len(ids), err)
	}
	if _, err := db.SQL().Exec(`UPDATE task_instance SET state = 'succeeded', output = 'ok', worker_id = 'w1',
		attempt = 1, started_at = now(), ended_at = now(); ANALYZE`); err != nil {
		b.Fatal(err)
	}
	m := New(Config{ID: "m1", PollInterval: time.Second, Log: zerolog.Nop()}, db, newGate(true))
	b.ResetTimer()
	for i := range b.N {
		dirty := map[int64]struct{}{}
		for _, id := range ids[i*benchBatch : (i+1)*benchBatch] {
			dirty[id] = struct{}{}
		}
		if !m.advanceRound(ctx, dirty) || len(dirty) != 0 {
			b.Fatalf("round %d failed or left %d instances", i, len(dirty))
		}
	}
	b.StopTimer()
	var left int
	if err := db.SQL().Get(&left, `SELECT count(*) FROM workflow_instance WHERE state = 'running' OR owner IS DISTINCT FROM 'm1'`); err != nil || left != 0 {
		b.Fatalf("%d instances still running or not finished by m1, %v", left, err)
	}
	if m.Owned() != 0 {
		b.Fatalf("the master drives %d instances, want none", m.Owned())
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "workflows/s")
}
