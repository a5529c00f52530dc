package workflow

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestParseToolAgent reads a tool-calling agent: its prompt, its loop's bounds and its tools,
// with their arguments schemas as encoding/json would read them, and checks that the stored
// form reads back the same and still validates.
func TestParseToolAgent(t *testing.T) {
	t.Parallel()
	s, err := ParseFile(filepath.Join("testdata", "agent-tools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := s.Task("plan")
	if plan.Prompt != "Plan a day in {{ .params.city }} with the stations in {{ .upstream.fetch.output }}." ||
		plan.System != "You plan bicycle trips." || plan.MaxTurns != 8 || plan.MaxToolCalls != 20 || plan.MaxTotalTokens != 50000 || plan.Workdir != "/srv/bikes" {
		t.Errorf("plan = %+v", plan)
	}
	want := []Tool{
		{Name: "weather", Description: "The forecast of a city for a day.", Type: ToolShell, Command: "./weather.sh",
			Idempotent: true, Timeout: Duration(30 * time.Second), Arguments: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"city":  map[string]any{"type": "string", "minLength": 1.0},
					"day":   map[string]any{"type": "string", "format": "date", "examples": []any{"2026-11-01"}},
					"hours": map[string]any{"type": "integer", "minimum": 1.0, "maximum": 24.0},
					"units": map[string]any{"enum": []any{"metric", "imperial", "true"}},
				},
				"required":             []any{"city"},
				"additionalProperties": false,
			}},
		{Name: "book", Description: "Books a bicycle; each call books one.", Type: ToolShell,
			Command: `./book.sh "$ZKSCHED_TOOL_CALL_ID"`, OnInterrupted: OnInterruptedFail, Arguments: map[string]any{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type":    "object",
				"$defs":   map[string]any{"station": map[string]any{"type": "string", "pattern": "^[A-Z]{3}[0-9]+$"}},
				"properties": map[string]any{
					"from":  map[string]any{"$ref": "#/$defs/station"},
					"to":    map[string]any{"$ref": "#/$defs/station"},
					"bikes": map[string]any{"type": "integer", "minimum": 1.0, "default": 1.0},
					"notes": map[string]any{"type": []any{"string", "null"}},
				},
				"required": []any{"from", "to"},
			}},
		{Name: "now", Description: "The time now.", Type: ToolShell, Command: "date -Is"},
	}
	if !reflect.DeepEqual(plan.Tools, want) {
		t.Errorf("tools:\ngot  %#v\nwant %#v", plan.Tools, want)
	}
	if got := []string{want[0].Interrupted(), want[1].Interrupted(), want[2].Interrupted()}; !slices.Equal(got,
		[]string{OnInterruptedRetry, OnInterruptedFail, OnInterruptedAsk}) {
		t.Errorf("Interrupted() = %v", got)
	}

	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, s) {
		t.Errorf("JSON round trip changed the spec:\n%s", raw)
	}
	if err := back.Validate(); err != nil {
		t.Errorf("Validate of the stored spec: %v", err)
	}
}

