package workflow

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseLLMAndAgent(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`
name: digest
params: {topic: scheduling}
tasks:
  - {name: fetch-data, type: shell, command: echo text}
  - name: summary
    type: llm
    depends-on: [fetch-data]
    provider: openai-main
    system: You are terse.
    prompt: "Summarise {{ index .upstream \"fetch-data\" \"output\" }} about {{ .params.topic }}"
    temperature: 0.2
    max-tokens: 300
    pool: openai
  - name: digest
    type: agent
    depends-on: [summary]
    provider: local
    temperature: 0
    steps:
      - {name: themes, prompt: "List the main themes in: {{ .upstream.summary.output }}"}
      - {name: report, prompt: "Write a weekly report on: {{ .steps.themes }}"}
  - {name: publish, type: shell, depends-on: [digest], command: 'echo "$ZKSCHED_UPSTREAM_digest_OUTPUT"'}
`))
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := s.Task("summary")
	if sum.Provider != "openai-main" || sum.System != "You are terse." || sum.Temperature == nil ||
		*sum.Temperature != 0.2 || sum.MaxTokens != 300 || sum.Pool != "openai" {
		t.Errorf("summary = %+v", sum)
	}
	dig, _ := s.Task("digest")
	wantSteps := []Step{
		{Name: "themes", Prompt: "List the main themes in: {{ .upstream.summary.output }}"},
		{Name: "report", Prompt: "Write a weekly report on: {{ .steps.themes }}"},
	}
	if !reflect.DeepEqual(dig.Steps, wantSteps) || dig.Temperature == nil || *dig.Temperature != 0 {
		t.Errorf("digest = %+v", dig)
	}
	// The stored form reads back the same.
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

