package lifecycle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
)

// TestSignalRacingTheTimeoutAppliesOnce: a signal and a master's timeout reaching a waiting
// task at the same moment end it once, as whichever came first says, never both.
func TestSignalRacingTheTimeoutAppliesOnce(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := parse(t, "name: race\ntasks:\n  - {name: review, type: wait, timeout: 1ms}\n")
	const rounds = 30
	var signalled, timedOut int
	for range rounds {
		wf := submit(ctx, t, db, spec)
		tasks, err := db.TaskListByWorkflow(ctx, wf)
		if err != nil || len(tasks) != 1 || tasks[0].State != dao.TaskWaiting {
			t.Fatalf("tasks = %+v, %v; want the review waiting", tasks, err)
		}
		time.Sleep(2 * time.Millisecond) // past the 1 ms timeout, by the database's clock too
		var wg sync.WaitGroup
		var signalErr, endErr error
		var ended int
		wg.Go(func() { _, signalErr = lifecycle.Signal(ctx, db, tasks[0].ID, "yes", false, nil) })
		wg.Go(func() { ended, endErr = lifecycle.EndWaitsPastTimeout(ctx, db, 100) })
		wg.Wait()
		if endErr != nil {
			t.Fatal(endErr)
		}
		got, err := db.TaskGet(ctx, tasks[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case signalErr == nil && ended == 0 && got.State == dao.TaskSucceeded && got.Output != nil && *got.Output == "yes":
			signalled++
		case signalErr != nil && ended == 1 && got.State == dao.TaskFailed:
			timedOut++
		default:
			t.Fatalf("signal %v, timeout ended %d, task %+v: want one of them, and the task as it says", signalErr, ended, got)
		}
	}
	t.Logf("%d rounds: the signal first %d times, the timeout %d", rounds, signalled, timedOut)
}
