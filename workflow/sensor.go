package workflow

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// TypeSensor is the type of a task that waits until a condition holds: an HTTP answer, a SQL
// query, a file, a time. Each check is a short attempt on a worker of the task's group; in
// the default mode (SensorReschedule) the task waits between checks, holding no slot, and the
// masters queue it again when its next check is due.
const TypeSensor = "sensor"

// The modes of a sensor.
const (
	// SensorReschedule ends each check's attempt: between checks the task is waiting and
	// holds no worker slot (the default).
	SensorReschedule = "reschedule"
	// SensorPoke keeps one attempt, and its slot, checking in a loop until the condition
	// holds or the timeout passes.
	SensorPoke = "poke"
)

// OnTimeoutSkip skips a sensor whose timeout passed, and with it the tasks its skip does not
// trigger.
const OnTimeoutSkip = "skip"

// The paused steps and the checkpoint of a sensor's attempts (see executor.Sensor).
const (
	// SensorStep is the paused step of a sensor waiting for its next check: its timeout
	// queues it again.
	SensorStep = "sensor"
	// SensorTimeoutStep is the paused step of a sensor past its timeout whose on-timeout is
	// skip: its timeout ends it skipped.
	SensorTimeoutStep = "sensor-timeout"
	// SensorStateStep is the checkpoint that keeps a sensor's first check and next due time
	// across its attempts.
	SensorStateStep = "sensor-state"
)

// Bounds of a sensor's interval.
const (
	// DefaultSensorInterval is the wait between checks of a sensor that names none.
	DefaultSensorInterval = 30 * time.Second
	// MinSensorInterval is the shortest interval: a shorter one would make the sensor a
	// busy loop over the database and the target.
	MinSensorInterval = time.Second
)

// SensorHTTP is an http sensor: true when a GET of the URL answers as Expect says.
type SensorHTTP struct {
	// URL is the address, http or https; URLEnv names the worker's environment variable that
	// holds it instead (for an address with a secret in it). Exactly one of them.
	URL    string `json:"url,omitempty" yaml:"url,omitempty"`
	URLEnv string `json:"url-env,omitempty" yaml:"url-env,omitempty"`
	// Expect is what the answer must be; nil means a 2xx status.
	Expect *SensorExpect `json:"expect,omitempty" yaml:"expect,omitempty"`
}

// SensorExpect is what an http sensor's answer must be for the sensor to be true: every
// condition set holds.
type SensorExpect struct {
	// Status is the status the answer must have; 0 means any 2xx.
	Status int `json:"status,omitempty" yaml:"status,omitempty"`
	// BodyContains is a text the body must contain.
	BodyContains string `json:"body-contains,omitempty" yaml:"body-contains,omitempty"`
	// JSON is a template over the params, the upstream outputs and the body read as JSON
	// (.body) that must render true.
	JSON string `json:"json,omitempty" yaml:"json,omitempty"`
}

// SensorSQL is a sql sensor: true when the first column of the query's first row is true.
type SensorSQL struct {
	// DSNEnv names the worker's environment variable that holds the PostgreSQL connection
	// string; a DSN is a credential, so it is never written in the file.
	DSNEnv string `json:"dsn-env" yaml:"dsn-env"`
	Query  string `json:"query" yaml:"query"`
}

// SensorFile is a file sensor: true when the path exists on the worker that checks it.
type SensorFile struct {
	Path string `json:"path" yaml:"path"`
	// Group is the worker group whose workers check the file (the ones that see it); empty
	// means the task's group.
	Group string `json:"group,omitempty" yaml:"group,omitempty"`
}

// SensorTime is a time sensor: true from a time on, At or After, exactly one of them.
type SensorTime struct {
	// At is an RFC 3339 time, such as 2026-12-01T06:00:00Z.
	At string `json:"at,omitempty" yaml:"at,omitempty"`
	// After is how long after the sensor's first check it becomes true.
	After Duration `json:"after,omitempty" yaml:"after,omitempty"`
}

