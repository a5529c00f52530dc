package workflow

import (
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
