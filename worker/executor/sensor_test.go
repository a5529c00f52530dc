package executor

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/notify"
	"github.com/zksched/zksched/workflow"
)

// sensorEvents records the checks a Sensor reports.
type sensorEvents struct {
	mu     sync.Mutex
	checks []string // kind/outcome
	late   []time.Duration
}

func (e *sensorEvents) SensorChecked(kind, outcome string, late time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checks = append(e.checks, kind+"/"+outcome)
	e.late = append(e.late, late)
}

// sensorCheckpoints is a Checkpointer in memory that records the attempt of each save, as the
// database does: each Run of sensorTask's task is one attempt after the last.
type sensorCheckpoints struct {
	memCheckpoints
	attempt int
}

func (c *sensorCheckpoints) Save(ctx context.Context, step string, cp Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp.Attempt = c.attempt
	c.steps[step] = cp
	return nil
}

// run runs the next attempt of task.
func (c *sensorCheckpoints) run(s Sensor, task *Task, log io.Writer) Result {
	task.Attempt++
	c.attempt = task.Attempt
	return s.Run(context.Background(), *task, log)
}

// sensorTask is an attempt of a sensor task whose spec is the YAML mapping of one task.
func sensorTask(t *testing.T, task string, cps *sensorCheckpoints) Task {
	t.Helper()
	spec, err := workflow.Parse([]byte("name: s\ntasks:\n  - name: s\n    type: sensor\n    " + task + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return Task{ID: 1, Spec: spec.Tasks[0], Checkpoints: cps}
}

func newCheckpoints() *sensorCheckpoints {
	return &sensorCheckpoints{memCheckpoints: memCheckpoints{steps: map[string]Checkpoint{}}}
}

// wantPaused fails the test unless res is a pause at step for wait.
func wantPaused(t *testing.T, res Result, step string, wait time.Duration) {
	t.Helper()
	if res.Err != nil || res.Paused == nil || res.Paused.Step != step || res.Paused.Timeout != wait {
		t.Fatalf("result = %+v (paused %+v); want paused at %s for %s", res, res.Paused, step, wait)
	}
}

// wantTrue fails the test unless res is a success with output out.
func wantTrue(t *testing.T, res Result, out string) {
	t.Helper()
	if res.Err != nil || res.Paused != nil || res.Output != out {
		t.Fatalf("result = %+v (paused %+v); want succeeded with %q", res, res.Paused, out)
	}
}

func TestSensorHTTP(t *testing.T) {
	t.Parallel()
	var state atomic.Value
	state.Store("running")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/job", http.StatusFound)
		default:
			io.WriteString(w, `{"state": "`+state.Load().(string)+`"}`)
		}
	}))
	t.Cleanup(srv.Close)
	events := &sensorEvents{}
	s := Sensor{Client: notify.OutboundClient(5*time.Second, true), Events: events, Env: []string{"JOB_URL=" + srv.URL + "/job"}}
	cps := newCheckpoints()
	task := sensorTask(t, `http: {url-env: JOB_URL, expect: {status: 200, body-contains: state, json: '{{ eq .body.state "done" }}'}}
    interval: 10s`, cps)
	wantPaused(t, cps.run(s, &task, io.Discard), workflow.SensorStep, 10*time.Second)
	state.Store("done")
	wantTrue(t, cps.run(s, &task, io.Discard), `{"state": "done"}`)
	if want := []string{"http/false", "http/true"}; !slices.Equal(events.checks, want) {
		t.Errorf("checks = %v; want %v", events.checks, want)
	}

	// A redirect is not followed: its answer, a 302, is not a 2xx.
	redirect := sensorTask(t, "http: {url: '"+srv.URL+"/redirect'}", newCheckpoints())
	wantPaused(t, s.Run(context.Background(), redirect, io.Discard), workflow.SensorStep, workflow.DefaultSensorInterval)

	// The webhooks' client refuses a private target: the check fails, and the sensor waits.
	var log strings.Builder
	private := Sensor{Client: notify.OutboundClient(5*time.Second, false), Events: events}
	wantPaused(t, private.Run(context.Background(), sensorTask(t, "http: {url: '"+srv.URL+"/job'}", newCheckpoints()), &log),
		workflow.SensorStep, workflow.DefaultSensorInterval)
	if got := events.checks[len(events.checks)-1]; got != "http/error" || !strings.Contains(log.String(), "http check failed") {
		t.Errorf("private target: last check %s, log %q; want an error logged", got, log.String())
	}
}

