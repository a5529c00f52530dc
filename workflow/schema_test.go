package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// compiledSchema compiles Schema with a JSON Schema validator, which also checks that it is a
// valid schema of its dialect.
func compiledSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("workflow.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("workflow.schema.json")
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return s
}

// yamlAsJSON reads a workflow file as an editor's YAML support hands it to a JSON Schema
// validator: the YAML's values (aliases and merge keys resolved) as JSON.
func yamlAsJSON(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("read YAML: %v", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("YAML as JSON: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// schemaAt returns the schema of the mapping o.
func schemaAt(t *testing.T, o schemaObject) map[string]any {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(Schema(), &root); err != nil {
		t.Fatal(err)
	}
	if o.def == "" {
		return root
	}
	return root["$defs"].(map[string]any)[o.def].(map[string]any)
}

// TestSchemaFields checks that the schema has every field Parse reads and no other, at each
// mapping of the file, each with a description, and that the tables it is made from name
// real fields.
func TestSchemaFields(t *testing.T) {
	t.Parallel()
	// The keys each mapping's decoder accepts, as its messages list them.
	parsed := map[string][]string{
		"workflow": workflowFields, "task": fieldNames(), "step": stepFields, "tool": toolFields,
		"schedule": scheduleFields, "concurrency": concurrencyFields, "notify": notifyFields,
		"on-assets":     onAssetsFields,
		"retry-backoff": retryBackoffFields, "retry-on": retryOnFields,
		"trigger": triggerFields, "webhook": webhookFields,
		"http": sensorHTTPFields, "expect": sensorExpectFields, "sql": sensorSQLFields, "file": sensorFileFields,
		"time": sensorTimeFields, "workflow-run": sensorRunFields,
	}
	known := map[string]bool{}
	for _, o := range schemaObjects {
		var tags []string
		for f := range o.typ.Fields() {
			if key := yamlKey(f); key != "" {
				tags = append(tags, key)
			}
		}
		for alias, key := range o.aliases {
			if !slices.Contains(tags, key) {
				t.Errorf("%s: the alias %s names %s, which is no field", o.name(), alias, key)
			}
			tags = append(tags, alias)
		}
		props := schemaAt(t, o)["properties"].(map[string]any)
		if got := slices.Sorted(maps.Keys(props)); !slices.Equal(got, slices.Sorted(slices.Values(tags))) {
			t.Errorf("%s: the schema's properties are %v; the yaml tags of %s are %v", o.name(), got, o.typ, tags)
		}
		if want := slices.Sorted(slices.Values(parsed[o.name()])); !slices.Equal(slices.Sorted(slices.Values(tags)), want) {
			t.Errorf("%s: the yaml tags of %s are %v; the parser reads %v", o.name(), o.typ, tags, want)
		}
		for _, key := range tags {
			id := o.name() + "." + key
			known[id] = true
			if d, _ := props[key].(map[string]any)["description"].(string); d == "" {
				t.Errorf("%s has no description: add it to schemaDocs", id)
			}
		}
	}
	tables := map[string][]string{
		"schemaDocs":    slices.Collect(maps.Keys(schemaDocs)),
		"schemaEnums":   slices.Collect(maps.Keys(schemaEnums())),
		"schemaBounds":  slices.Collect(maps.Keys(schemaBounds)),
		"schemaNames":   slices.Collect(maps.Keys(schemaNames)),
		"typeRequired":  nil,
		"schemaObjects": nil,
	}
	for tt, fields := range typeRequired {
		if _, ok := lookupType(tt); !ok {
			t.Errorf("typeRequired names type %q, which is not in the registry", tt)
		}
		for _, f := range fields {
			tables["typeRequired"] = append(tables["typeRequired"], "task."+f)
		}
	}
	for _, o := range schemaObjects {
		for _, f := range o.required {
			tables["schemaObjects"] = append(tables["schemaObjects"], o.name()+"."+f)
		}
	}
	for table, ids := range tables {
		for _, id := range ids {
			if !known[id] {
				t.Errorf("%s names %s, which is no field of the file", table, id)
			}
		}
	}
}

// TestSchemaFieldsParse checks each field of the schema against the parser itself: the parser
// knows it, at the mapping where the schema has it, and both refuse a field they do not know.
func TestSchemaFieldsParse(t *testing.T) {
	t.Parallel()
	schema := compiledSchema(t)
	// Each mapping inside a workflow that parses, with FIELD where one more field goes.
	files := map[string]string{
		"workflow":      "name: w\ntasks: [{name: a, type: noop}]\nFIELD\n",
		"task":          "name: w\ntasks:\n  - name: a\n    type: noop\n    FIELD\n",
		"step":          "name: w\ntasks:\n  - name: a\n    type: agent\n    provider: p\n    steps:\n      - name: s\n        prompt: hi\n        FIELD\n",
		"tool":          "name: w\ntasks:\n  - name: a\n    type: agent\n    provider: p\n    prompt: hi\n    tools:\n      - name: t\n        description: d\n        type: shell\n        command: ./t.sh\n        FIELD\n",
		"schedule":      "name: w\ntasks: [{name: a, type: noop}]\nschedule:\n  cron: '@daily'\n  FIELD\n",
		"concurrency":   "name: w\ntasks: [{name: a, type: noop}]\nconcurrency:\n  key: '{{ .params.k }}'\n  FIELD\n",
		"on-assets":     "name: w\ntasks: [{name: a, type: noop}]\non-assets:\n  any: [a]\n  FIELD\n",
		"notify":        "name: w\ntasks: [{name: a, type: noop}]\nnotify:\n  - email: [ops@example.com]\n    on: [failure]\n    FIELD\n",
		"retry-backoff": "name: w\ntasks:\n  - name: a\n    type: noop\n    retry-backoff:\n      initial: 1s\n      FIELD\n",
		"retry-on":      "name: w\ntasks:\n  - name: a\n    type: noop\n    retry-on:\n      errors: [timeout]\n      FIELD\n",
		"trigger":       "name: w\ntasks: [{name: a, type: noop}]\ntriggers:\n  - webhook: {name: h, secret-env: S, signature: bearer}\n    FIELD\n",
		"webhook":       "name: w\ntasks: [{name: a, type: noop}]\ntriggers:\n  - webhook:\n      name: h\n      secret-env: S\n      signature: bearer\n      FIELD\n",
		"http":          "name: w\ntasks:\n  - name: a\n    type: sensor\n    http:\n      url-env: U\n      FIELD\n",
		"expect":        "name: w\ntasks:\n  - name: a\n    type: sensor\n    http:\n      url-env: U\n      expect:\n        status: 200\n        FIELD\n",
		"sql":           "name: w\ntasks:\n  - name: a\n    type: sensor\n    sql:\n      dsn-env: D\n      query: select true\n      FIELD\n",
		"file":          "name: w\ntasks:\n  - name: a\n    type: sensor\n    file:\n      path: /tmp/x\n      FIELD\n",
		"time":          "name: w\ntasks:\n  - name: a\n    type: sensor\n    time:\n      after: 1m\n      FIELD\n",
		"workflow-run":  "name: w\ntasks:\n  - name: a\n    type: sensor\n    workflow-run:\n      name: load\n      FIELD\n",
	}
	for _, o := range schemaObjects {
		file := files[o.name()]
		for key, prop := range schemaAt(t, o)["properties"].(map[string]any) {
			value := "~"
			if prop.(map[string]any)["type"] == "boolean" {
				value = "true"
			}
			_, err := Parse([]byte(strings.Replace(file, "FIELD", key+": "+value, 1)))
			if err != nil && strings.Contains(err.Error(), fmt.Sprintf("unknown field %q", key)) {
				t.Errorf("%s: the schema has field %s, the parser does not know it: %v", o.name(), key, err)
			}
		}
		data := []byte(strings.Replace(file, "FIELD", "no-such-field: 1", 1))
		if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), `unknown field "no-such-field"`) {
			t.Errorf("%s: the parser took an unknown field: %v", o.name(), err)
		}
		if err := schema.Validate(yamlAsJSON(t, data)); err == nil {
			t.Errorf("%s: the schema took an unknown field", o.name())
		}
		if _, err := Parse([]byte(strings.Replace(file, "FIELD", "", 1))); err != nil {
			t.Errorf("%s: the file without FIELD does not parse: %v", o.name(), err)
		}
	}
}

// schemaAccepts are files Parse reads, with the values and forms the schema must take as it
// does.
var schemaAccepts = map[string]string{
	"notify and deadlines": `
name: notified
deadline: 30m
notify:
  - {on: [failure, timeout, deadline], webhook-url-env: OPS_WEBHOOK}
  - {on: [success, task-failed], webhook-url-env: SLACK_WEBHOOK, slack: true, email: [ops@example.com]}
tasks:
  - {name: a, type: noop, deadline: 5m}
`,
	"every task type": `
name: types
params: {region: eu, port: 8080, day: 2026-11-01, on: true, empty: }
schedule: {cron: "0 2 * * *", timezone: Europe/Berlin, start: 2026-11-01, end: "2027-01-01T00:00:00Z", enabled: false, misfire: run-all, misfire-limit: 5}
max-active-instances: 2
when-full: skip
concurrency: {key: "{{ .params.region }}", max: 2, when-full: cancel-oldest}
timeout: 1h30m
priority: -5
tasks:
  - {name: a, type: shell, command: ./a.sh, workdir: /tmp, retries: 2, retry-interval: 30s, timeout: 10m, env: {X: 1}}
  - {name: b, type: llm, provider: local, prompt: "sum {{ .upstream.a }}", system: be brief, temperature: 0.2, max-tokens: 100, depends-on: [a]}
  - name: c
    type: agent
    provider: local
    temperature: 1
    steps:
      - {name: draft, prompt: write}
      - {name: review, wait: true, timeout: 1h, on-timeout: succeed}
  - {name: d, type: wait, timeout: 5m, on-timeout: succeed}
  - {name: e, type: workflow, workflow: child, version: 3, params: {day: "{{ .params.day }}"}}
  - {name: f, type: noop, depends-on: [a, b], trigger: any-failed, when: "{{ eq .params.region \"eu\" }}"}
  - {name: g, type: shell, command: "echo {{ .item }}", for-each: "[1, 2]", max-parallel: 1, pool: p.1, group: gpu_hosts, priority: 1000}
`,
	"empty values leave fields out": `
name: empty
description:
params:
schedule:
concurrency:
max-active-instances:
when-full:
timeout:
priority:
tasks:
  - name: a
    type: shell
    command: ./a.sh
    depends-on:
    retries:
    retry-interval:
    timeout:
    priority:
    group:
    pool:
    env:
    trigger:
    when:
    for-each:
    max-parallel:
    workdir:
  - {name: b, type: wait, on-timeout: }
`,
	"fields of other types left empty": `
name: foreign
tasks:
  - {name: a, type: llm, provider: p, prompt: hi, command: "", workdir: ~, steps: [], version: 0, params: {}, on-timeout: ""}
  - {name: b, type: wait, for-each: "", temperature: ~}
`,
	"retry policies": `
name: retried
tasks:
  - {name: a, type: shell, command: ./a.sh, retries: 5, retry-backoff: {initial: 10s, factor: 1.5, max: 5m, jitter: 0.2},
     retry-on: {exit-codes: [1, 75], errors: [timeout, killed]}, no-retry-on: {errors: [model-error]}}
  - {name: b, type: llm, provider: p, prompt: hi, retries: 2, retry-backoff: {initial: 1m}, retry-on: {errors: [rate-limit]}}
  - {name: c, type: noop, retry-backoff: {initial: 1s, factor: ~, max: ~, jitter: 0}, no-retry-on: {exit-codes: [2], errors: ~}}
`,
	"workflow sensors and a workflow task": `
name: waits
tasks:
  - {name: a, type: sensor, workflow: {name: load, state: ended, since: "{{ .run.created_at }}"}, timeout: 1h, on-timeout: skip}
  - {name: b, type: sensor, workflow-run: {name: load, state: ~, since: ~}}
  - {name: c, type: workflow, workflow: load}
  - {name: d, type: noop, workflow: ~, workflow-run: ~}
`,
	"scalars as text": `
name: 2026
tasks:
  - {name: 7, type: shell, command: 42, workdir: true, when: false, group: 1}
  - {name: a, type: noop, timeout: 0, retry-interval: +0, depends-on: [7]}
`,
}

// TestSchemaAcceptsWhatParses checks that the schema takes every workflow file that parses:
// the examples, the files of testdata and schemaAccepts.
func TestSchemaAcceptsWhatParses(t *testing.T) {
	t.Parallel()
	schema := compiledSchema(t)
	files := maps.Clone(schemaAccepts)
	paths, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	inTestdata, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(inTestdata) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, p := range append(paths, inTestdata...) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(data); err != nil {
			if strings.HasPrefix(p, "..") {
				t.Errorf("example %s does not parse: %v", p, err)
			}
			continue
		}
		files[p] = string(data)
	}
	for name, data := range files {
		if _, err := Parse([]byte(data)); err != nil {
			t.Errorf("%s does not parse: %v", name, err)
			continue
		}
		if err := schema.Validate(yamlAsJSON(t, []byte(data))); err != nil {
			t.Errorf("%s parses, but the schema refuses it: %v", name, err)
		}
	}
}

