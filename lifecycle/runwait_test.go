package lifecycle_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// loadSpec is the upstream workflow: one task, so the worker's statement that records the
// task's end ends the run too.
const loadSpec = "name: load\ntasks:\n  - {name: only, type: noop}\n"

// reportSpec waits for a run of load, as extra says, then runs after.
func reportSpec(extra string) string {
	return "name: report\nparams: {from: '2000-01-01T00:00:00Z'}\ntasks:\n" +
		"  - {name: loaded, type: sensor, workflow: {name: load" + extra + "}}\n" +
		"  - {name: after, type: noop, depends-on: [loaded]}\n"
}

// runLoad submits a run of load and has worker w1 end its task as outcome, which ends the run;
// it returns the run's id.
func runLoad(ctx context.Context, t *testing.T, db *dao.DB, outcome dao.Outcome) int64 {
	t.Helper()
	id := submit(ctx, t, db, parse(t, loadSpec))
	finishOnly(ctx, t, db, id, outcome, func(fins []dao.Finish) error {
		_, err := lifecycle.Finish(ctx, db, fins)
		return err
	})
	return id
}

// finishOnly claims the one task of the run id and ends it as outcome through finish.
func finishOnly(ctx context.Context, t *testing.T, db *dao.DB, id int64, outcome dao.Outcome, finish func([]dao.Finish) error) {
	t.Helper()
	got, err := lifecycle.Claim(ctx, db, "w1", []string{"default"}, 1, true)
	if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != id {
		t.Fatalf("claim = %+v, %v; want the task of run %d", got, err, id)
	}
	res := dao.AttemptResult{Outcome: outcome}
	if outcome != dao.OutcomeSucceeded {
		res.Error = "it failed"
	}
	res.Next, res.Retry = lifecycle.Next(&got[0], outcome)
	if err := finish([]dao.Finish{{Token: got[0].Token(), Result: res}}); err != nil {
		t.Fatal(err)
	}
}

// sensorOf returns the task loaded of the run report.
func sensorOf(ctx context.Context, t *testing.T, db *dao.DB, report int64) dao.TaskInstance {
	t.Helper()
	tasks, err := db.TaskListByWorkflow(ctx, report)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range tasks {
		if ti.Name == "loaded" {
			return ti
		}
	}
	t.Fatalf("run %d has no task loaded: %+v", report, tasks)
	return dao.TaskInstance{}
}

// wantMatched fails unless the sensor succeeded with the run as its output.
func wantMatched(t *testing.T, s dao.TaskInstance, run int64, state string) {
	t.Helper()
	var out struct {
		ID       int64  `json:"id"`
		Workflow string `json:"workflow"`
		State    string `json:"state"`
		EndedAt  string `json:"ended_at"`
	}
	if s.State != dao.TaskSucceeded || s.Output == nil || json.Unmarshal([]byte(*s.Output), &out) != nil {
		t.Fatalf("sensor = %s, output %v; want succeeded with the run", s.State, s.Output)
	}
	if _, err := time.Parse(time.RFC3339, out.EndedAt); err != nil || out.ID != run || out.Workflow != "load" || out.State != state {
		t.Errorf("output = %s; want run %d of load, %s, with its end in RFC 3339", *s.Output, run, state)
	}
	if s.PausedStep != nil || s.WorkerID != nil {
		t.Errorf("sensor paused at %v, worker %v; want neither", s.PausedStep, s.WorkerID)
	}
}

