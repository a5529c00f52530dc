package workflow

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"go.yaml.in/yaml/v3"
)

// TypeWorkflow is the type of a task that starts an instance of a stored workflow, its child,
// and ends as the child ends. Like a wait task it runs on no worker and holds no slot.
const TypeWorkflow = "workflow"

// childFields are the fields of a workflow task.
var childFields = []field{
	workflowField,
	intField("version", func(t *Task) *int { return &t.Version }),
	stringMapField("params", func(t *Task) *map[string]string { return &t.Params }),
}

// workflowField is the workflow task's workflow: the name of the workflow it starts. A sensor
// writes its condition under the same key, as a mapping (SensorWorkflow, also read as
// workflow-run:): the key is read as the one or the other by its value, and Validate refuses
// either on a task of the other type.
var workflowField = field{
	name: "workflow",
	decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
		if d.resolve(v).Kind == yaml.MappingNode {
			d.taskField("workflow-run", v.Line)
			t.WorkflowRun = d.sensorWorkflow(v, where, "workflow")
			return
		}
		if s, ok := d.scalar(v, where+": workflow", "a string, or a sensor's mapping"); ok {
			t.Workflow = s
		}
	},
	isSet: func(t *Task) bool { return t.Workflow != "" },
}

// checkChild checks a workflow task: the workflow it names (which need not be stored yet: it
// is looked up when the task starts), its version and its params' names and templates. It
// runs on no worker, so retries and a pool mean nothing; it waits as long as its child runs,
// so its own timeout would too: the child's workflow sets one.
func checkChild(t *Task) []problem {
	var probs []problem
	add := func(field, format string, args ...any) {
		probs = append(probs, problem{field: field, msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case t.Workflow == "":
		add("workflow", "workflow is required for a workflow task: the name of the stored workflow it starts")
	case !nameRE.MatchString(t.Workflow):
		add("workflow", "workflow %s is invalid: %s", quote(t.Workflow), nameRule)
	}
	if t.Version < 0 {
		add("version", "version %d is negative: give a stored version (1, 2, ...) or leave it out for the latest", t.Version)
	}
	if len(t.Params) > MaxParams {
		add("params", "params: %d of them; a run has at most %d", len(t.Params), MaxParams)
	} else {
		for _, k := range slices.Sorted(maps.Keys(t.Params)) {
			if !envRE.MatchString(k) || len(k) > maxNameLen {
				add("params", "params: name %s is invalid: %s (tasks read it as $ZKSCHED_PARAM_<name>)", quote(k), paramRule)
				continue
			}
			probs = append(probs, checkTemplate(t, "params", "params."+k, t.Params[k], nil)...)
		}
	}
	if t.Retries != 0 {
		add("retries", "a workflow task runs nowhere, so it has no retries: give its workflow's tasks retries")
	}
	if t.Pool != "" {
		add("pool", "a workflow task runs nowhere, so it takes no place in a pool")
	}
	if t.Timeout != 0 {
		add("timeout", "a workflow task lasts as long as its child: give the child's workflow a timeout instead")
	}
	return probs
}

// ChildParams renders the params of a workflow task over data (the workflow instance's params
// and the task's upstream outputs): the params its child is submitted with. The result is
// checked as any run's params are (CheckParams).
func (t *Task) ChildParams(ctx context.Context, data TemplateData) (map[string]string, error) {
	out := make(map[string]string, len(t.Params))
	for _, k := range slices.Sorted(maps.Keys(t.Params)) {
		v, err := Render(ctx, "params."+k, t.Params[k], data)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", quote(t.Name), err)
		}
		out[k] = v
	}
	if err := CheckParams(out); err != nil {
		return nil, fmt.Errorf("task %s: the child's %w", quote(t.Name), err)
	}
	return out, nil
}
