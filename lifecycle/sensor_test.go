package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// sensorCheck claims the sensor of instance wf as worker and ends the attempt paused at step
// for waitFor, as executor.Sensor does when its condition is not yet true.
func sensorCheck(ctx context.Context, t *testing.T, db *dao.DB, worker string, wf int64, step string, waitFor time.Duration) dao.TaskInstance {
	t.Helper()
	got, err := lifecycle.Claim(ctx, db, worker, []string{"default"}, 1, true)
	if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != wf {
		t.Fatalf("claim = %+v, %v; want the sensor of instance %d", got, err, wf)
	}
	task := got[0]
	res := dao.AttemptResult{Outcome: dao.OutcomePaused, PausedStep: step, WaitFor: waitFor}
	res.Next, res.Retry = lifecycle.Next(&task, res.Outcome)
	done, err := lifecycle.Finish(ctx, db, []dao.Finish{{Token: task.Token(), Result: res}})
	if err != nil || !done[0].Recorded {
		t.Fatalf("pause = %+v, %v; want recorded", done, err)
	}
	return task
}

// TestSensorWaitsBetweenChecksOnNoSlot: a reschedule sensor whose check was not true waits,
// not running, so holding no slot, and claimable by nobody; once its next check is due a
// master's sweep queues it again, and any worker of its group claims it as a new attempt.
func TestSensorWaitsBetweenChecksOnNoSlot(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	spec := parse(t, `
name: sensed
tasks:
  - {name: ready, type: sensor, file: {path: /nowhere}, interval: 1s}
`)
	wf := submit(ctx, t, db, spec)
	task := sensorCheck(ctx, t, db, "w1", wf, workflow.SensorStep, 200*time.Millisecond)

	got, err := db.TaskGet(ctx, task.ID)
	if err != nil || got.State != dao.TaskWaiting || got.PausedStep == nil || *got.PausedStep != workflow.SensorStep {
		t.Fatalf("sensor between checks = %+v, %v; want waiting at %s", got, err, workflow.SensorStep)
	}
	if claimed, err := lifecycle.Claim(ctx, db, "w2", []string{"default"}, 10, true); err != nil || len(claimed) != 0 {
		t.Fatalf("claim before the check is due = %+v, %v; want nothing", claimed, err)
	}
	if n, err := lifecycle.EndWaitsPastTimeout(ctx, db, 100); err != nil || n != 0 {
		t.Fatalf("EndWaitsPastTimeout before the check is due = %d, %v; want none", n, err)
	}
	time.Sleep(250 * time.Millisecond) // past the 200 ms wait, by the database's clock too
	if n, err := lifecycle.EndWaitsPastTimeout(ctx, db, 100); err != nil || n != 1 {
		t.Fatalf("EndWaitsPastTimeout once due = %d, %v; want the sensor", n, err)
	}
	if got, err := db.TaskGet(ctx, task.ID); err != nil || got.State != dao.TaskQueued || got.PausedStep != nil {
		t.Fatalf("sensor due = %+v, %v; want queued, no longer paused", got, err)
	}
	again, err := lifecycle.Claim(ctx, db, "w2", []string{"default"}, 1, true)
	if err != nil || len(again) != 1 || again[0].ID != task.ID || again[0].Attempt != task.Attempt+1 || again[0].Retries != 0 {
		t.Fatalf("claim once due = %+v, %v; want the sensor, attempt %d, no retry counted", again, err, task.Attempt+1)
	}
}

// TestSensorSkippedAtItsTimeout: a sensor past its timeout with on-timeout: skip (its
// attempt paused at workflow.SensorTimeoutStep) is ended skipped by the sweep, for its
// timeout, and the instance goes on: a task that needs it to succeed is skipped too.
func TestSensorSkippedAtItsTimeout(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	spec := parse(t, `
name: sensed
tasks:
  - {name: ready, type: sensor, file: {path: /nowhere}, timeout: 1s, on-timeout: skip}
  - {name: after, type: noop, depends-on: [ready]}
`)
	wf := submit(ctx, t, db, spec)
	task := sensorCheck(ctx, t, db, "w1", wf, workflow.SensorTimeoutStep, time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	if n, err := lifecycle.EndWaitsPastTimeout(ctx, db, 100); err != nil || n != 1 {
		t.Fatalf("EndWaitsPastTimeout = %d, %v; want the sensor", n, err)
	}
	got, err := db.TaskGet(ctx, task.ID)
	if err != nil || got.State != dao.TaskSkipped || got.EndReason == nil || *got.EndReason != dao.EndTimeout {
		t.Fatalf("sensor past its timeout = %+v, %v; want skipped for its timeout", got, err)
	}
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
	if _, err := d.ClaimAndAdvance(ctx, 10); err != nil {
		t.Fatal(err)
	}
	tasks, err := db.TaskListByWorkflow(ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range tasks {
		if ti.Name == "after" && ti.State != dao.TaskSkipped {
			t.Errorf("after = %s; want skipped, as its dependency was", ti.State)
		}
	}
}

// TestTimeSensorNeedsNoWorker: a time sensor is created waiting, on no worker and claimable by
// nobody, until its time; the sweep then ends it succeeded with its time as its output, or,
// when its timeout comes first, as its on-timeout says.
func TestTimeSensorNeedsNoWorker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, task string
		want       dao.TaskState
	}{
		{"its time", "time: {after: 100ms}, timeout: 1h", dao.TaskSucceeded},
		{"a time past", "time: {at: '2020-01-01T00:00:00Z'}", dao.TaskSucceeded},
		{"timeout first, fail", "time: {after: 1h}, timeout: 100ms", dao.TaskFailed},
		{"timeout first, skip", "time: {after: 1h}, timeout: 100ms, on-timeout: skip", dao.TaskSkipped},
		{"timeout first, succeed", "time: {after: 1h}, timeout: 100ms, on-timeout: succeed", dao.TaskSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, _ := daotest.New(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			t.Cleanup(cancel)
			wf := submit(ctx, t, db, parse(t, "name: timed\ntasks:\n  - {name: at, type: sensor, "+tc.task+"}\n"))
			tasks, err := db.TaskListByWorkflow(ctx, wf)
			if err != nil || len(tasks) != 1 || tasks[0].State != dao.TaskWaiting || tasks[0].WorkerID != nil {
				t.Fatalf("tasks = %+v, %v; want the sensor waiting on no worker", tasks, err)
			}
			if claimed, err := lifecycle.Claim(ctx, db, "w1", []string{"default"}, 10, true); err != nil || len(claimed) != 0 {
				t.Fatalf("claim = %+v, %v; want nothing", claimed, err)
			}
			time.Sleep(150 * time.Millisecond) // past its wait, by the database's clock too
			if n, err := lifecycle.EndWaitsPastTimeout(ctx, db, 100); err != nil || n != 1 {
				t.Fatalf("EndWaitsPastTimeout = %d, %v; want the sensor", n, err)
			}
			got, err := db.TaskGet(ctx, tasks[0].ID)
			if err != nil || got.State != tc.want {
				t.Fatalf("sensor = %+v, %v; want %s", got, err, tc.want)
			}
			if tc.name == "a time past" && (got.Output == nil || *got.Output != "2020-01-01T00:00:00Z") {
				t.Errorf("output = %v; want its time", got.Output)
			}
		})
	}
}
