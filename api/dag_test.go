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
	tasks := []dao.TaskBrief{{ID: 7, Name: "extract", State: dao.TaskSucceeded}, {ID: 8, Name: "a", State: dao.TaskFailed},
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
	tasks := []dao.TaskBrief{{ID: 1, Name: "sum", State: dao.TaskWaiting}, {ID: 2, Name: "sum[0]", State: dao.TaskRunning},
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

// TestBuildGraphSummarizesALargeGraph: above maxGraphNodes tasks, each node is a layer with
// its tasks counted by state, and an edge joins layers with dependencies between them.
func TestBuildGraphSummarizesALargeGraph(t *testing.T) {
	t.Parallel()
	spec := &workflow.Spec{Name: "w", Tasks: []workflow.Task{{Name: "root", Type: "noop"}}}
	for i := range maxGraphNodes + 500 {
		spec.Tasks = append(spec.Tasks, workflow.Task{Name: fmt.Sprintf("mid-%d", i), Type: "noop", DependsOn: []string{"root"}})
	}
	spec.Tasks = append(spec.Tasks, workflow.Task{Name: "end", Type: "noop", DependsOn: []string{"mid-0", "root"}})
	tasks := []dao.TaskBrief{{ID: 1, Name: "root", State: dao.TaskSucceeded}, {ID: 2, Name: "mid-0", State: dao.TaskFailed},
		{ID: 3, Name: "mid-1", State: dao.TaskRunning}, {ID: 4, Name: "stray", State: dao.TaskQueued}}
	g := buildGraph(spec, tasks)
	if !g.Summarized || g.Tasks != maxGraphNodes+503 {
		t.Fatalf("summarized %v, %d tasks; want a summary of %d tasks", g.Summarized, g.Tasks, maxGraphNodes+503)
	}
	var got []string
	for _, n := range g.Nodes {
		got = append(got, fmt.Sprintf("%s=%s/%d/%v", n.Name, n.State, n.Count, n.States))
	}
	want := fmt.Sprintf("[layer 0=succeeded/1/map[succeeded:1] layer 1=failed/%d/map[failed:1 pending:%d running:1] "+
		"layer 2=pending/1/map[pending:1] other tasks=queued/1/map[queued:1]]", maxGraphNodes+500, maxGraphNodes+498)
	if fmt.Sprint(got) != want {
		t.Errorf("nodes\n%v\nwant\n%s", got, want)
	}
	var edges []string
	for _, e := range g.Edges {
		edges = append(edges, e.From+"→"+e.To)
	}
	if want := "[layer 0→layer 1 layer 0→layer 2 layer 1→layer 2]"; fmt.Sprint(edges) != want {
		t.Errorf("edges %v, want %s", edges, want)
	}
	if g.Width < 4*nodeW || g.Height < nodeH || g.Height > 1000 {
		t.Errorf("picture %dx%d: want 4 columns in one row", g.Width, g.Height)
	}
}