// TestWorkflowSensorWaitsForTheRunsEnd: a workflow sensor is created waiting at
// workflow-run:load, claimable by no worker, and its instance released (it only waits); a run
// of load that fails leaves it waiting; the statement that ends a run that succeeds ends it,
// with the run as its output, and the downstream task follows.
func TestWorkflowSensorWaitsForTheRunsEnd(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
	report := submit(ctx, t, db, parse(t, reportSpec("")))
	st, err := d.ClaimAndAdvance(ctx, 10)
	if err != nil || len(st.RunWaits) != 1 || st.RunWaitsEnded != 0 || len(st.Released) != 1 {
		t.Fatalf("advance = %+v, %v; want the sensor created waiting and the run released", st, err)
	}
	s := sensorOf(ctx, t, db, report)
	if s.State != dao.TaskWaiting || s.PausedStep == nil || *s.PausedStep != "workflow-run:load" {
		t.Fatalf("sensor = %+v; want waiting at workflow-run:load", s)
	}

	runLoad(ctx, t, db, dao.OutcomeFailed)
	if s := sensorOf(ctx, t, db, report); s.State != dao.TaskWaiting {
		t.Fatalf("after a failed run the sensor is %s; want waiting for a run that succeeds", s.State)
	}
	run := runLoad(ctx, t, db, dao.OutcomeSucceeded)
	wantMatched(t, sensorOf(ctx, t, db, report), run, "succeeded")

	if _, err := d.AdvanceUnowned(ctx, []int64{report}); err != nil {
		t.Fatal(err)
	}
	got, err := lifecycle.Claim(ctx, db, "w1", []string{"default"}, 10, true)
	if err != nil || len(got) != 1 || got[0].Name != "after" {
		t.Fatalf("claim = %+v, %v; want after, and never the sensor", got, err)
	}
}

// TestWorkflowSensorFindsARunEndedBeforeIt: a run that ended after the waiting run was
// submitted, but before its sensor was created, ends the sensor as soon as it is created.
// Since filters the runs: by default the waiting run's creation (an older run does not count),
// or the time it renders.
func TestWorkflowSensorFindsARunEndedBeforeIt(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())

	older := runLoad(ctx, t, db, dao.OutcomeSucceeded)
	report := submit(ctx, t, db, parse(t, reportSpec("")))
	byParam := submit(ctx, t, db, parse(t, reportSpec(", since: '{{ .params.from }}'")))
	newer := runLoad(ctx, t, db, dao.OutcomeSucceeded)

	st, err := d.ClaimAndAdvance(ctx, 10)
	if err != nil || len(st.RunWaits) != 2 || st.RunWaitsEnded != 2 {
		t.Fatalf("advance = %+v, %v; want both sensors created and ended after the commit", st, err)
	}
	wantMatched(t, sensorOf(ctx, t, db, report), newer, "succeeded")
	wantMatched(t, sensorOf(ctx, t, db, byParam), older, "succeeded")
}

// TestWorkflowSensorBadSince: a since that renders no time fails the sensor at its creation,
// saying why.
func TestWorkflowSensorBadSince(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	report := submit(ctx, t, db, parse(t, reportSpec(", since: 'yesterday'")))
	if _, err := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock()).ClaimAndAdvance(ctx, 10); err != nil {
		t.Fatal(err)
	}
	s := sensorOf(ctx, t, db, report)
	if s.State != dao.TaskFailed || s.Error == nil || !strings.Contains(*s.Error, `since renders "yesterday", which is not an RFC 3339 time`) {
		t.Fatalf("sensor = %s, error %v; want failed, naming the since", s.State, s.Error)
	}
}