// TestParseToolAgentArguments: the arguments schema is kept as JSON has it, and a value JSON
// has no form for is refused where it is.
func TestParseToolAgentArguments(t *testing.T) {
	t.Parallel()
	agent := func(arguments ...string) string {
		return wf(append([]string{
			"  - name: a",
			"    type: agent",
			"    provider: p",
			"    prompt: hi",
			"    tools:",
			"      - name: t",
			"        description: d",
			"        type: shell",
			"        command: ./t.sh",
			"        arguments:",
		}, arguments...)...)
	}
	good := map[string]struct {
		yaml string
		want map[string]any
	}{
		"empty":            {agent("          {}"), nil},
		"null":             {agent("          ~"), nil},
		"numbers as float": {agent("          {type: object, properties: {n: {maximum: 0x10, minimum: -1.5e3}}}"), map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"maximum": 16.0, "minimum": -1500.0}}}},
		"anchors and merge keys": {agent(
			"          type: object",
			"          properties:",
			"            a: &s {type: string, maxLength: 3}",
			"            b: {<<: *s, minLength: 1}",
			"            c: *s"), map[string]any{"type": "object", "properties": map[string]any{
			"a": map[string]any{"type": "string", "maxLength": 3.0},
			"b": map[string]any{"type": "string", "maxLength": 3.0, "minLength": 1.0},
			"c": map[string]any{"type": "string", "maxLength": 3.0},
		}}},
		"quoted keys, empty lists and mappings": {agent(`          {type: object, properties: {"1": {}, "true": {enum: [~, 1, yes]}}, required: []}`),
			map[string]any{"type": "object", "properties": map[string]any{"1": map[string]any{}, "true": map[string]any{"enum": []any{nil, 1.0, "yes"}}}, "required": []any{}}},
	}
	for name, tt := range good {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Tasks[0].Tools[0].Arguments; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("arguments:\ngot  %#v\nwant %#v", got, tt.want)
			}
			raw, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var back Spec
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&back, s) {
				t.Errorf("JSON round trip changed the spec:\n%s", raw)
			}
		})
	}

	bad := map[string]struct {
		yaml string
		want []string
	}{
		"a list": {agent("          [type, object]"), []string{
			`line 13: task "a": tools #1: arguments must be a JSON Schema written as a mapping, like {type: object, properties: {...}}, not a list`}},
		"a key that is a number": {agent("          {type: object, properties: {1: {type: string}}}"), []string{
			`line 13: task "a": tools #1: arguments: the key "1" is not a string, as JSON keys are: quote it ("1")`}},
		"a key that is true": {agent("          type: object", "          true: 1"), []string{
			`line 14: task "a": tools #1: arguments: the key "true" is not a string, as JSON keys are: quote it ("true")`}},
		"infinity": {agent("          {type: object, properties: {n: {maximum: .inf}}}"), []string{
			`line 13: task "a": tools #1: arguments: ".inf" is not a JSON number`}},
		"binary": {agent("          {type: object, default: !!binary aGk=}"), []string{
			`line 13: task "a": tools #1: arguments: "aGk=" (!!binary) is not a JSON value`}},
		"aliases that expand past the budget": {agent(
			"          type: object",
			"          a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]",
			"          b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a]",
			"          c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b]",
			"          d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c]",
			"          e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d]"), []string{
			`the document expands to more than 524288 YAML nodes through aliases (*name) and merge keys (<<)`}},
		"a duplicate key": {agent("          type: object", "          type: string"), []string{
			`line 14: duplicate key "type" in task "a": tools #1: arguments (first at line 13)`}},
	}
	for name, tt := range bad {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse([]byte(tt.yaml))
			if s != nil {
				t.Errorf("Parse returned a spec along with errors: %+v", s)
			}
			if got := problems(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("Parse errors:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

func TestParseRejectsToolAgent(t *testing.T) {
	t.Parallel()
	head := []string{"  - name: a", "    type: agent", "    provider: p"}
	agent := func(lines ...string) string { return wf(append(slices.Clone(head), lines...)...) }
	tool := "{name: t, description: d, type: shell, command: ./t.sh}"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"a prompt without tools", agent("    prompt: hi"), []string{
			`line 3: task "a": tools are required for an agent with a prompt: a list of {name, description, type, command}; a prompt the model answers without tools is an llm task`}},
		{"tools without a prompt", agent("    tools: [" + tool + "]"), []string{
			`line 3: task "a": prompt is required for an agent with tools: it starts the conversation in which the model calls them`}},
		{"a bound alone", agent("    max-turns: 3"), []string{
			`line 3: task "a": prompt is required for an agent with tools: it starts the conversation in which the model calls them`,
			`line 3: task "a": tools are required for an agent with a prompt: a list of {name, description, type, command}; a prompt the model answers without tools is an llm task`}},
		{"steps and a prompt", agent("    prompt: hi", "    steps: [{name: s, prompt: x}]"), []string{
			`line 6: task "a": an agent has steps or a prompt and tools, not both: each step has its own prompt`}},
		{"steps and tools, with the loop's bounds", agent(
			"    steps: [{name: s, prompt: x}]",
			"    tools: ["+tool+"]",
			"    max-turns: 3",
			"    max-tool-calls: 3",
			"    max-total-tokens: 3",
			"    workdir: /tmp"), []string{
			`line 7: task "a": an agent has steps or a prompt and tools, not both: steps run their prompts in order, tools are called by the model in a loop that a prompt starts`,
			`line 8: task "a": max-turns bounds an agent with tools; an agent with steps makes one model call a step`,
			`line 9: task "a": max-tool-calls bounds an agent with tools; an agent with steps makes one model call a step`,
			`line 10: task "a": max-total-tokens bounds an agent with tools; an agent with steps makes one model call a step`,
			`line 11: task "a": workdir is where an agent's tools run; an agent with steps has none`}},
		{"bounds out of range, a prompt that does not check", agent(
			"    prompt: '{{ .upstream.x.output }} {{ .steps.y }}'",
			"    max-turns: 201",
			"    max-tool-calls: -1",
			"    max-total-tokens: -5",
			"    tools: ["+tool+"]"), []string{
			`line 6: task "a": prompt: .upstream.x.output refers to task "x", but the task has no depends-on: only the outputs of its dependencies are available`,
			`line 6: task "a": prompt: .steps.y: only the prompts of an agent's steps can use .steps`,
			`line 7: task "a": max-turns 201 is out of range 0..200; 0 means 20`,
			`line 8: task "a": max-tool-calls -1 is out of range 0..1000; 0 means 50`,
			`line 9: task "a": max-total-tokens -5 is negative; 0 means no bound`}},
		{"a prompt on a shell task", wf("  - {name: a, type: shell, command: x, prompt: hi, max-turns: 2}"), []string{
			`line 3: task "a": prompt is a field of agent and llm tasks, not of a shell task`,
			`line 3: task "a": max-turns is a field of agent tasks, not of a shell task`}},
		{"tools on an llm task", wf("  - {name: a, type: llm, provider: p, prompt: hi, tools: [" + tool + "]}"), []string{
			`line 3: task "a": tools is a field of agent tasks, not of an llm task`}},
		{"each tool's fields", agent(
			"    prompt: hi",
			"    tools:",
			"      - {description: d, type: shell, command: x}",
			"      - {name: 'a b', description: d, type: shell, command: x}",
			"      - {name: "+strings.Repeat("x", 65)+", description: d, type: shell, command: x}",
			"      - name: dup",
			"        description: ' '",
			"        type: shell",
			"        command: x",
			"      - name: dup",
			"        description: d",
			"        type: ftp",
			"      - {name: no-type, description: d, command: x}",
			"      - {name: no-command, description: d, type: shell, command: '  '}",
			"      - name: retried",
			"        description: d",
			"        type: shell",
			"        command: x",
			"        on-interrupted: retry",
			"      - {name: unknown-policy, description: d, type: shell, command: x, on-interrupted: again}",
			"      - {name: negative, description: d, type: shell, command: x, timeout: -1s}",
			"      - {name: child, description: d, type: workflow, workflow: w, on-interrupted: ask}",
			"      - name: retried-idempotent",
			"        description: d",
			"        type: shell",
			"        command: x",
			"        idempotent: true",
			"        on-interrupted: retry"), []string{
			`line 8: task "a": tool #1: name is required: the model calls the tool by it`,
			`line 9: task "a": tool "a b": name is invalid: use 1 to 64 letters, digits, '_' or '-' (what every model provider accepts)`,
			`line 10: task "a": tool "` + strings.Repeat("x", 65) + `": name is invalid: use 1 to 64 letters, digits, '_' or '-' (what every model provider accepts)`,
			`line 12: task "a": tool "dup": description is required: it tells the model what the tool does and when to use it`,
			`line 15: task "a": tool "dup": name is already used by tool #4`,
			`line 17: task "a": tool "dup": unknown type "ftp" (tool types: shell, http, mcp, workflow)`,
			`line 18: task "a": tool "no-type": type is required (tool types: shell, http, mcp, workflow)`,
			`line 19: task "a": tool "no-command": command is required for a shell tool: the script run with bash -c, which reads the call's arguments from its environment`,
			`line 24: task "a": tool "retried": on-interrupted: retry needs idempotent: true: a call cut off by a crash may have taken effect, and a call that is not idempotent, run twice, may have its effect twice; use ask or fail, or make the tool dedupe on $ZKSCHED_TOOL_CALL_ID and say idempotent: true`,
			`line 25: task "a": tool "unknown-policy": on-interrupted "again" is unknown: use retry, ask, fail`,
			`line 26: task "a": tool "negative": timeout -1s is negative; 0 means 10m0s`,
			`line 27: task "a": tool "child": on-interrupted does not apply to a workflow tool: a call cut off by a crash goes on with the child it started, and never starts a second; leave it out`}},
		{"arguments that are no JSON Schema of an object", agent(
			"    prompt: hi",
			"    tools:",
			"      - {name: a, description: d, type: shell, command: x, arguments: {properties: {}}}",
			"      - {name: b, description: d, type: shell, command: x, arguments: {type: array}}",
			"      - {name: c, description: d, type: shell, command: x, arguments: {type: object, properties: {x: {type: text}}}}",
			"      - {name: d, description: d, type: shell, command: x, arguments: {type: object, required: city}}",
			"      - {name: e, description: d, type: shell, command: x, arguments: {type: object, properties: {x: {$ref: 'https://example.com/x.json'}}}}",
			"      - {name: f, description: d, type: shell, command: x, arguments: {type: object, properties: {x: {$ref: '/etc/passwd'}}}}",
			"      - {name: g, description: d, type: shell, command: x, arguments: {type: object, properties: {x: {pattern: '(?<=a)b'}}}}"), []string{
			`line 8: task "a": tool "a": arguments: the schema must have type: object: a call's arguments are an object of named values`,
			`line 9: task "a": tool "b": arguments: the schema must have type: object: a call's arguments are an object of named values`,
			`line 10: task "a": tool "c": arguments: not a valid JSON Schema: at '/properties/x/type': got string, want array; ` +
				`at '/properties/x/type': value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'`,
			`line 11: task "a": tool "d": arguments: not a valid JSON Schema: at '/required': got string, want array`,
			`line 12: task "a": tool "e": arguments: $ref "https://example.com/x.json" cannot be loaded: a schema may refer only to itself, as "#/$defs/NAME"`,
			`line 13: task "a": tool "f": arguments: $ref "https://zksched.invalid/etc/passwd" cannot be loaded: a schema may refer only to itself, as "#/$defs/NAME"`,
			`line 14: task "a": tool "g": arguments: not a valid JSON Schema: at '/properties/x/pattern': '(?<=a)b' is not valid regex: error parsing regexp: invalid named capture: ` + "`(?<=a)b`"}},
		{"too many tools", agent("    prompt: hi", "    tools: ["+strings.Repeat(tool+", ", MaxTools)+tool+"]"), []string{
			`line 7: task "a": the agent has 65 tools; the limit is 64`}},
		{"tools not a list", agent("    prompt: hi", "    tools: {name: t}"), []string{
			`line 7: task "a": tools must be a list of tools, like [{name: search, description: "...", type: shell, command: ./search.sh}], not a mapping`}},
		{"a tool not a mapping", agent("    prompt: hi", "    tools: [search]"), []string{
			`line 7: task "a": tools #1 must be a mapping with name, description, type and command, not "search"`}},
		{"values that do not read", agent(
			"    prompt: hi",
			"    max-turns: many",
			"    tools:",
			"      - {name: t, description: d, type: shell, command: x, idempotent: maybe, timeout: soon, on-interrupted: [ask]}"), []string{
			`line 7: task "a": max-turns must be an integer, not "many"`,
			`line 9: task "a": tools #1: idempotent must be true or false, not "maybe"`,
			`line 9: task "a": tools #1: timeout "soon" is not a duration: write a Go duration such as "30s", "10m" or "1h30m"`,
			`line 9: task "a": tools #1: on-interrupted must be a string, not a list`}},
		{"a tool field misspelt", agent(
			"    prompt: hi",
			"    tools:",
			"      - name: t",
			"        description: d",
			"        type: shell",
			"        comand: x"), []string{
			`line 11: unknown field "comand" in task "a": tools #1 (a tool has name, description, type, command, url, method, headers, include, exclude, workflow, version, arguments, idempotent, on-interrupted, timeout, approve, approve-when) (did you mean "command"?)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse([]byte(tt.yaml))
			if s != nil {
				t.Errorf("Parse returned a spec along with errors: %+v", s)
			}
			if got := problems(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("Parse errors:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

func TestToolCheckArgs(t *testing.T) {
	t.Parallel()
	s, err := ParseFile(filepath.Join("testdata", "agent-tools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := s.Task("plan")
	weather, book, now := plan.Tools[0], plan.Tools[1], plan.Tools[2]
	tests := []struct {
		name string
		tool Tool
		args string
		want string // "" for none; else the error, whole
	}{
		{"good", weather, `{"city": "Lyon", "hours": 6, "units": "metric"}`, ""},
		{"good, a $ref", book, `{"from": "LYS1", "to": "PAR22", "bikes": 2, "notes": null}`, ""},
		{"an integer written as a float", weather, `{"city": "Lyon", "hours": 6.0}`, ""},
		{"wrong type", weather, `{"city": 7}`,
			"the arguments do not match the tool's schema: at '/city': got number, want string"},
		{"out of range, not in the enum", weather, `{"city": "Lyon", "hours": 25, "units": "kelvin"}`,
			"the arguments do not match the tool's schema: at '/hours': maximum: got 25, want 24; " +
				"at '/units': value must be one of 'metric', 'imperial', 'true'"},
		{"missing required", book, `{"from": "LYS1"}`,
			"the arguments do not match the tool's schema: at the top: missing property 'to'"},
		{"an unknown property", weather, `{"city": "Lyon", "wind": true}`,
			"the arguments do not match the tool's schema: at the top: additional properties 'wind' not allowed"},
		{"a $ref that does not match", book, `{"from": "lys", "to": "PAR22"}`,
			"the arguments do not match the tool's schema: at '/from': 'lys' does not match pattern '^[A-Z]{3}[0-9]+$'"},
		{"not an object", weather, `["Lyon"]`,
			"the arguments do not match the tool's schema: at the top: got array, want object"},
		{"not JSON", weather, `{"city": Lyon}`,
			"the arguments are not JSON: invalid character 'L' looking for beginning of value"},
		{"two values", weather, `{"city": "Lyon"} {}`,
			"the arguments are not JSON: invalid character after top-level value"},
		{"no arguments: empty", now, ``, ""},
		{"no arguments: null", now, `null`, ""},
		{"no arguments: {}", now, ` {} `, ""},
		{"no arguments, given some", now, `{"tz": "UTC"}`, `tool now takes no arguments: call it with {}`},
		{"no arguments, not JSON", now, `{`, `the arguments are not JSON: unexpected EOF`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.tool.CheckArgs(json.RawMessage(tt.args))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("CheckArgs(%s): %v", tt.args, err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("CheckArgs(%s):\ngot  %v\nwant %s", tt.args, err, tt.want)
			}
		})
	}

	// A tool built by hand, whose schema Validate would refuse, is refused at each call.
	bad := Tool{Name: "bad", Arguments: map[string]any{"type": "array"}}
	if err := bad.CheckArgs(json.RawMessage(`[]`)); err == nil || !strings.Contains(err.Error(), "tool bad: arguments: the schema must have type: object") {
		t.Errorf("CheckArgs of a tool with a bad schema: %v", err)
	}

	// Many goroutines check calls of many tools at once, past the cache's size.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range maxCachedArgs / 4 {
				tool := Tool{Name: "t", Arguments: map[string]any{"type": "object", "maxProperties": float64(g*1000 + i)}}
				if err := tool.CheckArgs(json.RawMessage(`{}`)); err != nil {
					t.Errorf("CheckArgs: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestParseToolAgentBounded: the JSON Schema library's messages, which quote the schema's
// values whole, are held to the bounds of any rejection.
func TestParseToolAgentBounded(t *testing.T) {
	t.Parallel()
	long := `"` + strings.Repeat("x", MaxQuoted+50) + `"`
	_, err := Parse([]byte(wf(
		"  - name: a",
		"    type: agent",
		"    provider: p",
		"    prompt: hi",
		"    tools:",
		"      - name: t",
		"        description: d",
		"        type: shell",
		"        command: x",
		"        arguments:",
		"          type: object",
		"          properties:",
		"            a: {pattern: '"+long+"(?<=a)'}",
		"            b: {type: '"+long+"'}",
		"            c: {enum: '"+long+"'}")))
	msgs := checkBounded(t, err)
	if len(msgs) != 1 || !strings.Contains(msgs[0], "not a valid JSON Schema") {
		t.Errorf("Parse errors: %q", msgs)
	}
}

func TestHTTPAndMCPTools(t *testing.T) {
	good := `
name: t
tasks:
  - name: a
    type: agent
    provider: p
    prompt: go
    tools:
      - name: open
        description: opens a ticket
        type: http
        url: https://tickets.example.com/api/issues
        method: PUT
        headers: {Authorization: "Bearer ${TOKEN}"}
        approve: true
        arguments: {type: object, properties: {title: {type: string}}}
      - name: files
        description: the file server
        type: mcp
        command: ./files-server
        exclude: [delete]
      - name: remote
        description: a remote server
        type: mcp
        url: https://mcp.example.com/mcp
        include: [search]
`
	spec, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	tools := spec.Tasks[0].Tools
	if tools[0].Method != "PUT" || tools[0].Headers["Authorization"] != "Bearer ${TOKEN}" || !tools[0].Approve ||
		tools[1].Exclude[0] != "delete" || tools[2].Include[0] != "search" || tools[2].URL != "https://mcp.example.com/mcp" {
		t.Errorf("tools %+v", tools)
	}
	for _, tc := range []struct{ tool, want string }{
		{"{name: x, description: d, type: http}", "url is required for an http tool"},
		{"{name: x, description: d, type: http, url: ftp://a/b}", `url "ftp://a/b" must be an http or https URL`},
		{"{name: x, description: d, type: http, url: 'https://a/', method: FETCH}", `method "FETCH" is unknown`},
		{"{name: x, description: d, type: http, url: 'https://a/', command: ls}", "command is not a field of an http tool"},
		{"{name: x, description: d, type: mcp}", "an mcp tool has a command"},
		{"{name: x, description: d, type: mcp, command: a, url: 'https://a/'}", "an mcp tool has a command"},
		{"{name: x, description: d, type: mcp, command: a, arguments: {type: object}}", "arguments is not a field of an mcp tool"},
		{"{name: x, description: d, type: shell, command: a, include: [b]}", "include is not a field of a shell tool"},
		{"{name: x, description: d, type: http, url: 'https://a/', headers: {'a b': c}}", `header name "a b" is invalid`},
		{"{name: x, description: d, type: shell, command: a, approve: maybe}", "approve must be true or false"},
	} {
		src := "name: t\ntasks:\n  - name: a\n    type: agent\n    provider: p\n    prompt: go\n    tools:\n      - " + tc.tool + "\n"
		_, err := Parse([]byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.tool, err, tc.want)
		}
	}
}

func TestOutputFormat(t *testing.T) {
	base := "name: t\ntasks:\n  - name: a\n    type: agent\n    provider: p\n    prompt: go\n    tools: [{name: x, description: d, type: shell, command: c}]\n"
	spec, err := Parse([]byte(base + "    output-format: json\n    output-schema: {type: object, required: [verdict], properties: {verdict: {enum: [ok, bad]}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	task := spec.Tasks[0]
	for answer, want := range map[string]string{
		`{"verdict": "ok"}`:                    "",
		"```json\n{\"verdict\": \"bad\"}\n```": "",
		`{"verdict": "maybe"}`:                 "the answer does not match output-schema: at '/verdict': value must be one of 'ok', 'bad'",
		`{}`:                                   "the answer does not match output-schema",
		`the verdict is ok`:                    "the answer is not JSON",
		`{"verdict": "ok"} {"x": 1}`:           "more than one JSON value",
	} {
		got, err := task.CheckOutput(answer)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", answer, err)
		case want == "" && !strings.HasPrefix(got, "{"):
			t.Errorf("%q: stored as %q, want the JSON without its fence", answer, got)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: error %v, want %q", answer, err, want)
		}
	}
	for extra, want := range map[string]string{
		"    output-format: yaml\n":                                    `output-format "yaml" is unknown: use text or json`,
		"    output-schema: {type: object}\n":                          "output-schema is for output-format: json",
		"    output-format: json\n    output-schema: {type: objekt}\n": "output-schema: not a valid JSON Schema",
	} {
		if _, err := Parse([]byte(base + extra)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", extra, err, want)
		}
	}
}