// TestParseAgentWaitSteps: a wait step has a name and wait: true, with an optional timeout
// and on-timeout; later prompts read its output as any step's, and the stored form reads back
// the same.
func TestParseAgentWaitSteps(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`
name: review
tasks:
  - name: draft
    type: agent
    provider: offline
    steps:
      - {name: first-look, wait: true}
      - {name: write, prompt: "Draft a note on {{ index .steps \"first-look\" }}"}
      - {name: approve, wait: true, timeout: 48h, on-timeout: succeed}
      - {name: polish, prompt: "Polish {{ .steps.write }} as asked: {{ .steps.approve }}"}
`))
	if err != nil {
		t.Fatal(err)
	}
	dig, _ := s.Task("draft")
	want := []Step{
		{Name: "first-look", Wait: true},
		{Name: "write", Prompt: "Draft a note on {{ index .steps \"first-look\" }}"},
		{Name: "approve", Wait: true, Timeout: Duration(48 * time.Hour), OnTimeout: OnTimeoutSucceed},
		{Name: "polish", Prompt: "Polish {{ .steps.write }} as asked: {{ .steps.approve }}"},
	}
	if !reflect.DeepEqual(dig.Steps, want) {
		t.Errorf("steps = %+v\nwant %+v", dig.Steps, want)
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

func TestParseRejectsLLMAndAgent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"llm without provider and prompt", wf("  - {name: a, type: llm}"), []string{
			`line 3: task "a": provider is required for an llm task: the name of a provider under llm.providers in the config`,
			`line 3: task "a": prompt is required for an llm task`}},
		{"agent without steps", wf("  - {name: a, type: agent, provider: p}"), []string{
			`line 3: task "a": steps are required for an agent task: a list of {name, prompt}; or, for an agent whose model calls tools, a prompt and tools`}},
		{"a step with an empty prompt", wf(
			"  - name: a",
			"    type: agent",
			"    provider: p",
			"    steps:",
			"      - {name: one, prompt: 'say hi'}",
			"      - {name: two, prompt: '  '}"), []string{
			`line 6: task "a": step "two": the prompt is empty (a step that waits for a signal instead says wait: true)`}},
		{"wait steps: with a prompt, fields of wait steps on a prompt step, bad values", wf(
			"  - name: a",
			"    type: agent",
			"    provider: p",
			"    steps:",
			"      - {name: one, wait: true, prompt: 'say hi'}",
			"      - {name: two, prompt: hi, timeout: 1h}",
			"      - {name: three, prompt: hi, on-timeout: succeed}",
			"      - {name: four, wait: true, timeout: -1s}",
			"      - {name: five, wait: true, on-timeout: retry}",
			"      - {name: six, wait: false}"), []string{
			`line 6: task "a": step "one": a wait step has no prompt: the signal that ends its wait gives its output`,
			`line 6: task "a": step "two": timeout and on-timeout belong to wait steps (wait: true); the task's timeout bounds each attempt`,
			`line 6: task "a": step "three": timeout and on-timeout belong to wait steps (wait: true); the task's timeout bounds each attempt`,
			`line 6: task "a": step "four": timeout -1s is negative`,
			`line 6: task "a": step "five": on-timeout "retry" is unknown: use fail or succeed`,
			`line 6: task "a": step "six": the prompt is empty (a step that waits for a signal instead says wait: true)`}},
		{"wait steps: values that do not read", wf(
			"  - name: a",
			"    type: agent",
			"    provider: p",
			"    steps:",
			"      - {name: one, wait: yes please}",
			"      - {name: two, wait: true, timeout: soon}"), []string{
			`line 7: task "a": steps #1: wait must be true or false, not "yes please"`,
			`line 8: task "a": steps #2: timeout "soon" is not a duration: write a Go duration such as "30s", "10m" or "1h30m"`}},
		{"steps: names missing, invalid, twice", wf(
			"  - name: a",
			"    type: agent",
			"    provider: p",
			"    steps:",
			"      - {prompt: x}",
			"      - {name: 'b c', prompt: x}",
			"      - {name: d, prompt: x}",
			"      - {name: d, prompt: x}"), []string{
			`line 6: task "a": step #1: name is required`,
			`line 6: task "a": step "b c": name is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`,
			`line 6: task "a": step "d": name is already used by step #3`}},
		{"a step field misspelt", wf(
			"  - name: a",
			"    type: agent",
			"    provider: p",
			"    steps:",
			"      - {name: one, promt: x}"), []string{
			`line 7: unknown field "promt" in task "a": steps #1 (a step has name and prompt, or name and wait: true with timeout and on-timeout) (did you mean "prompt"?)`}},
		{"steps not a list", wf("  - {name: a, type: agent, provider: p, steps: {name: x}}"), []string{
			`line 3: task "a": steps must be a list of steps, like [{name: a, prompt: "..."}], not a mapping`}},
		{"template that does not parse", wf("  - {name: a, type: llm, provider: p, prompt: 'hi {{ .params.x '}"), []string{
			`line 3: task "a": prompt is not a valid template: prompt:1: unclosed action`}},
		{"upstream that is not a dependency", wf(
			"  - {name: b, type: noop}",
			"  - {name: a, type: llm, provider: p, depends-on: [b], prompt: '{{ .upstream.c.output }}'}"), []string{
			`line 4: task "a": prompt: .upstream.c.output refers to task "c", which is not in depends-on (b): only the outputs of dependencies are available`}},
		{"upstream without depends-on, through index", wf(
			"  - {name: a, type: llm, provider: p, prompt: '{{ index .upstream \"x-y\" \"output\" }}'}"), []string{
			`line 3: task "a": prompt: .upstream.x-y.output refers to task "x-y", but the task has no depends-on: only the outputs of its dependencies are available`}},
		{"upstream field other than output", wf(
			"  - {name: b, type: noop}",
			"  - {name: a, type: llm, provider: p, depends-on: [b], prompt: '{{ .upstream.b.result }}'}"), []string{
			`line 4: task "a": prompt: .upstream.b.result: an upstream task has only .output`}},
		{"steps in an llm task", wf("  - {name: a, type: llm, provider: p, prompt: '{{ .steps.x }}'}"), []string{
			`line 3: task "a": prompt: .steps.x: only the prompts of an agent's steps can use .steps`}},
		{"a later step, and an unknown name", wf(
			"  - name: a",
			"    type: agent",
			"    provider: p",
			"    system: '{{ .steps.one }}'",
			"    steps:",
			"      - {name: one, prompt: '{{ .steps.two }}'}",
			"      - {name: two, prompt: '{{ .steps.one }} {{ .stepz.one }}'}"), []string{
			`line 6: task "a": system prompt: .steps.one: only the prompts of an agent's steps can use .steps`,
			`line 7: task "a": step "one" prompt: .steps.two: the first step has no earlier steps to use`,
			`line 7: task "a": step "two" prompt: .stepz.one is unknown: a prompt can use .params.<name>, .upstream.<task>.output and, in an agent's steps, .steps.<step>`}},
		{"model fields out of range", wf("  - {name: a, type: llm, provider: 'a/b', prompt: x, temperature: 2.5, max-tokens: -1}"), []string{
			`line 3: task "a": provider "a/b" is invalid: use 1 to 128 letters, digits, '_', '.' or '-'`,
			`line 3: task "a": temperature 2.5 is out of range 0..2`,
			`line 3: task "a": max-tokens -1 is negative; 0 leaves the model's default`}},
		{"temperature not a number", wf("  - {name: a, type: llm, provider: p, prompt: x, temperature: warm}"), []string{
			`line 3: task "a": temperature must be a number, not "warm"`}},
		{"fields of another type", wf(
			"  - {name: a, type: shell, command: x, provider: p}",
			"  - {name: b, type: llm, provider: p, prompt: x, steps: [{name: s, prompt: y}]}"), []string{
			`line 3: task "a": provider is a field of agent and llm tasks, not of a shell task`,
			`line 4: task "b": steps is a field of agent tasks, not of an llm task`}},
		{"upstream outputs that share a variable", wf(
			"  - {name: a-b, type: noop}",
			"  - {name: a.b, type: noop}",
			"  - {name: c, type: shell, command: x, depends-on: [a-b, a.b]}"), []string{
			`line 5: task "c": dependencies a-b and a.b would all pass their output as $ZKSCHED_UPSTREAM_a_b_OUTPUT; rename one of them`}},
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

