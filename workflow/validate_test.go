package workflow

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Validate is also what the master relies on for a Spec read back from JSON, where there are
// no lines and no defaults filled in by Parse.
func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(s *Spec)
		want   []string
	}{
		{"valid", func(*Spec) {}, nil},
		{"empty group", func(s *Spec) { s.Tasks[0].Group = "" }, []string{`task "a": group is required`}},
		{"foreign fields", func(s *Spec) { s.Tasks[1].Command, s.Tasks[1].Workdir = "ls", "/tmp" }, []string{
			`task "b": command is a field of shell tasks, not of a noop task`,
			`task "b": workdir is a field of agent and shell tasks, not of a noop task`,
		}},
		{"negative durations", func(s *Spec) {
			s.Tasks[0].Timeout = Duration(-time.Second)
			s.Tasks[0].RetryInterval = Duration(-time.Minute)
		}, []string{
			`task "a": retry-interval -1m0s is negative`,
			`task "a": timeout -1s is negative`,
		}},
		{"problems of several tasks, in task order", func(s *Spec) {
			s.Tasks[1].Type = ""
			s.Tasks[0].Retries = 1000
			s.Tasks[0].DependsOn = []string{"b", "nope"}
			s.Tasks[1].DependsOn = []string{"a"}
		}, []string{
			`task "a": retries 1000 is out of range 0..100`,
			`task "b": type is required (known types: agent, llm, noop, sensor, shell, wait, workflow)`,
			`task "a" depends on "nope", which is not a task of this workflow`,
			"dependency cycle: a -> b -> a (each task depends on the one before it)",
		}},
		{"triggers and conditions", func(s *Spec) {
			s.Tasks[1].DependsOn = []string{"a"}
			s.Tasks[1].Trigger, s.Tasks[1].When = TriggerAnyFailed, `{{ eq .upstream.a.output "x" }}`
			s.Tasks[0].When = `{{ eq .params.env "prod" }}`
		}, nil},
		{"bad triggers and conditions", func(s *Spec) {
			s.Tasks[0].Trigger = TriggerAllDone
			s.Tasks[0].When = `{{ .upstream.b.output }}`
			s.Tasks[1].DependsOn = []string{"a"}
			s.Tasks[1].Trigger, s.Tasks[1].When = "one-failed", `{{ if }}`
		}, []string{
			`task "a": trigger all-done needs depends-on: a task without dependencies starts with the run`,
			`task "a": when: .upstream.b.output refers to task "b", but the task has no depends-on: only the outputs of its dependencies are available`,
			`task "b": unknown trigger "one-failed" (known triggers: all-succeeded, all-done, any-failed)`,
			`task "b": when is not a valid template: when:1: missing value for if`,
		}},
		{"for-each", func(s *Spec) {
			s.Tasks[1].DependsOn = []string{"a"}
			s.Tasks[1].ForEach, s.Tasks[1].MaxParallel = `{{ .upstream.a.output }}`, 4
			s.Tasks[0].ForEach = `{{ range 3 }}{{ . }}
{{ end }}`
			s.Tasks[0].Command = `echo "$ZKSCHED_ITEM"`
		}, nil},
		{"items in a for-each task's prompts", func(s *Spec) {
			s.Tasks[1] = Task{Name: "b", Type: "agent", Group: DefaultGroup, Provider: "p", ForEach: `{{ .params.docs }}`,
				System: "Item {{ .index }}.", Steps: []Step{{Name: "read", Prompt: "Summarise {{ .item }}"}}}
		}, nil},
		{"bad for-each", func(s *Spec) {
			s.Tasks[0].ForEach, s.Tasks[0].MaxParallel = `{{ .item }}`, -1
			s.Tasks[0].When = `{{ eq .index 0 }}`
			s.Tasks[1] = Task{Name: "b", Type: "wait", Group: DefaultGroup, ForEach: `{{ if }}`, MaxParallel: 2}
		}, []string{
			`task "a": when: .index: the items do not exist yet where for-each and when are rendered; the prompts of each item see them`,
			`task "a": max-parallel -1 is negative; 0 means no cap`,
			`task "a": for-each: .item: the items do not exist yet where for-each and when are rendered; the prompts of each item see them`,
			`task "b": for-each is for tasks that run on workers (agent, llm, noop, shell), not for a wait task`,
			`task "b": for-each is not a valid template: for-each:1: missing value for if`,
		}},
		{"max-parallel and items without for-each", func(s *Spec) {
			s.Tasks[0].MaxParallel = 3
			s.Tasks[1] = Task{Name: "b", Type: "llm", Group: DefaultGroup, Provider: "p", Prompt: "{{ .item }}"}
		}, []string{
			`task "a": max-parallel caps the items of a for-each: the task has no for-each`,
			`task "b": prompt: .item: only a task with for-each has .item and .index`,
		}},
		{"no tasks", func(s *Spec) { s.Tasks = nil }, []string{"the workflow has no tasks"}},
		{"too many tasks", func(s *Spec) { s.Tasks = make([]Task, MaxTasks+1) }, []string{
			"the workflow has 10001 tasks; the limit is 10000"}},
		{"dependency on a task with an invalid name", func(s *Spec) {
			s.Tasks[0].Name = "a b"
			s.Tasks[1].DependsOn = []string{"a b"}
		}, []string{
			`task "a b": name is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &Spec{Name: "w", Tasks: []Task{
				{Name: "a", Type: "shell", Command: "true", Group: DefaultGroup},
				{Name: "b", Type: "noop", Group: DefaultGroup},
			}}
			tt.modify(s)
			if got := problems(t, s.Validate()); !slices.Equal(got, tt.want) {
				t.Errorf("Validate errors:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}
