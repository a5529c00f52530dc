package executor

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	// The driver of the sql sensors.
	_ "github.com/lib/pq"

	"github.com/zksched/zksched/notify"
	"github.com/zksched/zksched/workflow"
)

// Sensor runs the checks of sensor tasks. An attempt checks the sensor's condition: true ends
// it succeeded. Not yet true, a reschedule sensor's attempt ends paused at the step
// workflow.SensorStep, for the sensor's interval (or less, up to its timeout or its time),
// so the task waits holding no slot until the masters queue it again
// (lifecycle.EndWaitsPastTimeout); a poke sensor's attempt waits the interval itself and
// checks again. The sensor's timeout runs from its first check, whose time the attempts keep
// in the checkpoint workflow.SensorStateStep (written before that check, kept by the
// attempts that follow until a rerun); past it, on-timeout decides: fail fails the
// attempt, succeed succeeds it with an empty output, skip ends it paused at
// workflow.SensorTimeoutStep, which the masters end skipped. A check that fails (the target
// does not answer, the query is wrong) counts as not yet true: it is logged and counted, and
// the sensor checks again.
type Sensor struct {
	// Client sends the http sensors' requests: notify.OutboundClient, which follows no
	// redirect (a 3xx answer is the answer) and, unless told otherwise, refuses private
	// targets. nil means notify.OutboundClient(CheckTimeout, false).
	Client *http.Client
	// Env is the environment url-env and dsn-env are read from: the shell tasks' BaseEnv, so
	// a sensor sees what a task may see and none of the worker's secrets. nil means the
	// worker's own variables that TaskEnv lets through.
	Env []string
	// Clock is the sensors' time; nil means the real one.
	Clock clockwork.Clock
	// Events hears of each check; nil for none.
	Events SensorEvents
}

// SensorEvents hears of sensor checks: the metrics.
type SensorEvents interface {
	// SensorChecked is called once a check ends: outcome is "true", "false" or "error", and
	// late how long after its due time the check started (0 if before it; negative for a
	// first check, which has none).
	SensorChecked(kind, outcome string, late time.Duration)
}

// CheckTimeout bounds one check of a sensor.
const CheckTimeout = 30 * time.Second

// maxSensorBody is the most bytes of an http sensor's answer that are read.
const maxSensorBody = 1 << 20

// sensorState is the checkpoint workflow.SensorStateStep.
type sensorState struct {
	Start time.Time `json:"start"`
	// Due is when the next check was due; zero before the first pause.
	Due time.Time `json:"due,omitzero"`
}

// Run implements Executor.
func (s Sensor) Run(ctx context.Context, t Task, log io.Writer) Result {
	clock := s.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	spec := t.Spec
	kind := spec.SensorKind()
	if kind == "" {
		return Result{Err: errors.New("the sensor has no condition")}
	}
	if kind == "workflow" {
		// Never queued: it waits for its run on no worker, and that run's end ends it.
		return Result{Err: errors.New("a workflow sensor waits on no worker: it cannot be checked by one")}
	}
	var st sensorState
	if t.Checkpoints != nil {
		cps, err := t.Checkpoints.Load(ctx)
		if err != nil {
			return Result{Err: fmt.Errorf("load the sensor's state: %w", err)}
		}
		// The state goes on from the attempts before: the one that paused for this check, and
		// any lost with its worker or handed back since, so that neither restarts the
		// timeout. A rerun removes it (dao.TaskRerunIfFailedOrKilled): the sensor starts over.
		if cp, ok := cps[workflow.SensorStateStep]; ok {
			if err := json.Unmarshal([]byte(cp.Output), &st); err != nil {
				return Result{Err: fmt.Errorf("read the sensor's state: %w", err)}
			}
		}
	}
	now := clock.Now()
	if st.Start.IsZero() {
		st.Start = now
		// Kept before the first check, which may take up to CheckTimeout: a worker lost
		// during it leaves the next attempt the time the sensing began.
		if err := s.saveState(ctx, t, st); err != nil {
			return Result{Err: err}
		}
	}
	late := time.Duration(-1)
	if !st.Due.IsZero() {
		late = max(now.Sub(st.Due), 0)
	}
	for {
		ok, out, err := s.check(ctx, t, st.Start, now)
		outcome := strconv.FormatBool(ok)
		if err != nil {
			if ctx.Err() != nil {
				return Result{Stopped: true}
			}
			outcome = "error"
			fmt.Fprintf(log, "%s check failed: %v\n", kind, err)
		} else {
			fmt.Fprintf(log, "%s check: %s\n", kind, outcome)
		}
		if s.Events != nil {
			s.Events.SensorChecked(kind, outcome, late)
		}
		if ok {
			return Result{Output: out}
		}
		wait := spec.SensorInterval()
		if kind == "time" {
			wait = sensorDue(spec.Time, st.Start).Sub(now)
		}
		if spec.Timeout > 0 {
			left := st.Start.Add(time.Duration(spec.Timeout)).Sub(now)
			if left <= 0 {
				return sensorTimedOut(spec)
			}
			// The last check is at the timeout.
			wait = min(wait, left)
		}
		wait = max(wait, time.Millisecond)
		if spec.Mode == workflow.SensorPoke {
			due := now.Add(wait)
			select {
			case <-ctx.Done():
				return Result{Stopped: true}
			case <-clock.After(wait):
			}
			now = clock.Now()
			late = max(now.Sub(due), 0)
			continue
		}
		st.Due = now.Add(wait)
		if err := s.saveState(ctx, t, st); err != nil {
			return Result{Err: err}
		}
		return Result{Paused: &Pause{Step: workflow.SensorStep, Timeout: wait}}
	}
}

