package workflow

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRenderRefusesUnboundedTemplates(t *testing.T) {
	t.Parallel()
	many := make(map[string]string, 2000)
	for i := range 2000 {
		many[strings.Repeat("p", 1+i%7)+string(rune('a'+i%26))+strings.Repeat("q", i/182)] = "v"
	}
	data := TemplateData{Params: map[string]string{
		"long": strings.Repeat("x", 200_000),
		"lt":   strings.Repeat("<", 100_000),
		"f":    "%999999999d",
	}}
	tests := []struct {
		name, text string
		data       TemplateData
		want       string
	}{
		{"a range over a huge literal", "{{range 2000000000}}{{end}}", data,
			"prompt: prompt:1:8: range over 2000000000 items; a prompt may range over at most 100000"},
		{"nested literal ranges", "{{range 1000}}{{range 1000}}{{range 1000}}{{end}}{{end}}{{end}}", data,
			"prompt: its loops take more than 1000000 steps (a loop's items times the nodes of its body, inner loops again for each turn of the outer one)"},
		{"a range over a huge computed number", "{{range len .params.long}}{{end}}", data,
			"prompt: prompt:1:8: range over 200000 items; a prompt may range over at most 100000"},
		{"nested ranges over data", "{{range .params}}{{range $.params}}x{{end}}{{end}}", TemplateData{Params: many},
			"prompt: prompt:1:25: the template's loops take more than 1000000 steps"},
		{"define", `{{define "a"}}x{{end}}{{template "a"}}`, data,
			"prompt: {{define}} and {{block}} are not allowed in a prompt"},
		{"block", `{{block "a" .}}x{{end}}`, data,
			"prompt: {{define}} and {{block}} are not allowed in a prompt"},
		{"template", `{{template "prompt"}}`, data,
			"prompt: prompt:1:11: {{template}} is not allowed in a prompt"},
		{"a template that calls itself", `{{define "prompt"}}{{template "prompt"}}{{template "prompt"}}{{end}}`, data,
			"prompt: prompt:1:30: {{template}} is not allowed in a prompt"},
		{"a wide printf", `{{printf "%999999999d" 1}}`, data,
			"prompt: prompt:1:2: printf: a width or precision of 999999999; a prompt's are at most 1000"},
		{"a printf width from an argument", `{{printf "%*d" 1000000000 1}}`, data,
			"prompt: prompt:1:2: printf: a width or precision from an argument (*) is not allowed in a prompt"},
		{"a wide printf format from data", `{{printf .params.f 1}}`, data,
			"prompt: printf: a width or precision of 999999999; a prompt's are at most 1000"},
		{"escapes that grow", `{{html (html (html .params.lt))}}`, data,
			"prompt: html makes 1200000 bytes: a string in a prompt is at most 1048576 bytes"},
		{"a call with too many arguments", "{{print" + strings.Repeat(" .params.long", 101) + "}}", data,
			"prompt: prompt:1:2: a call with 101 arguments; a prompt's calls take at most 100"},
		{"print of too much", "{{print" + strings.Repeat(" .params.long", 6) + "}}", data,
			"prompt: print of 1200000 bytes: a string in a prompt is at most 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Render(context.Background(), "prompt", tt.text, tt.data)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Render = %.100q, %v; want the error %q", got, err, tt.want)
			}
		})
	}
}

// TestCheckTemplateRefusesAtSubmit checks Parse refuses what is certain to break the bounds,
// so that such a prompt is refused when it is stored, not when it runs.
func TestCheckTemplateRefusesAtSubmit(t *testing.T) {
	t.Parallel()
	for prompt, want := range map[string]string{
		"{{range 2000000000}}x{{end}}":                          `line 3: task "a": prompt: prompt:1:8: range over 2000000000 items; a prompt may range over at most 100000`,
		`{{define "a"}}{{template "a"}}{{end}}{{template "a"}}`: `line 3: task "a": prompt: {{define}} and {{block}} are not allowed in a prompt`,
		"{{range 1000}}{{range 1000}}{{range 1000}}{{end}}{{end}}{{end}}": `line 3: task "a": prompt: its loops take more than 1000000 steps ` +
			"(a loop's items times the nodes of its body, inner loops again for each turn of the outer one)",
	} {
		_, err := Parse([]byte(wf("  - {name: a, type: llm, provider: p, prompt: '" + prompt + "'}")))
		if got := problems(t, err); len(got) != 1 || got[0] != want {
			t.Errorf("Parse of prompt %q errors:\n\t%s\nwant:\n\t%s", prompt, strings.Join(got, "\n\t"), want)
		}
	}
}

