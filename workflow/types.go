package workflow

import (
	"slices"
	"strings"
)

// taskType is one kind of task: the fields that belong to it alone and the checks those
// fields need. Adding a type means adding its fields to Task and one entry to taskTypes;
// parsing, the "field of another type" check, Types and the error messages follow from it.
type taskType struct {
	name   string
	fields []field
	// check reports problems with the type's own fields, as messages for problem.msg.
	check func(t *Task) []problem
}

// taskTypes is the registry of task types.
var taskTypes = []taskType{
	{name: "noop"},
	{
		name: "shell",
		fields: []field{
			stringField("command", func(t *Task) *string { return &t.Command }),
			workdirField,
		},
		check: func(t *Task) []problem {
			if strings.TrimSpace(t.Command) == "" {
				return []problem{{field: "command", msg: "command is required for a shell task"}}
			}
			return upstreamEnvProblems(t)
		},
	},
	{name: "llm", fields: append([]field{promptField}, modelFields...), check: checkLLM},
	{
		name:   TypeWait,
		fields: []field{onTimeoutField},
		check:  checkWait,
	},
	{name: TypeSensor, fields: sensorFields, check: checkSensor},
	{name: "agent", fields: slices.Concat([]field{promptField, stepsField, workdirField}, loopFields, modelFields), check: checkAgent},
	{name: TypeWorkflow, fields: childFields, check: checkChild},
}

// workdirField is where a shell task's command runs, and a tool-calling agent's shell tools.
var workdirField = stringField("workdir", func(t *Task) *string { return &t.Workdir })

// commonFields are the task fields every type has.
var commonFields = []field{
	stringField("name", func(t *Task) *string { return &t.Name }),
	stringField("type", func(t *Task) *string { return &t.Type }),
	stringListField("depends-on", func(t *Task) *[]string { return &t.DependsOn }),
	intField("retries", func(t *Task) *int { return &t.Retries }),
	durationField("retry-interval", func(t *Task) *Duration { return &t.RetryInterval }),
	retryBackoffField,
	retryOnField("retry-on", func(t *Task) **RetryOn { return &t.RetryOn }),
	retryOnField("no-retry-on", func(t *Task) **RetryOn { return &t.NoRetryOn }),
	durationField("timeout", func(t *Task) *Duration { return &t.Timeout }),
	durationField("deadline", func(t *Task) *Duration { return &t.Deadline }),
	intField("priority", func(t *Task) *int { return &t.Priority }),
	stringField("group", func(t *Task) *string { return &t.Group }),
	stringField("pool", func(t *Task) *string { return &t.Pool }),
	stringMapField("env", func(t *Task) *map[string]string { return &t.Env }),
	stringField("trigger", func(t *Task) *string { return &t.Trigger }),
	stringField("when", func(t *Task) *string { return &t.When }),
	stringField("for-each", func(t *Task) *string { return &t.ForEach }),
	intField("max-parallel", func(t *Task) *int { return &t.MaxParallel }),
	intField("output-limit", func(t *Task) *int { return &t.OutputLimit }),
	stringField("output-overflow", func(t *Task) *string { return &t.OutputOverflow }),
	producesField,
}

// Types returns the known task types, sorted.
func Types() []string {
	names := make([]string, len(taskTypes))
	for i, tt := range taskTypes {
		names[i] = tt.name
	}
	slices.Sort(names)
	return names
}

func lookupType(name string) (taskType, bool) {
	for _, tt := range taskTypes {
		if tt.name == name {
			return tt, true
		}
	}
	return taskType{}, false
}

// lookupField finds a task field by its YAML name, among the common fields and those of every
// type, so a field of another type is recognised (and refused with a better message than
// "unknown").
func lookupField(name string) (field, bool) {
	if f, ok := findField(commonFields, name); ok {
		return f, true
	}
	for _, tt := range taskTypes {
		if f, ok := findField(tt.fields, name); ok {
			return f, true
		}
	}
	return field{}, false
}

// typesWithField returns the types that have the type-specific field name, sorted.
func typesWithField(name string) []string {
	var types []string
	for _, tt := range taskTypes {
		if _, ok := findField(tt.fields, name); ok {
			types = append(types, tt.name)
		}
	}
	slices.Sort(types)
	return types
}

// fieldNames returns every field name a task may carry, for "did you mean" hints.
func fieldNames() []string {
	var names []string
	for _, f := range commonFields {
		names = append(names, f.name)
	}
	for _, tt := range taskTypes {
		for _, f := range tt.fields {
			if !slices.Contains(names, f.name) {
				names = append(names, f.name)
			}
		}
	}
	return names
}

func findField(fields []field, name string) (field, bool) {
	for _, f := range fields {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}