// saveState stores the sensor's state in the checkpoint workflow.SensorStateStep, if the
// task keeps checkpoints.
func (s Sensor) saveState(ctx context.Context, t Task, st sensorState) error {
	if t.Checkpoints == nil {
		return nil
	}
	b, _ := json.Marshal(st)
	if err := t.Checkpoints.Save(ctx, workflow.SensorStateStep, Checkpoint{Output: string(b)}); err != nil {
		return fmt.Errorf("save the sensor's state: %w", err)
	}
	return nil
}

// sensorTimedOut is the end of a sensor whose condition did not hold within its timeout.
func sensorTimedOut(spec workflow.Task) Result {
	switch spec.OnTimeout {
	case workflow.OnTimeoutSucceed:
		return Result{}
	case workflow.OnTimeoutSkip:
		return Result{Paused: &Pause{Step: workflow.SensorTimeoutStep, Timeout: time.Millisecond}}
	}
	return Result{Err: fmt.Errorf("the sensor was not true within its timeout of %s", spec.Timeout)}
}

// sensorDue is when a time sensor becomes true; its spec passed validation.
func sensorDue(tm *workflow.SensorTime, start time.Time) time.Time {
	if tm.At != "" {
		at, _ := time.Parse(time.RFC3339, tm.At)
		return at
	}
	return start.Add(time.Duration(tm.After))
}

// check checks the sensor's condition once, at now; out is the sensor's output when it
// holds.
func (s Sensor) check(ctx context.Context, t Task, start, now time.Time) (ok bool, out string, err error) {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	spec := t.Spec
	switch {
	case spec.HTTP != nil:
		return s.checkHTTP(ctx, t)
	case spec.SQL != nil:
		return s.checkSQL(ctx, spec.SQL)
	case spec.File != nil:
		_, err := os.Stat(spec.File.Path)
		switch {
		case err == nil:
			return true, spec.File.Path, nil
		case errors.Is(err, os.ErrNotExist):
			return false, "", nil
		}
		return false, "", err
	case spec.Time != nil:
		due := sensorDue(spec.Time, start)
		return !now.Before(due), due.UTC().Format(time.RFC3339), nil
	}
	return false, "", errors.New("the sensor has no condition")
}

// env looks name up in the sensor's environment.
func (s Sensor) env(name string) (string, error) {
	v, ok := envMap(s.Env)[name]
	if !ok || v == "" {
		return "", fmt.Errorf("the worker's task environment has no variable %s (see worker.task-env)", name)
	}
	return v, nil
}

func (s Sensor) checkHTTP(ctx context.Context, t Task) (bool, string, error) {
	h := t.Spec.HTTP
	target := h.URL
	if h.URLEnv != "" {
		v, err := s.env(h.URLEnv)
		if err != nil {
			return false, "", err
		}
		target = v
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		// The URL may hold a secret: say which field, not what it holds.
		return false, "", errors.New("the sensor's url is not a valid address")
	}
	req.Header.Set("User-Agent", "zksched-sensor")
	client := s.Client
	if client == nil {
		client = notify.OutboundClient(CheckTimeout, false)
	}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) && h.URLEnv != "" {
			// Keep a URL from the environment out of the log.
			return false, "", fmt.Errorf("GET $%s: %v", h.URLEnv, uerr.Err)
		}
		return false, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSensorBody))
	if err != nil {
		return false, "", fmt.Errorf("read the answer: %w", err)
	}
	e := h.Expect
	if e == nil {
		e = &workflow.SensorExpect{}
	}
	switch {
	case e.Status == 0 && (resp.StatusCode < 200 || resp.StatusCode > 299):
		return false, "", nil
	case e.Status != 0 && resp.StatusCode != e.Status:
		return false, "", nil
	case e.BodyContains != "" && !strings.Contains(string(body), e.BodyContains):
		return false, "", nil
	}
	if e.JSON != "" {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return false, "", fmt.Errorf("the answer is not JSON: %w", err)
		}
		if v == nil {
			v = map[string]any{}
		}
		got, err := workflow.Render(ctx, "expect.json", e.JSON, workflow.TemplateData{Params: t.Params, Upstream: t.Upstream, Item: t.Item, Assets: t.Assets, Body: v})
		if err != nil {
			return false, "", err
		}
		switch strings.TrimSpace(got) {
		case "true":
		case "false":
			return false, "", nil
		default:
			return false, "", fmt.Errorf("expect.json rendered %q; it must render true or false", strings.TrimSpace(got))
		}
	}
	return true, string(body), nil
}

func (s Sensor) checkSQL(ctx context.Context, q *workflow.SensorSQL) (bool, string, error) {
	dsn, err := s.env(q.DSNEnv)
	if err != nil {
		return false, "", err
	}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return false, "", fmt.Errorf("open $%s: %w", q.DSNEnv, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, q.Query)
	if err != nil {
		return false, "", fmt.Errorf("query: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return false, "", rows.Err()
	}
	cols, err := rows.Columns()
	if err != nil {
		return false, "", err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return false, "", fmt.Errorf("read the first row: %w", err)
	}
	var ok bool
	switch v := vals[0].(type) {
	case bool:
		ok = v
	case int64:
		ok = v != 0
	case []byte:
		ok, _ = strconv.ParseBool(string(v))
	case string:
		ok, _ = strconv.ParseBool(v)
	}
	return ok, strconv.FormatBool(ok), nil
}
