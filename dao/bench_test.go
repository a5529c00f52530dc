package dao_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// The hot statements, each on a fresh schema holding 20,000 finished tasks (the history a
// table carries) and a queue to work on. Each op handles a batch of 100 tasks, the size the
// worker and the master use; tasks/s is the figure to compare with the targets. Run
// with: go test -run '^$' -bench . -benchtime 200x ./dao

const benchBatch = 100

// benchQueue fills the queue with n tasks in group "g", 100 to a workflow instance owned by m1.
func benchQueue(b *testing.B, db *dao.DB, n int) {
	b.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += benchBatch {
		wf := daotest.Submit(b, db, "wf", map[string]any{"name": "wf"})
		if _, err := db.WorkflowClaimUnowned(ctx, "m1", 1000); err != nil {
			b.Fatal(err)
		}
		tasks := make([]dao.NewTask, min(benchBatch, n-i))
		for j := range tasks {
			tasks[j] = dao.NewTask{WorkflowInstanceID: wf, Name: fmt.Sprintf("t%d", j), Type: "noop", State: dao.TaskQueued, Group: "g"}
		}
		if _, err := db.TaskCreateMany(ctx, tasks); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDB(b *testing.B) *dao.DB {
	b.Helper()
	db, _ := daotest.New(b)
	seedHistory(b, db, 20000, 0, 0)
	if _, err := db.SQL().Exec(`ANALYZE`); err != nil {
		b.Fatal(err)
	}
	return db
}

func reportTasks(b *testing.B) {
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkTaskClaim claims 100 queued tasks a statement.
func BenchmarkTaskClaim(b *testing.B) {
	db := benchDB(b)
	benchQueue(b, db, b.N*benchBatch)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		got, err := db.TaskClaimQueued(ctx, "w1", []string{"g"}, benchBatch)
		if err != nil || len(got) != benchBatch {
			b.Fatalf("claim = %d tasks, %v", len(got), err)
		}
	}
	reportTasks(b)
}

// BenchmarkTaskClaimUnpooled is BenchmarkTaskClaim with the claim workers use while no pool
// exists.
func BenchmarkTaskClaimUnpooled(b *testing.B) {
	db := benchDB(b)
	benchQueue(b, db, b.N*benchBatch)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		got, err := db.TaskClaimQueuedUnpooled(ctx, "w1", []string{"g"}, benchBatch)
		if err != nil || len(got) != benchBatch {
			b.Fatalf("claim = %d tasks, %v", len(got), err)
		}
	}
	reportTasks(b)
}

// BenchmarkTaskClaimShare is BenchmarkTaskClaimUnpooled by a worker beside a peer of 200 slots,
// 100 of them running: in a backlog (the head of the queue waited longer than Fresh: nothing
// is counted), and in a burst (every task fresh: the share is reckoned, counting the peer's
// running tasks and 200 queued ones). Each claim is by a worker of its own, running nothing.
func BenchmarkTaskClaimShare(b *testing.B) {
	for _, c := range []struct {
		name  string
		fresh time.Duration
	}{{"backlog", time.Millisecond}, {"burst", time.Hour}} {
		b.Run(c.name, func(b *testing.B) {
			db := benchDB(b)
			benchQueue(b, db, b.N*benchBatch+3*benchBatch)
			ctx := context.Background()
			if got, err := db.TaskClaimQueuedUnpooled(ctx, "peer", []string{"g"}, benchBatch); err != nil || len(got) != benchBatch {
				b.Fatalf("claim = %d tasks, %v", len(got), err)
			}
			if c.fresh < time.Second {
				if _, err := db.SQL().Exec(`UPDATE task_instance SET queued_at = now() - interval '1 hour' WHERE state = 'queued'`); err != nil {
					b.Fatal(err)
				}
			}
			share := dao.Share{Slots: benchBatch, Peers: map[string]int{"peer": 2 * benchBatch}, Fresh: c.fresh}
			b.ResetTimer()
			for i := range b.N {
				got, err := db.TaskClaimQueuedUnpooledShare(ctx, fmt.Sprint("w", i), []string{"g"}, benchBatch, share)
				if err != nil || len(got) != benchBatch {
					b.Fatalf("claim = %d tasks, %v", len(got), err)
				}
			}
			reportTasks(b)
		})
	}
}

// BenchmarkTaskFinishMany records 100 attempts' results a statement, as the completer does.
func BenchmarkTaskFinishMany(b *testing.B) {
	db := benchDB(b)
	benchQueue(b, db, b.N*benchBatch)
	ctx := context.Background()
	batches := make([][]dao.Finish, b.N)
	for i := range batches {
		got, err := db.TaskClaimQueued(ctx, "w1", []string{"g"}, benchBatch)
		if err != nil || len(got) != benchBatch {
			b.Fatalf("claim = %d tasks, %v", len(got), err)
		}
		for _, t := range got {
			batches[i] = append(batches[i], dao.Finish{Token: t.Token(), Result: dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}})
		}
	}
	b.ResetTimer()
	for i := range b.N {
		done, err := db.TaskFinishManyIfRunning(ctx, batches[i])
		if err != nil || len(done) != benchBatch || !done[0].Recorded {
			b.Fatalf("finish = %v, %v", done, err)
		}
	}
	reportTasks(b)
}

// BenchmarkWorkerStatements is the database's share of two workers in a burn-down, without
// the workers: two connections each claim a batch (the unpooled claim) and record its results
// (TaskFinishManyIfRunning), over and over, on one queue. It is the floor under the workers' cost in
// the burn-down (no executor, completer or wake-up), by batch size: 64 slots give claims of
// about 32. One op is one batch of one connection.
func BenchmarkWorkerStatements(b *testing.B) {
	for _, batch := range []int{32, 64, 128} {
		b.Run(fmt.Sprint("batch-", batch), func(b *testing.B) {
			db := benchDB(b)
			benchQueue(b, db, b.N*batch+2*batch)
			ctx := context.Background()
			ops := make(chan struct{}, b.N)
			for range b.N {
				ops <- struct{}{}
			}
			close(ops)
			errs := make(chan error, 2)
			b.ResetTimer()
			for w := range 2 {
				worker := fmt.Sprint("w", w)
				go func() {
					for range ops {
						got, err := db.TaskClaimQueuedUnpooled(ctx, worker, []string{"g"}, batch)
						if err != nil || len(got) != batch {
							errs <- fmt.Errorf("claim = %d tasks, %v", len(got), err)
							return
						}
						fins := make([]dao.Finish, len(got))
						for i, t := range got {
							fins[i] = dao.Finish{Token: t.Token(), Result: dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded}}
						}
						if _, err := db.TaskFinishManyIfRunning(ctx, fins); err != nil {
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
			for range 2 {
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// BenchmarkLLMAdmit admits model requests to one provider from many goroutines at once, as
// the workers of a cluster do: every admission locks the provider's row, so admissions/s is
// the most one provider can be asked of the cluster. The limits are never reached.
func BenchmarkLLMAdmit(b *testing.B) {
	db, _ := daotest.New(b)
	ctx := context.Background()
	lim := dao.LLMLimits{Requests: 1_000_000_000, Tokens: 1_000_000_000, Window: time.Minute}
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if a, err := db.LLMAdmitIfUnderLimits(ctx, "p", lim, 100); err != nil || !a.Admitted {
				b.Fatal(a, err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admissions/s")
}