// SensorWorkflow is a workflow sensor: true once a run of another workflow has ended in State
// at or after Since (Airflow's ExternalTaskSensor). It waits on no worker: the statement that
// ends such a run ends the sensor too, and the run is its output.
type SensorWorkflow struct {
	// Name is the workflow whose runs it waits for; it need not be stored yet.
	Name string `json:"name" yaml:"name"`
	// State is the end the run must have: one of SensorWorkflowStates; empty means
	// RunSucceeded.
	State string `json:"state,omitempty" yaml:"state,omitempty"`
	// Since is a template over the params, the upstream outputs and the run (.run) that
	// renders an RFC 3339 time: the run must have ended at or after it. Empty means the
	// waiting run's creation (its submission).
	Since string `json:"since,omitempty" yaml:"since,omitempty"`
}

// The ends a workflow sensor may wait for: the final states of a workflow instance, or any.
const (
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunStopped   = "stopped"
	// RunEnded is any final state.
	RunEnded = "ended"
)

// SensorWorkflowStates returns the values of a workflow sensor's state.
func SensorWorkflowStates() []string { return []string{RunSucceeded, RunFailed, RunStopped, RunEnded} }

// WorkflowRunStep is the prefix of the paused step of a workflow sensor: it waits at
// workflow-run:NAME.
const WorkflowRunStep = "workflow-run:"

// RunStates returns the final states of a workflow instance the sensor w waits for.
func (w *SensorWorkflow) RunStates() []string {
	switch w.State {
	case RunEnded:
		return []string{RunSucceeded, RunFailed, RunStopped}
	case "":
		return []string{RunSucceeded}
	}
	return []string{w.State}
}

// sensorFields are the fields of a sensor task. on-timeout is the wait task's field too.
var sensorFields = []field{
	{name: "http", decode: func(d *decoder, v *yaml.Node, t *Task, where string) { t.HTTP = d.sensorHTTP(v, where) },
		isSet: func(t *Task) bool { return t.HTTP != nil }},
	{name: "sql", decode: func(d *decoder, v *yaml.Node, t *Task, where string) { t.SQL = d.sensorSQL(v, where) },
		isSet: func(t *Task) bool { return t.SQL != nil }},
	{name: "file", decode: func(d *decoder, v *yaml.Node, t *Task, where string) { t.File = d.sensorFile(v, where) },
		isSet: func(t *Task) bool { return t.File != nil }},
	{name: "time", decode: func(d *decoder, v *yaml.Node, t *Task, where string) { t.Time = d.sensorTime(v, where) },
		isSet: func(t *Task) bool { return t.Time != nil }},
	{name: "workflow-run", decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
		t.WorkflowRun = d.sensorWorkflow(v, where, "workflow-run")
	}, isSet: func(t *Task) bool { return t.WorkflowRun != nil }},
	durationField("interval", func(t *Task) *Duration { return &t.Interval }),
	stringField("mode", func(t *Task) *string { return &t.Mode }),
	onTimeoutField,
}

// onTimeoutField is what a wait task or a sensor comes to at its timeout.
var onTimeoutField = stringField("on-timeout", func(t *Task) *string { return &t.OnTimeout })

// sensorKinds are the keys of a sensor's condition, one of which it has; a workflow sensor's
// is workflow: (or workflow-run:).
var sensorKinds = []string{"http", "sql", "file", "time", "workflow"}

// The keys of the mappings of a sensor's condition.
var (
	sensorHTTPFields   = []string{"url", "url-env", "expect"}
	sensorExpectFields = []string{"status", "body-contains", "json"}
	sensorSQLFields    = []string{"dsn-env", "query"}
	sensorFileFields   = []string{"path", "group"}
	sensorTimeFields   = []string{"at", "after"}
	sensorRunFields    = []string{"name", "state", "since"}
)

// SensorKind returns which condition the sensor t has ("http", "sql", "file", "time" or
// "workflow"), "" for none.
func (t *Task) SensorKind() string {
	if kinds := t.sensorKinds(); len(kinds) > 0 {
		return kinds[0]
	}
	return ""
}

