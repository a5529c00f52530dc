package lifecycle

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// TestForEachRule: the next items are created in index order while fewer than max-parallel
// run; the parent ends once all have ended, with their outputs or naming those that failed.
func TestForEachRule(t *testing.T) {
	t.Parallel()
	count := func(n int) *int { return &n }
	items := func(states ...dao.TaskState) []dao.TaskOutcome {
		out := make([]dao.TaskOutcome, len(states))
		for i, s := range states {
			o := fmt.Sprintf("out %d", i)
			out[i] = dao.TaskOutcome{Name: workflow.ItemName("sum", i), State: s, Output: &o}
		}
		return out
	}
	const (
		q, r, ok, f, k = dao.TaskQueued, dao.TaskRunning, dao.TaskSucceeded, dao.TaskFailed, dao.TaskKilled
	)
	parent := dao.TaskOutcome{Name: "sum", State: dao.TaskWaiting, ItemCount: count(4)}
	killed := parent
	killed.KillRequested = true
	many := parent
	many.ItemCount = count(9)
	for _, tc := range []struct {
		name        string
		parent      dao.TaskOutcome
		items       []dao.TaskOutcome
		maxParallel int
		want        ForEachStep
	}{
		{"no cap: the rest at once", parent, items(), 0, ForEachStep{From: 0, To: 4}},
		{"a cap of two, none yet", parent, items(), 2, ForEachStep{From: 0, To: 2}},
		{"a cap of two, two live", parent, items(r, q), 2, ForEachStep{From: 2, To: 2}},
		{"a cap of two, one ended", parent, items(ok, r), 2, ForEachStep{From: 2, To: 3}},
		{"a failure frees its place too", parent, items(f, ok, r), 2, ForEachStep{From: 3, To: 4}},
		{"all created, one live", parent, items(ok, ok, ok, r), 2, ForEachStep{From: 4, To: 4}},
		{"all succeeded", parent, items(ok, ok, ok, ok), 2, ForEachStep{From: 4, To: 4, Done: true, State: ok,
			Output: ptr(`["out 0","out 1","out 2","out 3"]`)}},
		{"failed, named", parent, items(ok, f, ok, k), 0, ForEachStep{From: 4, To: 4, Done: true, State: f,
			Error: "items did not succeed: sum[1] failed, sum[3] killed"}},
		{"failed, five named and a count", many, items(f, f, f, f, f, f, f, ok, f), 0, ForEachStep{From: 9, To: 9, Done: true, State: f,
			Error: "items did not succeed: sum[0] failed, sum[1] failed, sum[2] failed, sum[3] failed, sum[4] failed, 3 more"}},
		{"killed: nothing more created", killed, items(ok, r), 2, ForEachStep{From: 2, To: 2}},
		{"killed, its items ended", killed, items(ok, k), 2, ForEachStep{From: 2, To: 2, Done: true, State: k,
			Error: "killed by an operator: 2 of 4 items created; did not succeed: sum[1] killed"}},
		{"a kill too late", killed, items(ok, ok, ok, ok), 2, ForEachStep{From: 4, To: 4, Done: true, State: ok,
			Output: ptr(`["out 0","out 1","out 2","out 3"]`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ForEach(tc.parent, tc.items, tc.maxParallel)
			if got.From != tc.want.From || got.To != tc.want.To || got.Done != tc.want.Done || got.State != tc.want.State ||
				deref(got.Output) != deref(tc.want.Output) || got.Error != tc.want.Error {
				t.Errorf("ForEach = %+v (output %q), want %+v (output %q)", got, deref(got.Output), tc.want, deref(tc.want.Output))
			}
		})
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestDecideExpandsForEach: a for-each task that runs is created waiting with its items;
// without items it succeeds at once with "[]", and its dependents are decided in the same
// step; when its items cannot be had it fails, and what needs it is skipped.
func TestDecideExpandsForEach(t *testing.T) {
	t.Parallel()
	spec, err := workflow.Parse([]byte(`
name: fan
tasks:
  - {name: list, type: noop}
  - {name: each, type: noop, depends-on: [list], for-each: "{{ .upstream.list.output }}"}
  - {name: after, type: noop, depends-on: [each]}
`))
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]dao.TaskState{"list": dao.TaskSucceeded}
	for _, tc := range []struct {
		name  string
		items []string
		err   error
		want  []string
	}{
		{"items", []string{"a", "b"}, nil, []string{"each=waiting[a b]"}},
		{"none", nil, nil, []string{"each=succeeded[][]", "after=queued"}},
		{"cannot be had", nil, errors.New("bad list"), []string{"each=failedbad list", "after=skipped"}},
	} {
		p := Decide(spec, states, nil, func(*workflow.Task) ([]string, error) { return tc.items, tc.err })
		var got []string
		for _, c := range p.Create {
			s := c.Task.Name + "=" + string(c.State) + c.Error
			if c.Items != nil {
				s += fmt.Sprint(c.Items) + deref(c.Output)
			}
			got = append(got, s)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: create %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestForEachOutputBound: a for-each's array is held to its output-limit, 1 MiB when it names
// none: over it the task fails naming the limit and the size, or keeps the first items that
// fit, marked truncated.
func TestForEachOutputBound(t *testing.T) {
	t.Parallel()
	succeeded := func(out string) ForEachStep { return ForEachStep{Done: true, State: dao.TaskSucceeded, Output: &out} }
	for _, tc := range []struct {
		name      string
		task      workflow.Task
		output    string
		want      string
		truncated bool
		err       string
	}{
		{"under the default", workflow.Task{}, `["a","b"]`, `["a","b"]`, false, ""},
		{"at the limit", workflow.Task{OutputLimit: 9}, `["a","b"]`, `["a","b"]`, false, ""},
		{"over the limit", workflow.Task{OutputLimit: 8}, `["a","b"]`, "", false,
			"the for-each's output, the JSON array of its items' outputs, is 9 bytes, over the task's output-limit of 8 bytes"},
		{"truncated to the items that fit", workflow.Task{OutputLimit: 8, OutputOverflow: workflow.OverflowTruncate},
			`["a","b"]`, `["a"]`, true, ""},
		{"no item fits", workflow.Task{OutputLimit: 3, OutputOverflow: workflow.OverflowTruncate}, `["a","b"]`, `[]`, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			step := succeeded(tc.output)
			step.BoundOutput(&tc.task)
			if tc.err != "" {
				if step.State != dao.TaskFailed || step.Output != nil || !strings.HasPrefix(step.Error, tc.err) {
					t.Errorf("got %s %v %q; want failed: %q", step.State, step.Output, step.Error, tc.err)
				}
				return
			}
			if step.State != dao.TaskSucceeded || step.Output == nil || *step.Output != tc.want || step.OutputTruncated != tc.truncated {
				t.Errorf("got %s %v (truncated %v); want %s (truncated %v)", step.State, step.Output, step.OutputTruncated, tc.want, tc.truncated)
			}
		})
	}
	// 100 items of 1 KB are far below the default limit.
	outputs := make([]string, 100)
	for i := range outputs {
		outputs[i] = strings.Repeat("k", 1000)
	}
	raw, _ := json.Marshal(outputs)
	step := succeeded(string(raw))
	step.BoundOutput(&workflow.Task{})
	if step.State != dao.TaskSucceeded || *step.Output != string(raw) {
		t.Errorf("100 items of 1 KB: %s, %q", step.State, step.Error)
	}
}
