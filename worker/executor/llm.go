package executor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
)

// LLM runs llm tasks: it renders the prompt (and system prompt) over the workflow's params
// and the upstream outputs, makes one model call through the task's provider, and makes the
// completion the task's output.
type LLM struct {
	Providers *llm.Providers
}

// Run implements Executor.
func (e LLM) Run(ctx context.Context, t Task, log io.Writer) Result {
	client, err := e.Providers.Get(t.Spec.Provider)
	if err != nil {
		return Result{Err: err}
	}
	data := workflow.TemplateData{Params: t.Params, Upstream: t.Upstream, Item: t.Item, Assets: t.Assets}
	req, err := request(ctx, t.Spec, "prompt", t.Spec.Prompt, data)
	if err != nil {
		return Result{Err: err}
	}
	resp, err := call(ctx, client, req, "", log)
	usage := resp.Usage
	if err != nil {
		return Result{Err: err, Usage: &usage}
	}
	return Result{Output: resp.Text, Usage: &usage}
}

// request renders a task's system prompt and the prompt text (what names it in messages),
// giving up when ctx ends: a prompt is a template, which can loop.
func request(ctx context.Context, spec workflow.Task, what, text string, data workflow.TemplateData) (llm.Request, error) {
	req := llm.Request{Temperature: spec.Temperature, MaxTokens: spec.MaxTokens}
	if spec.System != "" {
		sys := data
		sys.Steps = nil
		var err error
		if req.System, err = workflow.Render(ctx, "system prompt", spec.System, sys); err != nil {
			return req, err
		}
	}
	var err error
	req.Prompt, err = workflow.Render(ctx, what, text, data)
	return req, err
}

// call makes one model call and writes it to the task log: what was asked of whom, and
// what came back with its cost. label names the step, "" for an llm task. The completion is
// made storable as PostgreSQL text.
func call(ctx context.Context, client *llm.Client, req llm.Request, label string, log io.Writer) (llm.Response, error) {
	prefix := ""
	if label != "" {
		prefix = label + ": "
	}
	fmt.Fprintf(log, "%scalling provider %s (model %s) with a %d-character prompt\n", prefix, client.Name(), client.Model(), len(req.Prompt))
	start := time.Now()
	resp, err := client.Generate(ctx, req)
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(log, "%sfailed after %v: %v\n", prefix, took, err)
		}
		return resp, err
	}
	resp.Text = storable(resp.Text)
	fmt.Fprintf(log, "%sanswered in %v; tokens: %d prompt, %d completion, %d total; requests: %d\n%s\n",
		prefix, took, resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens, resp.Usage.Calls, resp.Text)
	return resp, nil
}

// storable makes text storable as PostgreSQL text, which takes neither NUL nor invalid
// UTF-8.
func storable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
