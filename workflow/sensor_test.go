package workflow

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSensorParse(t *testing.T) {
	t.Parallel()
	spec, err := Parse([]byte(`
name: s
tasks:
  - name: ready
    type: sensor
    http: {url: "https://example.com/ready", expect: {status: 200, body-contains: ok, json: "{{ eq .body.state \"done\" }}"}}
    interval: 10s
    timeout: 1h
    on-timeout: skip
  - name: landed
    type: sensor
    file: {path: /data/in/ready, group: etl}
    mode: poke
  - name: loaded
    type: sensor
    sql: {dsn-env: WAREHOUSE_DSN, query: "SELECT count(*) > 0 FROM loads"}
  - name: later
    type: sensor
    time: {after: 5m}
`))
	if err != nil {
		t.Fatal(err)
	}
	ready, _ := spec.Task("ready")
	if got, want := ready.SensorKind(), "http"; got != want {
		t.Errorf("kind = %q; want %q", got, want)
	}
	if ready.HTTP.Expect.Status != 200 || ready.HTTP.Expect.BodyContains != "ok" || ready.SensorInterval() != 10*time.Second {
		t.Errorf("ready = %+v", ready)
	}
	landed, _ := spec.Task("landed")
	if landed.Group != "etl" || landed.Mode != SensorPoke || landed.SensorInterval() != DefaultSensorInterval {
		t.Errorf("landed: group %q, mode %q, interval %s; want etl, poke, the default", landed.Group, landed.Mode, landed.SensorInterval())
	}
	if later, _ := spec.Task("later"); later.Time.After != Duration(5*time.Minute) {
		t.Errorf("later.time.after = %s", later.Time.After)
	}
}

func TestSensorRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, task, want string
	}{
		{"no condition", "type: sensor", "needs exactly one condition"},
		{"two conditions", "type: sensor\n    time: {after: 1m}\n    file: {path: /x}", "exactly one condition, not file and time"},
		{"url and url-env", "type: sensor\n    http: {url: 'http://x/', url-env: U}", "exactly one of url and url-env"},
		{"bad url", "type: sensor\n    http: {url: 'ftp://x/'}", `url "ftp://x/" is not an http or https address`},
		{"bad url-env", "type: sensor\n    http: {url-env: 'a-b'}", `url-env "a-b" is not an environment variable name`},
		{"bad status", "type: sensor\n    http: {url: 'http://x/', expect: {status: 42}}", "expect.status 42 is not an HTTP status"},
		{"bad json template", "type: sensor\n    http: {url: 'http://x/', expect: {json: '{{ .body'}}", "expect.json"},
		{"unknown http key", "type: sensor\n    http: {url: 'http://x/', method: POST}", `unknown field "method" in task "a": http`},
		{"unknown expect key", "type: sensor\n    http: {url: 'http://x/', expect: {code: 200}}", `unknown field "code"`},
		{"no query", "type: sensor\n    sql: {dsn-env: D}", "sql: query is required"},
		{"dsn in the file", "type: sensor\n    sql: {dsn-env: 'postgres://u:p@h/db', query: select true}", "is not an environment variable name"},
		{"no path", "type: sensor\n    file: {group: etl}", "file: path is required"},
		{"two groups", "type: sensor\n    group: a\n    file: {path: /x, group: b}", `group "b" is not the task's group "a"`},
		{"at and after", "type: sensor\n    time: {at: '2026-12-01T06:00:00Z', after: 1m}", "exactly one of at and after"},
		{"bad at", "type: sensor\n    time: {at: tomorrow}", `at "tomorrow" is not an RFC 3339 time`},
		{"bad duration", "type: sensor\n    time: {after: 5}", "is not a duration"},
		{"bad mode", "type: sensor\n    time: {after: 1m}\n    mode: push", `mode "push" is unknown`},
		{"short interval", "type: sensor\n    time: {after: 1m}\n    interval: 10ms", "interval 10ms is shorter than the minimum of 1s"},
		{"bad on-timeout", "type: sensor\n    time: {after: 1m}\n    on-timeout: retry", `on-timeout "retry" is unknown: use fail, skip or succeed`},
		{"retries", "type: sensor\n    time: {after: 1m}\n    retries: 2", "so it has no retries"},
		{"skip on a wait", "type: wait\n    on-timeout: skip", `on-timeout "skip" is unknown`},
		{"sensor field on shell", "type: shell\n    command: 'true'\n    interval: 1m", "interval is a field of sensor tasks"},
		{"workflow name missing", "type: sensor\n    workflow: {state: failed}", `task "a": workflow: name is required`},
		{"workflow name invalid", "type: sensor\n    workflow: {name: 'a b'}", `workflow: name "a b" is invalid`},
		{"workflow state unknown", "type: sensor\n    workflow: {name: load, state: done}", `workflow: state "done" is unknown: use succeeded, failed, stopped, ended`},
		{"workflow unknown key", "type: sensor\n    workflow: {name: load, after: 1h}", `unknown field "after" in task "a": workflow`},
		{"workflow-run unknown key", "type: sensor\n    workflow-run: {name: load, sice: x}", `unknown field "sice" in task "a": workflow-run (did you mean "since"?)`},
		{"workflow since template", "type: sensor\n    workflow:\n      name: load\n      since: '{{ .params'", `task "a": workflow: since is not a valid template`},
		{"workflow since unknown ref", "type: sensor\n    workflow: {name: load, since: '{{ .upstream.b.output }}'}", `refers to task "b"`},
		{"workflow since bad run field", "type: sensor\n    workflow: {name: load, since: '{{ .run.day }}'}", `.run.day: the run has only .id, .created_at, .started_at`},
		{"run outside since", "type: llm\n    provider: p\n    prompt: '{{ .run.id }}'", `only a workflow sensor's since has .run`},
		{"workflow and time", "type: sensor\n    time: {after: 1m}\n    workflow: {name: load}", "exactly one condition, not time and workflow"},
		{"workflow interval", "type: sensor\n    workflow: {name: load}\n    interval: 1m", "not checked every interval: leave interval out"},
		{"workflow mode", "type: sensor\n    workflow: {name: load}\n    mode: poke", "waits on no worker, holding no slot: leave mode out"},
		{"workflow a list", "type: sensor\n    workflow: [load]", `task "a": workflow must be a string, or a sensor's mapping, not a list`},
		{"a name under a sensor", "type: sensor\n    workflow: load", `task "a": workflow "load": a sensor waits for a run of another workflow named in a mapping, like workflow: {name: load, state: succeeded}`},
		{"a mapping under a workflow task", "type: workflow\n    workflow: {name: load}", `task "a": workflow: a mapping (name, state, since) is the condition of a sensor task, not of a workflow task`},
		{"a mapping under a noop", "type: noop\n    workflow: {name: load}", `task "a": workflow: a mapping (name, state, since) is the condition of a sensor task, not of a noop task`},
		{"workflow-run on a shell task", "type: shell\n    command: 'true'\n    workflow-run: {name: load}", "the condition of a sensor task, not of a shell task"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte("name: w\ntasks:\n  - name: a\n    " + c.task + "\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse error = %v; want one containing %q", err, c.want)
			}
		})
	}
}