// TestSchemaRefusesWhatParseRefuses checks that the schema refuses files Parse refuses for
// their shape: unknown fields, values of the wrong kind, unknown types and policies, fields
// of another task type, missing fields.
func TestSchemaRefusesWhatParseRefuses(t *testing.T) {
	t.Parallel()
	schema := compiledSchema(t)
	task := func(fields string) string { return "name: w\ntasks:\n  - {name: a, " + fields + "}\n" }
	tests := map[string]string{
		"unknown workflow field":        "name: w\ntaks: []\n",
		"unknown task field":            task("type: shell, comand: ./x.sh"),
		"unknown step field":            task("type: agent, provider: p, steps: [{name: s, promt: hi}]"),
		"unknown schedule field":        "name: w\ntasks: [{name: a, type: noop}]\nschedule: {cron: '@daily', tz: UTC}\n",
		"unknown concurrency field":     "name: w\ntasks: [{name: a, type: noop}]\nconcurrency: {key: k, limit: 1}\n",
		"unknown task type":             task("type: bash, command: ls"),
		"no task type":                  task("command: ls"),
		"no workflow name":              "tasks: [{name: a, type: noop}]\n",
		"no tasks":                      "name: w\n",
		"tasks a mapping":               "name: w\ntasks: {a: b}\n",
		"task a scalar":                 "name: w\ntasks: [extract]\n",
		"name a list":                   "name: [a]\ntasks: [{name: a, type: noop}]\n",
		"command a list":                task("type: shell, command: [ls, -l]"),
		"command on an llm task":        task("type: llm, provider: p, prompt: hi, command: ls"),
		"prompt on a shell task":        task("type: shell, command: ls, prompt: hi"),
		"steps on a noop task":          task("type: noop, steps: [{name: s, prompt: hi}]"),
		"temperature on a wait task":    task("type: wait, temperature: 0.5"),
		"params on a shell task":        task("type: shell, command: ls, params: {a: b}"),
		"for-each on a wait task":       task("type: wait, for-each: '[1]'"),
		"shell task without command":    task("type: shell"),
		"llm task without prompt":       task("type: llm, provider: p"),
		"agent task without steps":      task("type: agent, provider: p"),
		"workflow task without name":    task("type: workflow"),
		"depends-on a string":           task("type: noop, depends-on: b"),
		"depends-on of mappings":        task("type: noop, depends-on: [{b: c}]"),
		"env a list":                    task("type: noop, env: [A=1]"),
		"env value a mapping":           task("type: noop, env: {A: {b: c}}"),
		"env name invalid":              task("type: noop, env: {1A: x}"),
		"params a string":               "name: w\nparams: region=eu\ntasks: [{name: a, type: noop}]\n",
		"param a list":                  "name: w\nparams: {region: [eu]}\ntasks: [{name: a, type: noop}]\n",
		"unknown param field":           "name: w\nparams: {n: {typ: integer}}\ntasks: [{name: a, type: noop}]\n",
		"unknown param type":            "name: w\nparams: {n: {type: int}}\ntasks: [{name: a, type: noop}]\n",
		"param required not a bool":     "name: w\nparams: {n: {required: yes}}\ntasks: [{name: a, type: noop}]\n",
		"unknown params-extra":          "name: w\nparams-extra: some\ntasks: [{name: a, type: noop}]\n",
		"retries not a number":          task("type: noop, retries: often"),
		"retries quoted":                task(`type: noop, retries: "2"`),
		"retries out of range":          task("type: noop, retries: 101"),
		"priority a float":              task("type: noop, priority: 1.5"),
		"duration without unit":         task("type: noop, timeout: 30"),
		"duration not a duration":       task("type: noop, retry-interval: soon"),
		"unknown trigger":               "name: w\ntasks: [{name: a, type: noop}, {name: b, type: noop, depends-on: [a], trigger: always}]\n",
		"unknown on-timeout":            task("type: wait, on-timeout: retry"),
		"unknown when-full":             "name: w\nmax-active-instances: 1\nwhen-full: drop\ntasks: [{name: a, type: noop}]\n",
		"unknown misfire":               "name: w\nschedule: {cron: '@daily', misfire: all}\ntasks: [{name: a, type: noop}]\n",
		"enabled not a bool":            "name: w\nschedule: {cron: '@daily', enabled: 1}\ntasks: [{name: a, type: noop}]\n",
		"enabled empty":                 "name: w\nschedule: {cron: '@daily', enabled: }\ntasks: [{name: a, type: noop}]\n",
		"wait not a bool":               task("type: agent, provider: p, steps: [{name: s, wait: yes please}]"),
		"temperature not a number":      task("type: llm, provider: p, prompt: hi, temperature: hot"),
		"concurrency a string":          "name: w\nconcurrency: thread\ntasks: [{name: a, type: noop}]\n",
		"concurrency without key":       "name: w\nconcurrency: {max: 2}\ntasks: [{name: a, type: noop}]\n",
		"unknown concurrency when-full": "name: w\nconcurrency: {key: '{{ .params.k }}', when-full: wait}\ntasks: [{name: a, type: noop}]\n",
		"retry-backoff a duration":      task("type: noop, retry-backoff: 10s"),
		"retry-backoff without initial": task("type: noop, retry-backoff: {factor: 2}"),
		"unknown retry-backoff field":   task("type: noop, retry-backoff: {initial: 1s, cap: 1m}"),
		"retry-backoff factor below 1":  task("type: noop, retry-backoff: {initial: 1s, factor: 0.5}"),
		"retry-backoff jitter above 1":  task("type: noop, retry-backoff: {initial: 1s, jitter: 1.5}"),
		"retry-backoff factor a string": task("type: noop, retry-backoff: {initial: 1s, factor: double}"),
		"retry-on a list":               task("type: noop, retry-on: [timeout]"),
		"unknown retry-on field":        task("type: noop, retry-on: {codes: [1]}"),
		"unknown error kind":            task("type: noop, retry-on: {errors: [oom]}"),
		"exit code 0":                   task("type: noop, no-retry-on: {exit-codes: [0]}"),
		"exit code 256":                 task("type: noop, retry-on: {exit-codes: [256]}"),
		"exit code a string":            task("type: noop, retry-on: {exit-codes: [one]}"),
		"a name under a sensor":         task("type: sensor, workflow: load"),
		"a mapping under a workflow":    task("type: workflow, workflow: {name: load}"),
		"a mapping under a noop":        task("type: noop, workflow: {name: load}"),
		"workflow-run on a wait task":   task("type: wait, workflow-run: {name: load}"),
		"workflow sensor without name":  task("type: sensor, workflow: {state: failed}"),
		"unknown workflow sensor state": task("type: sensor, workflow: {name: load, state: done}"),
		"unknown workflow sensor field": task("type: sensor, workflow-run: {name: load, after: 1h}"),
		"workflow sensor name invalid":  task("type: sensor, workflow: {name: 'a b'}"),
	}
	for name, data := range tests {
		if _, err := Parse([]byte(data)); err == nil {
			t.Errorf("%s: Parse took it", name)
		}
		if err := schema.Validate(yamlAsJSON(t, []byte(data))); err == nil {
			t.Errorf("%s: Parse refuses it, the schema takes it", name)
		} else if ve := (*jsonschema.ValidationError)(nil); !errors.As(err, &ve) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSchemaDurationPattern checks the schema's duration pattern against the parser's.
func TestSchemaDurationPattern(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(durationPattern)
	for _, s := range []string{"0", "+0", "-0", "30s", "1h30m", "1.5h", ".5s", "1.s", "100ms", "3us", "3µs", "3μs", "2ns",
		"-5m", "1h2m3s4ms", "30", "0.0", "1d", "1 h", "", "h", "1.5.5s", "s30", "00", "1H", "+-1s", "0s"} {
		_, err := parseDuration(s)
		if got, want := re.MatchString(s), err == nil; got != want {
			t.Errorf("%q: the pattern matches: %v; parseDuration reads it: %v", s, got, want)
		}
	}
}

// TestSchemaTypeRules checks the task schema's rule for each type against the registry: it
// limits exactly the fields of other types, and it requires only fields Parse requires.
func TestSchemaTypeRules(t *testing.T) {
	t.Parallel()
	var root map[string]any
	if err := json.Unmarshal(Schema(), &root); err != nil {
		t.Fatal(err)
	}
	rules := root["$defs"].(map[string]any)["task"].(map[string]any)["allOf"].([]any)
	if len(rules) != len(taskTypes) {
		t.Fatalf("the task schema has %d type rules; the registry has %d types", len(rules), len(taskTypes))
	}
	for i, tt := range taskTypes {
		rule := rules[i].(map[string]any)
		got := rule["if"].(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)["const"]
		if got != tt.name {
			t.Errorf("rule %d is for type %v, want %s", i, got, tt.name)
		}
		props := rule["then"].(map[string]any)["properties"].(map[string]any)
		for _, other := range taskTypes {
			for _, f := range other.fields {
				_, own := findField(tt.fields, f.name)
				if _, limited := props[f.name]; limited == own {
					t.Errorf("type %s: field %s of %s tasks: limited %v, own %v", tt.name, f.name, other.name, limited, own)
				}
			}
		}
	}
	// A task of each type with what it requires; without any one of it, Parse refuses it.
	complete := map[string]map[string]string{
		"shell":      {"command": "ls"},
		"llm":        {"provider": "p", "prompt": "hi"},
		"agent":      {"provider": "p"},
		TypeWorkflow: {"workflow": "child"},
	}
	for tt, required := range typeRequired {
		fields := complete[tt]
		if !slices.Equal(slices.Sorted(maps.Keys(fields)), slices.Sorted(slices.Values(required))) {
			t.Errorf("type %s requires %v; this test knows %v", tt, required, slices.Sorted(maps.Keys(fields)))
			continue
		}
		// A type with forms needs one of them besides (TestSchemaTypeForms checks them).
		form := ""
		if forms := typeForms[tt]; forms != nil {
			form = formYAML(formValues[tt], forms[0].fields)
		}
		for _, without := range append(required, "") {
			file := "name: w\ntasks:\n  - name: a\n    type: " + tt + "\n" + form
			for k, v := range fields {
				if k != without {
					file += "    " + k + ": " + v + "\n"
				}
			}
			_, err := Parse([]byte(file))
			if got, want := err == nil, without == ""; got != want {
				t.Errorf("type %s without %q: Parse error %v", tt, without, err)
			}
		}
	}
}

// formValues are values of the required fields and of the fields of the forms of each type
// in typeForms.
var formValues = map[string]map[string]string{
	"agent": {
		"provider":         "p",
		"steps":            "[{name: s, prompt: hi}]",
		"prompt":           "hi",
		"tools":            "[{name: t, description: d, type: shell, command: ./t.sh}]",
		"max-turns":        "5",
		"max-tool-calls":   "5",
		"max-total-tokens": "1000",
		"workdir":          ".",
		"output-format":    "json",
		"output-schema":    "{type: object}",
		"max-cost":         "0.5",
	},
}

// formYAML writes fields of a task with their values, as lines of the task's mapping.
func formYAML(values map[string]string, fields []string) string {
	var b strings.Builder
	for _, f := range fields {
		b.WriteString("    " + f + ": " + values[f] + "\n")
	}
	return b.String()
}

// TestSchemaTypeForms checks the forms of a type against Parse: a task of the type with the
// fields of one form (and its optional ones) is read by both; a field of the form missing, or
// a field of another form set besides, is refused by both.
func TestSchemaTypeForms(t *testing.T) {
	t.Parallel()
	schema := compiledSchema(t)
	check := func(name, file string, good bool) {
		t.Helper()
		_, perr := Parse([]byte(file))
		serr := schema.Validate(yamlAsJSON(t, []byte(file)))
		if (perr == nil) != good || (serr == nil) != good {
			t.Errorf("%s: want good %v; Parse: %v; the schema: %v\n%s", name, good, perr, serr, file)
		}
	}
	for tt, forms := range typeForms {
		values := formValues[tt]
		task := "name: w\ntasks:\n  - name: a\n    type: " + tt + "\n" + formYAML(values, typeRequired[tt])
		for i, form := range forms {
			for _, f := range slices.Concat(form.fields, form.optional) {
				if _, ok := values[f]; !ok {
					t.Fatalf("type %s: formValues has no value for %s", tt, f)
				}
			}
			name := fmt.Sprintf("%s with %v", tt, form.fields)
			check(name, task+formYAML(values, form.fields), true)
			check(name+" and its optional fields", task+formYAML(values, slices.Concat(form.fields, form.optional)), true)
			for _, without := range form.fields {
				rest := slices.DeleteFunc(slices.Clone(form.fields), func(f string) bool { return f == without })
				check(name+" without "+without, task+formYAML(values, rest), false)
			}
			for j, other := range forms {
				if j == i {
					continue
				}
				for _, f := range slices.Concat(other.fields, other.optional) {
					check(name+" and "+f, task+formYAML(values, append(slices.Clone(form.fields), f)), false)
				}
			}
		}
	}
}