// TestWorkflowSensorRunEndsDuringItsCreation: a run that ends while the sensor's creation has
// not committed finds no sensor to end, and the sensor's creation did not see it ended. The
// creator's look after its commit ends it: for a run whose end committed before, and for one
// whose end was still in flight (the look waits for it).
func TestWorkflowSensorRunEndsDuringItsCreation(t *testing.T) {
	t.Parallel()
	for _, inFlight := range []bool{false, true} {
		name := "ended before the commit"
		if inFlight {
			name = "end in flight"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, _ := daotest.New(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			t.Cleanup(cancel)
			d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
			report := submit(ctx, t, db, parse(t, reportSpec("")))
			load := submit(ctx, t, db, parse(t, loadSpec))
			release := make(chan struct{})
			ended := make(chan error, 1)
			lifecycle.SetMadeRunWait(d, func() error {
				if !inFlight {
					finishOnly(ctx, t, db, load, dao.OutcomeSucceeded, func(fins []dao.Finish) error {
						_, err := lifecycle.Finish(ctx, db, fins)
						return err
					})
					return nil
				}
				// The run's end, written and holding its row, commits only once the sensor's
				// creation has.
				inTx := make(chan struct{})
				go func() {
					ended <- db.Tx(ctx, func(q *dao.Queries) error {
						finishOnly(ctx, t, db, load, dao.OutcomeSucceeded, func(fins []dao.Finish) error {
							_, err := q.TaskFinishManyIfRunning(ctx, fins)
							return err
						})
						close(inTx)
						<-release
						return nil
					})
				}()
				<-inTx
				// Long after the creation commits, unless something waits for it.
				time.AfterFunc(500*time.Millisecond, func() { close(release) })
				return nil
			})
			st, err := d.ClaimAndAdvance(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			if inFlight {
				if err := <-ended; err != nil {
					t.Fatal(err)
				}
			}
			if st.RunWaitsEnded != 1 {
				t.Errorf("the look after the commit ended %d sensors; want 1", st.RunWaitsEnded)
			}
			wantMatched(t, sensorOf(ctx, t, db, report), load, "succeeded")
		})
	}
}

// TestWorkflowSensorPollEndsWhatItsCreatorMissed: a sensor whose run ended with no statement
// ending it (its creator died before its look) is ended by the masters' poll.
func TestWorkflowSensorPollEndsWhatItsCreatorMissed(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	report := submit(ctx, t, db, parse(t, reportSpec(", state: failed")))
	if _, err := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock()).ClaimAndAdvance(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if n, err := lifecycle.EndRunWaits(ctx, db, 100); err != nil || n != 0 {
		t.Fatalf("EndRunWaits with no run = %d, %v; want none", n, err)
	}
	submit(ctx, t, db, parse(t, loadSpec)) // stores load, whose run goes on
	// A run written ended, as if its end's look had missed the sensor: no trigger fires.
	var run int64
	if err := db.SQL().Get(&run, `INSERT INTO workflow_instance (workflow_name, workflow_version, state, started_at, ended_at)
		VALUES ('load', 1, 'failed', now(), now()) RETURNING id`); err != nil {
		t.Fatal(err)
	}
	if s := sensorOf(ctx, t, db, report); s.State != dao.TaskWaiting {
		t.Fatalf("sensor = %s; want still waiting", s.State)
	}
	if n, err := lifecycle.EndRunWaits(ctx, db, 100); err != nil || n != 1 {
		t.Fatalf("EndRunWaits = %d, %v; want the sensor", n, err)
	}
	wantMatched(t, sensorOf(ctx, t, db, report), run, "failed")
}

// TestWorkflowSensorTimeout: a workflow sensor's timeout ends its wait as its on-timeout says.
func TestWorkflowSensorTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		onTimeout string
		want      dao.TaskState
	}{
		{"", dao.TaskFailed},
		{"fail", dao.TaskFailed},
		{"skip", dao.TaskSkipped},
		{"succeed", dao.TaskSucceeded},
	} {
		t.Run("on-timeout "+tc.onTimeout, func(t *testing.T) {
			t.Parallel()
			db, _ := daotest.New(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			t.Cleanup(cancel)
			extra := "timeout: 100ms"
			if tc.onTimeout != "" {
				extra += ", on-timeout: " + tc.onTimeout
			}
			spec := "name: report\ntasks:\n  - {name: loaded, type: sensor, workflow: {name: load}, " + extra + "}\n"
			report := submit(ctx, t, db, parse(t, spec))
			if _, err := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock()).ClaimAndAdvance(ctx, 10); err != nil {
				t.Fatal(err)
			}
			time.Sleep(150 * time.Millisecond) // past its timeout, by the database's clock too
			if n, err := lifecycle.EndWaitsPastTimeout(ctx, db, 100); err != nil || n != 1 {
				t.Fatalf("EndWaitsPastTimeout = %d, %v; want the sensor", n, err)
			}
			s := sensorOf(ctx, t, db, report)
			if s.State != tc.want || s.EndReason == nil || *s.EndReason != dao.EndTimeout {
				t.Fatalf("sensor = %s, end reason %v; want %s for its timeout", s.State, s.EndReason, tc.want)
			}
			if tc.want != dao.TaskSucceeded && (s.Error == nil || !strings.Contains(*s.Error, "no run of load ended as the sensor waits for within its timeout of 100ms")) {
				t.Errorf("error = %v; want it to name the run and the timeout", s.Error)
			}
			if tc.want == dao.TaskSucceeded && (s.Output == nil || *s.Output != "") {
				t.Errorf("output = %v; want empty", s.Output)
			}
		})
	}
}