func TestRender(t *testing.T) {
	t.Parallel()
	data := TemplateData{
		Params:   map[string]string{"topic": "pools"},
		Upstream: map[string]Upstream{"fetch": {Output: "some text"}, "fetch-data": {Output: "more"}},
		Steps:    map[string]string{"themes": "a, b"},
	}
	tests := []struct {
		text    string
		want    string
		wantErr string
	}{
		{"About {{ .params.topic }}: {{ .upstream.fetch.output }}", "About pools: some text", ""},
		{`{{ index .upstream "fetch-data" "output" }} / {{ .steps.themes }}`, "more / a, b", ""},
		{"{{ range $k, $v := .upstream }}{{ $k }}={{ $v.output }};{{ end }}", "fetch=some text;fetch-data=more;", ""},
		{"{{ .params.region }}", "", `prompt: prompt:1:10: executing "prompt" at <.params.region>: map has no entry for key "region"`},
		{"{{ .upstream.gone.output }}", "", `prompt: prompt:1:12: executing "prompt" at <.upstream.gone.output>: map has no entry for key "gone"`},
		{"{{ range 100000 }}0123456789abcdefghij{{ end }}", "", "prompt expands to more than 1048576 bytes"},
		{"{{ .params.x ", "", "prompt is not a valid template: prompt:1: unclosed action"},
	}
	for _, tt := range tests {
		got, err := Render(context.Background(), "prompt", tt.text, data)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Render(%q) error = %v, want %q", tt.text, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Render(%q) = %q, %v; want %q", tt.text, got, err, tt.want)
		}
	}
	// Outside an agent there is no .steps.
	if _, err := Render(context.Background(), "prompt", "{{ .steps.x }}", TemplateData{}); err == nil {
		t.Error("Render of .steps without steps succeeded")
	}
}

func TestUpstreamEnv(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"fetch":      "ZKSCHED_UPSTREAM_fetch_OUTPUT",
		"fetch-data": "ZKSCHED_UPSTREAM_fetch_data_OUTPUT",
		"v1.2_x":     "ZKSCHED_UPSTREAM_v1_2_x_OUTPUT",
	} {
		if got := UpstreamEnv(name); got != want {
			t.Errorf("UpstreamEnv(%q) = %q, want %q", name, got, want)
		}
	}
}