// TestSensorWorkflowParse reads a workflow sensor in both spellings, workflow: (the mapping)
// and workflow-run:, into the same condition, stored as workflow-run, and checks what its
// state and since mean.
func TestSensorWorkflowParse(t *testing.T) {
	t.Parallel()
	spec, err := Parse([]byte(`
name: report
params: {day: "2026-11-28"}
tasks:
  - name: orders-loaded
    type: sensor
    workflow: {name: load-orders, since: "{{ .params.day }}T00:00:00Z"}
    timeout: 6h
    on-timeout: skip
  - name: any-end
    type: sensor
    workflow-run: {name: load-orders, state: ended}
  - {name: child, type: workflow, workflow: digest}
`))
	if err != nil {
		t.Fatal(err)
	}
	loaded, _ := spec.Task("orders-loaded")
	if got, want := loaded.SensorKind(), "workflow"; got != want {
		t.Errorf("kind = %q; want %q", got, want)
	}
	if loaded.Workflow != "" || loaded.WorkflowRun == nil || loaded.WorkflowRun.Name != "load-orders" {
		t.Fatalf("orders-loaded: workflow %q, workflow-run %+v", loaded.Workflow, loaded.WorkflowRun)
	}
	if got := loaded.WorkflowRun.RunStates(); !slices.Equal(got, []string{"succeeded"}) {
		t.Errorf("default states = %v; want [succeeded]", got)
	}
	anyEnd, _ := spec.Task("any-end")
	if got := anyEnd.WorkflowRun.RunStates(); !slices.Equal(got, []string{"succeeded", "failed", "stopped"}) {
		t.Errorf("ended = %v; want every final state", got)
	}
	if child, _ := spec.Task("child"); child.Workflow != "digest" || child.WorkflowRun != nil {
		t.Errorf("child: workflow %q, workflow-run %+v", child.Workflow, child.WorkflowRun)
	}
	raw, err := json.Marshal(loaded)
	if err != nil || !strings.Contains(string(raw), `"workflow-run":{"name":"load-orders"`) || strings.Contains(string(raw), `"workflow":`) {
		t.Errorf("stored as %s, %v; want workflow-run alone", raw, err)
	}

	ctx := context.Background()
	created := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	since, err := loaded.SinceTime(ctx, TemplateData{Params: map[string]string{"day": "2026-11-27"}}, created)
	if want := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC); err != nil || !since.Equal(want) {
		t.Errorf("since = %v, %v; want %v", since, err, want)
	}
	if since, err := anyEnd.SinceTime(ctx, TemplateData{}, created); err != nil || !since.Equal(created) {
		t.Errorf("since by default = %v, %v; want the run's creation %v", since, err, created)
	}
	if _, err := loaded.SinceTime(ctx, TemplateData{Params: map[string]string{"day": "soon"}}, created); err == nil ||
		!strings.Contains(err.Error(), `task "orders-loaded": since renders "soonT00:00:00Z", which is not an RFC 3339 time`) {
		t.Errorf("a since that is no time: %v", err)
	}
	byRun := Task{Name: "s", WorkflowRun: &SensorWorkflow{Name: "x", Since: "{{ .run.started_at }}"}}
	started := created.Add(time.Minute)
	if since, err := byRun.SinceTime(ctx, TemplateData{Run: &RunInput{ID: 7, CreatedAt: created, StartedAt: &started}}, created); err != nil || !since.Equal(started) {
		t.Errorf("since from .run.started_at = %v, %v; want %v", since, err, started)
	}
}