func TestSensorSQL(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	db, err := sql.Open("postgres", pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE loads (day date)`); err != nil {
		t.Fatal(err)
	}
	s := Sensor{Env: []string{"WAREHOUSE_DSN=" + pg.DSN}}
	cps := newCheckpoints()
	task := sensorTask(t, `sql: {dsn-env: WAREHOUSE_DSN, query: "SELECT count(*) > 0 FROM loads"}`, cps)
	wantPaused(t, cps.run(s, &task, io.Discard), workflow.SensorStep, workflow.DefaultSensorInterval)
	if _, err := db.Exec(`INSERT INTO loads VALUES ('2026-11-28')`); err != nil {
		t.Fatal(err)
	}
	wantTrue(t, cps.run(s, &task, io.Discard), "true")

	// A variable the task environment does not let through is an error, and the sensor waits.
	var log strings.Builder
	wantPaused(t, cps.run(Sensor{Env: []string{}}, &task, &log), workflow.SensorStep, workflow.DefaultSensorInterval)
	if !strings.Contains(log.String(), "no variable WAREHOUSE_DSN") {
		t.Errorf("log = %q; want it to name the missing variable", log.String())
	}
}

func TestSensorFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ready")
	s := Sensor{}
	cps := newCheckpoints()
	task := sensorTask(t, "file: {path: '"+path+"'}\n    interval: 2s", cps)
	wantPaused(t, cps.run(s, &task, io.Discard), workflow.SensorStep, 2*time.Second)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wantTrue(t, cps.run(s, &task, io.Discard), path)
}

// TestSensorTimeAndLateness: a time sensor waits until its time, not its interval, from its
// first check; the next check's lateness is measured from the due time its state keeps.
func TestSensorTimeAndLateness(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	events := &sensorEvents{}
	cps := newCheckpoints()
	s := Sensor{Clock: clock, Events: events}
	task := sensorTask(t, "time: {after: 1h}", cps)
	wantPaused(t, cps.run(s, &task, io.Discard), workflow.SensorStep, time.Hour)
	var st sensorState
	if err := json.Unmarshal([]byte(cps.steps[workflow.SensorStateStep].Output), &st); err != nil || !st.Start.Equal(clock.Now()) ||
		!st.Due.Equal(clock.Now().Add(time.Hour)) {
		t.Fatalf("state = %+v, %v; want started now, due in an hour", st, err)
	}
	clock.Advance(time.Hour + 3*time.Second)
	wantTrue(t, cps.run(s, &task, io.Discard), st.Start.Add(time.Hour).UTC().Format(time.RFC3339))
	if len(events.late) != 2 || events.late[0] >= 0 || events.late[1] != 3*time.Second {
		t.Errorf("lateness = %v; want none for the first check, 3s for the second", events.late)
	}
}

// TestSensorTimeout: the timeout runs from the first check; the last check is at it, and
// then on-timeout decides.
func TestSensorTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		onTimeout string
		want      func(t *testing.T, res Result)
	}{
		{"fail", func(t *testing.T, res Result) {
			if res.Err == nil || !strings.Contains(res.Err.Error(), "not true within its timeout of 1m") {
				t.Errorf("result = %+v; want failed for its timeout", res)
			}
		}},
		{"succeed", func(t *testing.T, res Result) { wantTrue(t, res, "") }},
		{"skip", func(t *testing.T, res Result) { wantPaused(t, res, workflow.SensorTimeoutStep, time.Millisecond) }},
	} {
		t.Run(tc.onTimeout, func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClock()
			s := Sensor{Clock: clock}
			cps := newCheckpoints()
			task := sensorTask(t, "file: {path: /nowhere/at/all}\n    interval: 40s\n    timeout: 1m\n    on-timeout: "+tc.onTimeout, cps)
			wantPaused(t, cps.run(s, &task, io.Discard), workflow.SensorStep, 40*time.Second)
			clock.Advance(40 * time.Second)
			wantPaused(t, cps.run(s, &task, io.Discard), workflow.SensorStep, 20*time.Second)
			clock.Advance(20 * time.Second)
			tc.want(t, cps.run(s, &task, io.Discard))
		})
	}
}

// TestSensorPoke: a poke sensor keeps its attempt, checking every interval, until true.
func TestSensorPoke(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ready")
	clock := clockwork.NewFakeClock()
	events := &sensorEvents{}
	s := Sensor{Clock: clock, Events: events}
	task := sensorTask(t, "file: {path: '"+path+"'}\n    interval: 5s\n    mode: poke", newCheckpoints())
	done := make(chan Result, 1)
	go func() { done <- s.Run(context.Background(), task, io.Discard) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	wantTrue(t, <-done, path)
	if want := []string{"file/false", "file/false", "file/true"}; !slices.Equal(events.checks, want) {
		t.Errorf("checks = %v; want %v", events.checks, want)
	}
}

// TestSensorStartsOverAfterARerun: a rerun removes the sensor's state (dao's rerun), and
// the timeout runs from the new first check.
func TestSensorStartsOverAfterARerun(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	s := Sensor{Clock: clock}
	cps := newCheckpoints()
	task := sensorTask(t, "file: {path: /nowhere/at/all}\n    interval: 40s\n    timeout: 1m", cps)
	wantPaused(t, cps.run(s, &task, io.Discard), workflow.SensorStep, 40*time.Second)
	clock.Advance(2 * time.Minute)
	task.Attempt++ // the attempt that failed it
	delete(cps.steps, workflow.SensorStateStep)
	wantPaused(t, cps.run(s, &task, io.Discard), workflow.SensorStep, 40*time.Second)
}

// TestSensorTimeoutOutlivesALostAttempt: an attempt lost with its worker in the middle of a
// check, the first or a later one, does not start the timeout over: the next attempt goes on
// from the state the attempts before kept, written before the first check.
func TestSensorTimeoutOutlivesALostAttempt(t *testing.T) {
	t.Parallel()
	for _, lost := range []int{1, 2} {
		t.Run(fmt.Sprintf("attempt %d lost", lost), func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClock()
			cps := newCheckpoints()
			// The check of the lost attempt never ends: its worker is gone.
			hang := make(chan struct{})
			t.Cleanup(func() { close(hang) })
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if int(calls.Add(1)) == lost {
					select {
					case <-hang:
					case <-r.Context().Done():
					}
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			t.Cleanup(srv.Close)
			s := Sensor{Clock: clock, Client: notify.OutboundClient(time.Minute, true)}
			task := sensorTask(t, "http: {url: '"+srv.URL+"'}\n    interval: 40s\n    timeout: 1m", cps)
			if lost == 2 {
				wantPaused(t, cps.run(s, &task, io.Discard), workflow.SensorStep, 40*time.Second)
				clock.Advance(40 * time.Second)
			}
			// The lost attempt: its worker dies during the check.
			ctx, kill := context.WithCancel(context.Background())
			done := make(chan Result, 1)
			task.Attempt++
			cps.attempt = task.Attempt
			go func() { done <- s.Run(ctx, task, io.Discard) }()
			for calls.Load() < int32(lost) {
				time.Sleep(time.Millisecond)
			}
			kill()
			<-done
			// The failover gives the task to another worker a while later, past the timeout
			// counted from the first check.
			clock.Advance(90 * time.Second)
			res := cps.run(s, &task, io.Discard)
			if res.Err == nil || !strings.Contains(res.Err.Error(), "not true within its timeout of 1m") {
				t.Fatalf("result = %+v (paused %+v); want failed for its timeout, which ran from the first check", res, res.Paused)
			}
		})
	}
}