// sensorKinds returns the conditions the task t has, in sensorKinds' order.
func (t *Task) sensorKinds() []string {
	var kinds []string
	for _, k := range sensorKinds {
		set := false
		switch k {
		case "http":
			set = t.HTTP != nil
		case "sql":
			set = t.SQL != nil
		case "file":
			set = t.File != nil
		case "time":
			set = t.Time != nil
		case "workflow":
			set = t.WorkflowRun != nil
		}
		if set {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// SensorInterval returns the sensor's interval with the default applied.
func (t *Task) SensorInterval() time.Duration {
	if t.Interval == 0 {
		return DefaultSensorInterval
	}
	return time.Duration(t.Interval)
}

// checkSensor checks a sensor task: exactly one condition, each well formed, and its mode,
// interval and on-timeout. Its checks are retried by its interval, so retries mean nothing.
func checkSensor(t *Task) []problem {
	var probs []problem
	add := func(field, format string, args ...any) {
		probs = append(probs, problem{field: field, msg: fmt.Sprintf(format, args...)})
	}
	kinds := t.sensorKinds()
	switch len(kinds) {
	case 0:
		add("type", "a sensor task needs exactly one condition: http, sql, file, time or workflow")
	case 1:
	default:
		field := kinds[1]
		if field == "workflow" {
			field = "workflow-run"
		}
		add(field, "a sensor task has exactly one condition, not %s", strings.Join(kinds, " and "))
	}
	if h := t.HTTP; h != nil {
		switch {
		case (h.URL == "") == (h.URLEnv == ""):
			add("http", "http: give exactly one of url and url-env")
		case h.URLEnv != "" && !envRE.MatchString(h.URLEnv):
			add("http", "http: url-env %s is not an environment variable name: %s", quote(h.URLEnv), envRule)
		case h.URL != "":
			if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add("http", "http: url %s is not an http or https address", quote(h.URL))
			}
		}
		if e := h.Expect; e != nil {
			if e.Status != 0 && (e.Status < 100 || e.Status > 599) {
				add("http", "http: expect.status %d is not an HTTP status (100..599)", e.Status)
			}
			if e.JSON != "" {
				tmpl, err := parseTemplate("expect.json", e.JSON)
				if err == nil {
					err = staticProblem(tmpl)
				}
				if err != nil {
					add("http", "http: expect.json: %v", err)
				}
			}
		}
	}
	if s := t.SQL; s != nil {
		if !envRE.MatchString(s.DSNEnv) {
			add("sql", "sql: dsn-env %s is not an environment variable name: %s", quote(s.DSNEnv), envRule)
		}
		if strings.TrimSpace(s.Query) == "" {
			add("sql", "sql: query is required")
		}
	}
	if f := t.File; f != nil {
		if f.Path == "" {
			add("file", "file: path is required")
		}
		switch {
		case f.Group != "" && !groupRE.MatchString(f.Group):
			add("file", "file: group %s is invalid: 1 to 128 letters, digits, '_', '.' or '-'", quote(f.Group))
		case f.Group != "" && t.Group != f.Group:
			add("file", "file: group %s is not the task's group %s: the file is checked by a worker of its group; leave one of them out", quote(f.Group), quote(t.Group))
		}
	}
	if tm := t.Time; tm != nil {
		switch {
		case (tm.At == "") == (tm.After == 0):
			add("time", "time: give exactly one of at and after")
		case tm.At != "":
			if _, err := time.Parse(time.RFC3339, tm.At); err != nil {
				add("time", "time: at %s is not an RFC 3339 time such as 2026-12-01T06:00:00Z", quote(tm.At))
			}
		case tm.After < 0:
			add("time", "time: after %s is negative", tm.After)
		}
	}
	if w := t.WorkflowRun; w != nil {
		probs = append(probs, checkSensorWorkflow(t, w)...)
	}
	if t.Mode != "" && t.Mode != SensorReschedule && t.Mode != SensorPoke {
		add("mode", "mode %s is unknown: use %s or %s", quote(t.Mode), SensorReschedule, SensorPoke)
	}
	if t.Interval != 0 && time.Duration(t.Interval) < MinSensorInterval {
		add("interval", "interval %s is shorter than the minimum of %s", t.Interval, MinSensorInterval)
	}
	if t.Timeout < 0 {
		add("timeout", "timeout %s is negative", t.Timeout)
	}
	switch t.OnTimeout {
	case "", OnTimeoutFail, OnTimeoutSkip, OnTimeoutSucceed:
	default:
		add("on-timeout", "on-timeout %s is unknown: use %s, %s or %s", quote(t.OnTimeout), OnTimeoutFail, OnTimeoutSkip, OnTimeoutSucceed)
	}
	if t.Retries != 0 {
		add("retries", "a sensor checks again every interval until its timeout, so it has no retries")
	}
	return probs
}

// checkSensorWorkflow checks the condition w of the workflow sensor t: the workflow's name,
// the state and the since template. The workflow need not be stored: a run of it may be
// submitted once it is. A workflow sensor waits on no worker and is not checked by interval,
// so interval and mode mean nothing.
func checkSensorWorkflow(t *Task, w *SensorWorkflow) []problem {
	const field = "workflow-run"
	var probs []problem
	add := func(f, format string, args ...any) {
		probs = append(probs, problem{field: f, msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case w.Name == "":
		add(field, "workflow: name is required: the workflow whose run the sensor waits for")
	case !nameRE.MatchString(w.Name):
		add(field, "workflow: name %s is invalid: %s", quote(w.Name), nameRule)
	}
	if w.State != "" && !slices.Contains(SensorWorkflowStates(), w.State) {
		add(field, "workflow: state %s is unknown: use %s", quote(w.State), strings.Join(SensorWorkflowStates(), ", "))
	}
	if w.Since != "" {
		probs = append(probs, checkTemplate(t, field, "workflow: since", w.Since, nil)...)
	}
	if t.Interval != 0 {
		add("interval", "a workflow sensor is ended by the end of the run it waits for, not checked every interval: leave interval out")
	}
	if t.Mode != "" {
		add("mode", "a workflow sensor waits on no worker, holding no slot: leave mode out")
	}
	if t.Pool != "" {
		add("pool", "a workflow sensor runs nowhere, so it takes no place in a pool")
	}
	return probs
}

// workflowKeyProblem is the problem of a task whose workflow key holds what another type
// reads: a mapping (a sensor's condition) on a task that is not a sensor, or a name (a
// workflow task's) on a sensor. ok is false for neither.
func workflowKeyProblem(t *Task) (p problem, ok bool) {
	switch {
	case t.Type == TypeSensor && t.Workflow != "":
		return problem{field: "workflow", msg: fmt.Sprintf("workflow %s: a sensor waits for a run of another workflow "+
			"named in a mapping, like workflow: {name: %s, state: succeeded}; a name alone is what a workflow task starts",
			quote(t.Workflow), t.Workflow)}, true
	case t.Type != TypeSensor && t.WorkflowRun != nil:
		return problem{field: "workflow-run", msg: fmt.Sprintf("workflow: a mapping (name, state, since) is the condition of a sensor task, "+
			"not of %s task; a workflow task names the workflow it starts, workflow: NAME", aType(t.Type))}, true
	}
	return problem{}, false
}

func (d *decoder) sensorWorkflow(v *yaml.Node, where, key string) *SensorWorkflow {
	w := &SensorWorkflow{}
	ok := d.sensorMapping(v, where, key, "{name: load-orders, state: succeeded}",
		sensorRunFields, func(k string, v *yaml.Node, what string) bool {
			switch k {
			case "name":
				w.Name, _ = d.scalar(v, what, "a string")
			case "state":
				w.State, _ = d.scalar(v, what, "a string")
			case "since":
				w.Since, _ = d.scalar(v, what, "a string")
			default:
				return false
			}
			return true
		})
	if !ok {
		return nil
	}
	return w
}

// SinceTime renders the since of the workflow sensor t over data, and reads it as an RFC 3339
// time; empty means def.
func (t *Task) SinceTime(ctx context.Context, data TemplateData, def time.Time) (time.Time, error) {
	w := t.WorkflowRun
	if w == nil || w.Since == "" {
		return def, nil
	}
	s, err := Render(ctx, "workflow: since", w.Since, data)
	if err != nil {
		return time.Time{}, fmt.Errorf("task %s: %w", quote(t.Name), err)
	}
	s = strings.TrimSpace(s)
	since, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("task %s: since renders %s, which is not an RFC 3339 time such as 2026-12-01T06:00:00Z",
			quote(t.Name), quote(clip(s)))
	}
	return since, nil
}

// sensorMapping reads the mapping of a sensor's condition key name into fields: set is
// called with each key and its value, and reports whether it knows the key.
func (d *decoder) sensorMapping(v *yaml.Node, where, name, example string, keys []string, set func(key string, v *yaml.Node, what string) bool) bool {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return false
	}
	what := where + ": " + name
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must be a mapping, like %s, not %s", what, example, kindName(v))
		return false
	}
	for _, kv := range d.mapping(v, what) {
		key := kv.key.Value
		d.taskField(name+"."+key, kv.key.Line)
		if !set(key, kv.value, what+": "+key) {
			d.errorf(kv.key.Line, "unknown field %s in %s%s", quote(key), what, didYouMean(key, keys))
		}
	}
	return true
}

func (d *decoder) sensorHTTP(v *yaml.Node, where string) *SensorHTTP {
	h := &SensorHTTP{}
	ok := d.sensorMapping(v, where, "http", "{url: https://example.com/ready, expect: {status: 200}}",
		sensorHTTPFields, func(key string, v *yaml.Node, what string) bool {
			switch key {
			case "url":
				h.URL, _ = d.scalar(v, what, "a string")
			case "url-env":
				h.URLEnv, _ = d.scalar(v, what, "a string")
			case "expect":
				h.Expect = d.sensorExpect(v, what)
			default:
				return false
			}
			return true
		})
	if !ok {
		return nil
	}
	return h
}

func (d *decoder) sensorExpect(v *yaml.Node, what string) *SensorExpect {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must be a mapping, like {status: 200, body-contains: ready}, not %s", what, kindName(v))
		return nil
	}
	e := &SensorExpect{}
	for _, kv := range d.mapping(v, what) {
		key := kv.key.Value
		switch key {
		case "status":
			e.Status, _ = d.intValue(kv.value, what+": status")
		case "body-contains":
			e.BodyContains, _ = d.scalar(kv.value, what+": body-contains", "a string")
		case "json":
			e.JSON, _ = d.scalar(kv.value, what+": json", "a string")
		default:
			d.errorf(kv.key.Line, "unknown field %s in %s%s", quote(key), what, didYouMean(key, sensorExpectFields))
		}
	}
	return e
}

