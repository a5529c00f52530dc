package workflow

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestWorkflowTasks: a workflow task names a stored workflow (not its own), a version that is
// not negative and params whose names are param names and whose templates see only the
// params and the task's dependencies; retries, a pool and a timeout are refused, and so are
// its fields on another type.
func TestWorkflowTasks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"valid", wf("  - {name: review, type: noop}",
			"  - name: publish",
			"    type: workflow",
			"    workflow: publish-digest",
			"    version: 3",
			`    params: {text: "{{ .upstream.review.output }}", day: "{{ .params.day }}"}`,
			"    depends-on: [review]",
			`    when: '{{ ne .upstream.review.output "reject" }}'`), nil},
		{"no workflow", wf("  - {name: a, type: workflow}"), []string{
			`line 3: task "a": workflow is required for a workflow task: the name of the stored workflow it starts`}},
		{"invalid workflow name", wf("  - {name: a, type: workflow, workflow: 'x y'}"), []string{
			`line 3: task "a": workflow "x y" is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`}},
		{"itself", wf("  - {name: a, type: workflow, workflow: w}"), []string{
			`line 3: task "a": workflow "w" is this workflow: a workflow cannot start an instance of itself`}},
		{"negative version", wf("  - {name: a, type: workflow, workflow: x, version: -1}"), []string{
			`line 3: task "a": version -1 is negative: give a stored version (1, 2, ...) or leave it out for the latest`}},
		{"bad params", wf("  - {name: a, type: noop}",
			"  - name: b",
			"    type: workflow",
			"    workflow: x",
			"    depends-on: [a]",
			`    params: {my-day: x, text: "{{ .upstream.c.output }}", n: "{{ .steps.s }}", bad: "{{ if }}"}`), []string{
			`line 8: task "b": params: name "my-day" is invalid: use 1 to 128 letters, digits and '_', not starting with a digit (tasks read it as $ZKSCHED_PARAM_<name>)`,
			`line 8: task "b": params.bad is not a valid template: params.bad:1: missing value for if`,
			`line 8: task "b": params.n: .steps.s: only the prompts of an agent's steps can use .steps`,
			`line 8: task "b": params.text: .upstream.c.output refers to task "c", which is not in depends-on (a): only the outputs of dependencies are available`,
		}},
		{"runs nowhere", wf("  - {name: a, type: workflow, workflow: x, retries: 2, pool: p, timeout: 1h}"), []string{
			`line 3: task "a": a workflow task runs nowhere, so it has no retries: give its workflow's tasks retries`,
			`line 3: task "a": a workflow task runs nowhere, so it takes no place in a pool`,
			`line 3: task "a": a workflow task lasts as long as its child: give the child's workflow a timeout instead`,
		}},
		{"fields on another type", wf("  - {name: a, type: shell, command: 'true', workflow: x, version: 2, params: {a: b}}"), []string{
			`line 3: task "a": workflow is a field of workflow tasks, not of a shell task`,
			`line 3: task "a": version is a field of workflow tasks, not of a shell task`,
			`line 3: task "a": params is a field of workflow tasks, not of a shell task`,
		}},
		{"params a list", wf("  - {name: a, type: workflow, workflow: x, params: [a]}"), []string{
			`line 3: task "a": params must be a mapping of names to values, like {A: b}, not a list`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.yaml))
			got := problems(t, err)
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Errorf("Parse errors:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
			}
		})
	}
}

// TestChildParams: a workflow task's params render over the instance's params and the
// upstream outputs; a reference to a missing param, or a value over the params' bound, fails.
func TestChildParams(t *testing.T) {
	t.Parallel()
	task := Task{Name: "publish", Type: TypeWorkflow, Workflow: "x", DependsOn: []string{"review"},
		Params: map[string]string{"text": "{{ .upstream.review.output }}", "day": "{{ .params.day }}"}}
	data := TemplateData{Params: map[string]string{"day": "mon"}, Upstream: map[string]Upstream{"review": {Output: "ok"}}}
	got, err := task.ChildParams(context.Background(), data)
	if want := map[string]string{"text": "ok", "day": "mon"}; err != nil || !maps.Equal(got, want) {
		t.Errorf("ChildParams = %v, %v; want %v", got, err, want)
	}
	if _, err := task.ChildParams(context.Background(), TemplateData{Upstream: data.Upstream}); err == nil ||
		!strings.Contains(err.Error(), `task "publish": params.day`) {
		t.Errorf("ChildParams without the param = %v; want an error naming the task and the param", err)
	}
	data.Upstream["review"] = Upstream{Output: strings.Repeat("x", MaxParamValue+1)}
	if _, err := task.ChildParams(context.Background(), data); err == nil || !strings.Contains(err.Error(), "the child's params: text is") {
		t.Errorf("ChildParams of a value too long = %v; want the params' bound", err)
	}
}