// slowTemplate stays within every bound of Render but takes tens of seconds: each of its
// 50,000 turns escapes a 200 KB value.
const slowTemplate = `{{range 50000}}{{if eq (html $.params.big) ""}}{{end}}{{end}}`

var slowData = TemplateData{Params: map[string]string{"big": strings.Repeat("<", 200_000)}}

// countdown is a context that ends, as cancelled, at the n-th time it is asked whether it
// has: a kill arriving in the middle of a render, at a point the test chooses rather than
// at a time it waits for.
type countdown struct {
	context.Context
	left   atomic.Int64
	cancel context.CancelFunc
}

func newCountdown(n int64) *countdown {
	ctx, cancel := context.WithCancel(context.Background())
	c := &countdown{Context: ctx, cancel: cancel}
	c.left.Store(n)
	return c
}

func (c *countdown) Err() error {
	if c.left.Add(-1) <= 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// waitRender runs f and waits for it to return once ctx has ended, with a deadline far
// beyond what a stopped render takes but far below what the template takes unstopped.
func waitRender(t *testing.T, ctx context.Context, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the render did not stop within 10 s of its context ending")
		return nil
	}
}

// TestRenderStopsWhenItsContextEnds checks the template itself stops (not only Render
// returning): execute, which Render runs on its own goroutine, returns once its context
// ends in the middle of a loop, for a kill and for a timeout.
func TestRenderStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	run := func(ctx context.Context) error {
		tmpl, err := parseTemplate("prompt", slowTemplate)
		if err != nil {
			return err
		}
		if err := staticProblem(tmpl); err != nil {
			t.Fatalf("the slow template is refused: %v", err)
		}
		_, err = execute(ctx, "prompt", tmpl, slowData)
		return err
	}
	t.Run("kill", func(t *testing.T) {
		t.Parallel()
		ctx := newCountdown(20)
		defer ctx.cancel()
		err := waitRender(t, ctx, func() error { return run(ctx) })
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "prompt: rendering stopped") {
			t.Errorf("execute = %v; want rendering stopped, cancelled", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := waitRender(t, ctx, func() error { return run(ctx) }); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("execute = %v; want rendering stopped by the deadline", err)
		}
	})
	t.Run("Render", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := waitRender(t, ctx, func() error {
			_, err := Render(ctx, "prompt", slowTemplate, slowData)
			return err
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Render = %v; want rendering stopped by the deadline", err)
		}
	})
}

// FuzzRender checks that no template makes Render panic, run past its bounds or write more
// than maxRendered bytes.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"About {{ .params.topic }}", "{{range 2000000000}}{{end}}", "{{range $i, $e := .params}}{{$i}}={{$e}}{{end}}",
		`{{printf "%-20s|%5.2f" .params.topic 1.5}}`, `{{html (js (urlquery .params.topic))}}`, `{{define "a"}}{{end}}`,
		"{{range 3}}{{range 4}}{{break}}{{end}}{{continue}}{{end}}", `{{with .params}}{{range .}}{{else}}none{{end}}{{end}}`,
	} {
		f.Add(s)
	}
	data := TemplateData{Params: map[string]string{"topic": "pools", "n": "3"}, Upstream: map[string]Upstream{"a": {Output: "x"}}}
	f.Fuzz(func(t *testing.T, text string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := Render(ctx, "prompt", text, data)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a template within the bounds rendered for 20 s: %q", text)
		}
		if len(out) > maxRendered {
			t.Fatalf("rendered %d bytes", len(out))
		}
	})
}
