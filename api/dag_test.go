package api

import (
	"fmt"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

func TestBuildGraphLayers(t *testing.T) {
	t.Parallel()
	spec := &workflow.Spec{Name: "w", Tasks: []workflow.Task{
		{Name: "extract", Type: "noop"},
		{Name: "side", Type: "noop"},
		{Name: "a", Type: "noop", DependsOn: []string{"extract"}},
		{Name: "b", Type: "noop", DependsOn: []string{"extract"}},
		{Name: "join", Type: "noop", DependsOn: []string{"a", "b", "side"}},
		{Name: "late", Type: "noop", DependsOn: []string{"join", "extract"}},
	}}
	tasks := []dao.TaskInstance{{ID: 7, Name: "extract", State: dao.TaskSucceeded}, {ID: 8, Name: "a", State: dao.TaskFailed},
		{ID: 9, Name: "stray", State: dao.TaskQueued}}
	g := buildGraph(spec, tasks)
	got := map[string]graphNode{}
	for _, n := range g.Nodes {
		got[n.Name] = n
	}
	for _, tc := range []struct {
		name  string
		layer int
		state string
		id    int64
	}{
		{"extract", 0, "succeeded", 7}, {"side", 0, "pending", 0}, {"a", 1, "failed", 8}, {"b", 1, "pending", 0},
		{"join", 2, "pending", 0}, {"late", 3, "pending", 0}, {"stray", 4, "queued", 9},
	} {
		n, ok := got[tc.name]
		if !ok || n.Layer != tc.layer || n.State != tc.state || n.TaskID != tc.id {
			t.Errorf("node %s = %+v (present %v), want layer %d, state %s, task %d", tc.name, n, ok, tc.layer, tc.state, tc.id)
		}
	}
	if len(g.Edges) != 7 {
		t.Errorf("got %d edges, want 7", len(g.Edges))
	}
	if g.Width <= 4*nodeW || g.Height < 2*nodeH {
		t.Errorf("picture %dx%d is too small for 5 columns and 2 rows", g.Width, g.Height)
	}
	if n := buildGraph(nil, tasks); len(n.Nodes) != 3 || len(n.Edges) != 0 {
		t.Errorf("graph without a spec = %+v", n)
	}
}

func TestLogTextShowsControlCharacters(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain\n\ttext":            "plain\n\ttext",
		"\x1b[31mred\x1b[0m":       "␛[31mred␛[0m",
		"bell\x07 and \x00 null":   "bell␇ and ␀ null",
		"<b>kept for escaping</b>": "<b>kept for escaping</b>",
	} {
		if got := logText(in); got != want {
			t.Errorf("logText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBuildGraphDrawsAForEachAsOneNode: a for-each's items are no nodes of their own; its
// parent's node carries its state.
func TestBuildGraphDrawsAForEachAsOneNode(t *testing.T) {
	t.Parallel()
	spec := &workflow.Spec{Name: "w", Tasks: []workflow.Task{
		{Name: "sum", Type: "noop", ForEach: "a"},
		{Name: "after", Type: "noop", DependsOn: []string{"sum"}},
	}}
	tasks := []dao.TaskInstance{{ID: 1, Name: "sum", State: dao.TaskWaiting}, {ID: 2, Name: "sum[0]", State: dao.TaskRunning},
		{ID: 3, Name: "sum[1]", State: dao.TaskQueued}}
	g := buildGraph(spec, tasks)
	var got []string
	for _, n := range g.Nodes {
		got = append(got, n.Name+"="+n.State)
	}
	if want := "[sum=waiting after=pending]"; fmt.Sprint(got) != want {
		t.Errorf("nodes %v, want %s", got, want)
	}
}