// TestWorkflowSensorStoppedAndRerun: stopping the waiting run kills its sensor, which no run's
// end touches afterwards, not even its own run's stop for a sensor waiting for any end of its
// own workflow; a rerun creates the sensor again, waiting, never queued.
func TestWorkflowSensorStoppedAndRerun(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
	self := submit(ctx, t, db, parse(t, "name: load\ntasks:\n  - {name: loaded, type: sensor, workflow: {name: load, state: ended}}\n"))
	if _, err := d.ClaimAndAdvance(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.Stop(ctx, db, self, nil); err != nil {
		t.Fatal(err)
	}
	s := sensorOf(ctx, t, db, self)
	if s.State != dao.TaskKilled {
		t.Fatalf("sensor of the stopped run = %s, output %v; want killed, not satisfied by its own run's stop", s.State, s.Output)
	}

	var specs lifecycle.Specs
	if _, _, err := lifecycle.RerunTask(ctx, db, &specs, s.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AdvanceUnowned(ctx, []int64{self}); err != nil {
		t.Fatal(err)
	}
	again := sensorOf(ctx, t, db, self)
	if again.State != dao.TaskWaiting || again.PausedStep == nil || *again.PausedStep != workflow.WorkflowRunStep+"load" {
		t.Fatalf("sensor rerun = %+v; want created again, waiting for a run", again)
	}
	if got, err := lifecycle.Claim(ctx, db, "w1", []string{"default"}, 10, true); err != nil || len(got) != 0 {
		t.Fatalf("claim = %+v, %v; want nothing: the sensor never goes to a worker", got, err)
	}
}

// TestWorkflowSensorEndedByEveryEnd: the end of a run ends the sensors it satisfies whatever
// statement ends it: an operator's stop, and a master's end of a run of two tasks.
func TestWorkflowSensorEndedByEveryEnd(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
	stopped := submit(ctx, t, db, parse(t, reportSpec(", state: stopped")))
	finished := submit(ctx, t, db, parse(t, reportSpec(", state: ended")))
	if st, err := d.ClaimAndAdvance(ctx, 10); err != nil || len(st.RunWaits) != 2 {
		t.Fatalf("advance = %+v, %v; want both sensors waiting", st, err)
	}

	two := parse(t, "name: load\ntasks:\n  - {name: a, type: noop}\n  - {name: b, type: noop}\n")
	run := submit(ctx, t, db, two)
	if _, err := lifecycle.Stop(ctx, db, run, nil); err != nil {
		t.Fatal(err)
	}
	wantMatched(t, sensorOf(ctx, t, db, stopped), run, "stopped")
	wantMatched(t, sensorOf(ctx, t, db, finished), run, "stopped")

	// A second report waiting for a run that succeeds, ended by a master's finish.
	again := submit(ctx, t, db, parse(t, reportSpec("")))
	if _, err := d.ClaimAndAdvance(ctx, 10); err != nil {
		t.Fatal(err)
	}
	run = submit(ctx, t, db, two)
	for range 2 {
		got, err := lifecycle.Claim(ctx, db, "w1", []string{"default"}, 1, true)
		if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != run {
			t.Fatalf("claim = %+v, %v; want a task of run %d", got, err, run)
		}
		res := dao.AttemptResult{Outcome: dao.OutcomeSucceeded}
		res.Next, res.Retry = lifecycle.Next(&got[0], res.Outcome)
		if _, err := lifecycle.Finish(ctx, db, []dao.Finish{{Token: got[0].Token(), Result: res}}); err != nil {
			t.Fatal(err)
		}
	}
	if s := sensorOf(ctx, t, db, again); s.State != dao.TaskWaiting {
		t.Fatalf("sensor before the master ends the run = %s; want waiting", s.State)
	}
	if st, err := d.AdvanceUnowned(ctx, []int64{run}); err != nil || len(st.Ended) != 1 {
		t.Fatalf("advance of the run = %+v, %v; want it ended", st, err)
	}
	wantMatched(t, sensorOf(ctx, t, db, again), run, "succeeded")
}
