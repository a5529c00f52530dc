package workflow

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/zksched/zksched/internal/testenv"
)

func TestParseAssets(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`
name: report
on-assets: {all: [orders, customers]}
tasks:
  - {name: load, type: shell, command: echo hi, produces: [report.daily]}
`))
	if err != nil {
		t.Fatal(err)
	}
	names, all := s.OnAssets.Assets()
	if !all || !slices.Equal(names, []string{"orders", "customers"}) {
		t.Errorf("on-assets = %v all=%v, want [orders customers] all", names, all)
	}
	if got := s.Tasks[0].Produces; !slices.Equal(got, []string{"report.daily"}) {
		t.Errorf("produces = %v", got)
	}
	s, err = Parse([]byte("name: r\non-assets: {any: [a]}\ntasks: [{name: t, type: noop}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if names, all := s.OnAssets.Assets(); all || !slices.Equal(names, []string{"a"}) {
		t.Errorf("on-assets = %v all=%v, want [a] any", names, all)
	}
}

func TestParseAssetsRefused(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ file, want string }{
		"empty produces":       {"name: w\ntasks: [{name: a, type: noop, produces: []}]\n", "produces is empty"},
		"produces not a list":  {"name: w\ntasks: [{name: a, type: noop, produces: x}]\n", "produces must be a list"},
		"bad asset name":       {"name: w\ntasks: [{name: a, type: noop, produces: ['a b']}]\n", `asset name "a b" is invalid`},
		"asset twice":          {"name: w\ntasks: [{name: a, type: noop, produces: [x, x]}]\n", `names asset "x" twice`},
		"produces on wait":     {"name: w\ntasks: [{name: a, type: wait, produces: [x]}]\n", "produces no asset"},
		"produces on for-each": {"name: w\ntasks: [{name: a, type: noop, for-each: '[1]', produces: [x]}]\n", "one event per item"},
		"empty on-assets":      {"name: w\non-assets: {}\ntasks: [{name: a, type: noop}]\n", "on-assets needs all or any"},
		"empty all":            {"name: w\non-assets: {all: []}\ntasks: [{name: a, type: noop}]\n", "on-assets: all is empty"},
		"all and any":          {"name: w\non-assets: {all: [a], any: [b]}\ntasks: [{name: a, type: noop}]\n", "not both"},
		"unknown key":          {"name: w\non-assets: {every: [a]}\ntasks: [{name: a, type: noop}]\n", `unknown field "every" in on-assets`},
		"on-assets a list":     {"name: w\non-assets: [a]\ntasks: [{name: a, type: noop}]\n", "on-assets must be a mapping"},
		"required param":       {"name: w\nparams: {day: {required: true}}\non-assets: {any: [a]}\ntasks: [{name: a, type: noop}]\n", `param "day" is required`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestRenderAssets(t *testing.T) {
	t.Parallel()
	data := TemplateData{Assets: map[string]AssetInput{"orders": {Output: "42", Event: 7}}}
	got, err := Render(context.Background(), "prompt", "{{ .assets.orders.output }} from event {{ .assets.orders.event }}", data)
	if err != nil || got != "42 from event 7" {
		t.Errorf("Render = %q, %v", got, err)
	}
	if _, err := Render(context.Background(), "prompt", "{{ .assets.customers.output }}", data); err == nil {
		t.Error("Render of an asset the run did not start on: no error")
	}
	_, err = Parse([]byte("name: w\non-assets: {any: [a]}\ntasks: [{name: t, type: noop, when: '{{ .assets.a.size }}'}]\n"))
	if err == nil || !strings.Contains(err.Error(), "only .output and .event") {
		t.Errorf("Parse of .assets.a.size: %v", err)
	}
}

// TestDocsAssetsExamples: the examples of docs/workflows.md's Assets section parse.
func TestDocsAssetsExamples(t *testing.T) {
	t.Parallel()
	blocks := testenv.DocBlocks(t, "docs/workflows.md", "Assets: data-aware runs", "yaml")
	if len(blocks) != 2 {
		t.Fatalf("%d yaml blocks, want 2", len(blocks))
	}
	for _, b := range blocks {
		if _, err := Parse([]byte(b)); err != nil {
			t.Errorf("%v\n%s", err, b)
		}
	}
}

// TestAssetRefsMustBeNamed: a template that reads an asset the workflow's on-assets does not
// name, or .assets in a workflow without on-assets, is refused naming the task, the field and
// the asset, in every field that renders over the run's data; the assets it names are read
// freely, as is .assets itself in a consumer.
func TestAssetRefsMustBeNamed(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ file, want string }{
		"unnamed in a prompt": {"name: w\non-assets: {all: [orders, customers]}\ntasks:\n" +
			"  - {name: report, type: llm, provider: p, prompt: '{{ .assets.refunds.output }}'}\n",
			`task "report": prompt reads asset "refunds" (.assets), which on-assets does not name (it names orders, customers)`},
		"unnamed through index in when": {"name: w\non-assets: {any: [orders]}\ntasks:\n" +
			"  - {name: t, type: noop, when: '{{ index .assets \"raw.orders\" \"output\" }}'}\n",
			`task "t": when reads asset "raw.orders" (.assets), which on-assets does not name (it names orders)`},
		"no on-assets": {"name: w\ntasks:\n  - {name: t, type: noop, for-each: '{{ .assets.orders.output }}'}\n",
			`task "t": for-each reads asset "orders" (.assets), but the workflow has no on-assets`},
		"bare .assets without on-assets": {"name: w\ntasks:\n  - {name: t, type: noop, when: '{{ len .assets }}'}\n",
			`task "t": when reads .assets, but the workflow has no on-assets`},
		"a child's params": {"name: w\non-assets: {any: [a]}\ntasks:\n" +
			"  - {name: c, type: workflow, workflow: other, params: {x: '{{ .assets.b.output }}'}}\n",
			`task "c": params reads asset "b" (.assets)`},
		"an agent's step": {"name: w\non-assets: {any: [a]}\ntasks:\n" +
			"  - {name: g, type: agent, provider: p, steps: [{name: s, prompt: '{{ .assets.b.event }}'}]}\n",
			`task "g": steps reads asset "b" (.assets)`},
		"an http sensor's expect.json": {"name: w\ntasks:\n" +
			"  - {name: s, type: sensor, http: {url: 'https://example.com', expect: {json: '{{ eq .body.v .assets.a.output }}'}}}\n",
			`task "s": http reads asset "a" (.assets), but the workflow has no on-assets`},
		"a workflow sensor's since": {"name: w\non-assets: {any: [a]}\ntasks:\n" +
			"  - {name: s, type: sensor, workflow: {name: up, since: '{{ .assets.b.event }}'}}\n",
			`task "s": workflow reads asset "b" (.assets)`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v, want an error with %q", err, tc.want)
			}
		})
	}
	for _, ok := range []string{
		"name: w\non-assets: {all: [orders, raw.orders]}\ntasks:\n  - {name: t, type: noop, when: '{{ and .assets.orders.output (index .assets \"raw.orders\" \"output\") }}'}\n",
		"name: w\non-assets: {any: [a, b]}\ntasks:\n  - {name: t, type: noop, when: '{{ len .assets }}'}\n",
		"name: w\non-assets: {any: [a]}\ntasks:\n  - {name: t, type: noop, when: '{{ range $k, $v := .assets }}{{ $v.output }}{{ end }}'}\n",
	} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("Parse(%q): %v; want it accepted", ok, err)
		}
	}
}
