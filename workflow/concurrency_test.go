package workflow

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseConcurrency(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte("name: chat\nconcurrency: {key: \"{{ .params.thread }}\"}\n" + policyTasks))
	if err != nil {
		t.Fatal(err)
	}
	want := &Concurrency{Key: "{{ .params.thread }}", Max: 1, WhenFull: WhenFullQueue}
	if !reflect.DeepEqual(s.Concurrency, want) {
		t.Fatalf("Concurrency = %+v, want the defaults %+v", s.Concurrency, want)
	}
	raw, _ := json.Marshal(s)
	var back Spec
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, *s) {
		t.Errorf("JSON round trip = %+v, %v (%s)", back, err, raw)
	}
	if !strings.Contains(string(raw), `"concurrency":{"key":"{{ .params.thread }}","max":1,"when-full":"queue"}`) {
		t.Errorf("stored form does not use the file's names: %s", raw)
	}
	s, err = Parse([]byte("name: chat\nconcurrency:\n  key: 'user-{{ .params.user }}'\n  max: 3\n  when-full: cancel-oldest\n" + policyTasks))
	if err != nil {
		t.Fatal(err)
	}
	if got := *s.Concurrency; got != (Concurrency{Key: "user-{{ .params.user }}", Max: 3, WhenFull: WhenFullCancelOldest}) {
		t.Errorf("Concurrency = %+v", got)
	}
}

// TestParseConcurrencyErrors: a bad concurrency mapping is refused at submit, with its line
// and what to write instead.
func TestParseConcurrencyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		want       []string
	}{
		{"no key", "concurrency: {max: 1}\n", []string{"line 2: concurrency: key is required"}},
		{"blank key", "concurrency: {key: ' '}\n", []string{"concurrency: key is required"}},
		{"key does not parse", "concurrency:\n  key: '{{ .params.thread '\n", []string{"line 3: concurrency: key is not a valid template"}},
		{"key reads upstream", "concurrency: {key: '{{ .upstream.a.output }}'}\n", []string{
			"concurrency: key: .upstream.a.output is unknown: a key is rendered at submit and can use only .params.<name>"}},
		{"key reads steps", "concurrency: {key: '{{ index .steps \"x\" }}'}\n", []string{"can use only .params.<name>"}},
		{"key defines", "concurrency: {key: '{{ define \"x\" }}{{ end }}'}\n", []string{"{{define}} and {{block}} are not allowed"}},
		{"max zero", "concurrency: {key: k, max: 0}\n", []string{}}, // 0 is the default, 1
		{"max negative", "concurrency: {key: k, max: -2}\n", []string{"concurrency: max -2 is out of range 1..10000"}},
		{"max too big", "concurrency: {key: k, max: 10001}\n", []string{"concurrency: max 10001 is out of range 1..10000"}},
		{"max not a number", "concurrency: {key: k, max: one}\n", []string{"concurrency: max"}},
		{"bad when-full", "concurrency: {key: k, when-full: wait}\n", []string{`concurrency: when-full "wait" is not one of queue, skip, cancel-oldest`}},
		{"unknown field", "concurrency: {key: k, mx: 2}\n", []string{`unknown field "mx" in concurrency (did you mean "max"?)`}},
		{"not a mapping", "concurrency: '{{ .params.thread }}'\n", []string{"concurrency must be a mapping with a key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte("name: w\n" + tt.file + policyTasks))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Parse refused the file: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Parse accepted the file")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\ndoes not contain %q", err, want)
				}
			}
		})
	}
}

func TestRenderKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &Concurrency{Key: "{{ .params.thread }}", Max: 1, WhenFull: WhenFullQueue}
	if got, err := c.RenderKey(ctx, map[string]string{"thread": "t1"}); err != nil || got != "t1" {
		t.Errorf("RenderKey = %q, %v; want t1", got, err)
	}
	for _, tt := range []struct {
		name   string
		params map[string]string
		want   string
	}{
		{"missing param", map[string]string{}, `map has no entry for key "thread"`},
		{"empty", map[string]string{"thread": ""}, `concurrency key "{{ .params.thread }}" renders empty for these params`},
		{"blank", map[string]string{"thread": "  "}, "renders empty"},
		{"too long", map[string]string{"thread": strings.Repeat("x", MaxConcurrencyKey+1)}, "renders 513 bytes; the limit is 512"},
	} {
		if _, err := c.RenderKey(ctx, tt.params); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: RenderKey error = %v; want one containing %q", tt.name, err, tt.want)
		}
	}
}