func (d *decoder) sensorSQL(v *yaml.Node, where string) *SensorSQL {
	s := &SensorSQL{}
	ok := d.sensorMapping(v, where, "sql", "{dsn-env: WAREHOUSE_DSN, query: \"SELECT count(*) > 0 FROM loads\"}",
		sensorSQLFields, func(key string, v *yaml.Node, what string) bool {
			switch key {
			case "dsn-env":
				s.DSNEnv, _ = d.scalar(v, what, "a string")
			case "query":
				s.Query, _ = d.scalar(v, what, "a string")
			default:
				return false
			}
			return true
		})
	if !ok {
		return nil
	}
	return s
}

func (d *decoder) sensorFile(v *yaml.Node, where string) *SensorFile {
	f := &SensorFile{}
	ok := d.sensorMapping(v, where, "file", "{path: /data/in/ready, group: etl}",
		sensorFileFields, func(key string, v *yaml.Node, what string) bool {
			switch key {
			case "path":
				f.Path, _ = d.scalar(v, what, "a string")
			case "group":
				f.Group, _ = d.scalar(v, what, "a string")
			default:
				return false
			}
			return true
		})
	if !ok {
		return nil
	}
	return f
}

func (d *decoder) sensorTime(v *yaml.Node, where string) *SensorTime {
	tm := &SensorTime{}
	ok := d.sensorMapping(v, where, "time", "{after: 1h} or {at: 2026-12-01T06:00:00Z}",
		sensorTimeFields, func(key string, v *yaml.Node, what string) bool {
			switch key {
			case "at":
				tm.At, _ = d.scalar(v, what, "a string")
			case "after":
				if dur, ok := d.durationValue(v, what); ok {
					tm.After = Duration(dur)
				}
			default:
				return false
			}
			return true
		})
	if !ok {
		return nil
	}
	return tm
}
