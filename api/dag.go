package api

import (
	"fmt"
	"slices"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// graph is a workflow instance's DAG laid out for an SVG picture: a column per layer (a task
// sits one column right of its furthest dependency), tasks ordered within a column by where
// their dependencies are, so edges cross little.
type graph struct {
	Nodes  []graphNode `json:"nodes"`
	Edges  []graphEdge `json:"edges"`
	Width  int         `json:"-"`
	Height int         `json:"-"`
}

type graphNode struct {
	Name string `json:"name"`
	// State is the task instance's state, or "pending" when the master has not created it
	// (its dependencies are not done yet).
	State string `json:"state"`
	// TaskID is the task instance, 0 while pending.
	TaskID int64 `json:"task_instance_id,omitempty"`
	Layer  int   `json:"layer"`
	X, Y   int   `json:"-"`
	// Label is Name cut to fit the box; the full name is in the SVG title.
	Label string `json:"-"`
}

type graphEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Path is the SVG path from the right of From to the left of To.
	Path string `json:"-"`
}

// Sizes of the picture, in SVG units.
const (
	nodeW, nodeH = 168, 34
	gapX, gapY   = 56, 16
	margin       = 12
	labelRunes   = 22
)

// NodeW and NodeH are the box size, for the template.
func (graph) NodeW() int { return nodeW }

// NodeH is the box height.
func (graph) NodeH() int { return nodeH }

const statePending = "pending"

// buildGraph lays out spec's tasks with the states of the task instances. Task instances the
// spec does not name (or all of them, when spec is nil) get a column of their own, but for
// the items of its for-each tasks, which their task's node stands for.
func buildGraph(spec *workflow.Spec, tasks []dao.TaskInstance) graph {
	byName := map[string]dao.TaskInstance{}
	for _, t := range tasks {
		byName[t.Name] = t
	}
	var g graph
	layerOf := map[string]int{}
	var layers [][]string
	place := func(name string, layer int) {
		layerOf[name] = layer
		for len(layers) <= layer {
			layers = append(layers, nil)
		}
		layers[layer] = append(layers[layer], name)
	}
	deps := map[string][]string{}
	if spec != nil {
		for _, name := range spec.Order() {
			t, _ := spec.Task(name)
			layer := 0
			for _, d := range t.DependsOn {
				if l, ok := layerOf[d]; ok {
					layer = max(layer, l+1)
				}
			}
			deps[name] = t.DependsOn
			place(name, layer)
		}
	}
	extra := len(layers)
	for _, t := range tasks {
		if _, ok := layerOf[t.Name]; ok {
			continue
		}
		// A for-each's items are drawn as its one node, the parent's: there may be thousands.
		if name, _, item := workflow.ParseItemName(t.Name); item && spec != nil {
			if ft, ok := spec.Task(name); ok && ft.ForEach != "" {
				continue
			}
		}
		place(t.Name, extra)
	}
	// Order each column by the mean row of each task's dependencies in the column before.
	row := map[string]float64{}
	for li, names := range layers {
		if li > 0 {
			key := map[string]float64{}
			for i, n := range names {
				sum, cnt := 0.0, 0
				for _, d := range deps[n] {
					if r, ok := row[d]; ok {
						sum += r
						cnt++
					}
				}
				key[n] = float64(i) / 1000 // keep file order among equals
				if cnt > 0 {
					key[n] += sum / float64(cnt)
				}
			}
			slices.SortStableFunc(names, func(a, b string) int {
				switch {
				case key[a] < key[b]:
					return -1
				case key[a] > key[b]:
					return 1
				}
				return 0
			})
		}
		for i, n := range names {
			row[n] = float64(i)
		}
	}
	rows := 0
	for li, names := range layers {
		rows = max(rows, len(names))
		for i, n := range names {
			node := graphNode{Name: n, State: statePending, Layer: li, X: margin + li*(nodeW+gapX),
				Y: margin + i*(nodeH+gapY), Label: cut(n, labelRunes)}
			if t, ok := byName[n]; ok {
				node.State, node.TaskID = string(t.State), t.ID
			}
			g.Nodes = append(g.Nodes, node)
		}
	}
	pos := map[string]graphNode{}
	for _, n := range g.Nodes {
		pos[n.Name] = n
	}
	for _, n := range g.Nodes {
		for _, d := range deps[n.Name] {
			from, ok := pos[d]
			if !ok {
				continue
			}
			x1, y1 := from.X+nodeW, from.Y+nodeH/2
			x2, y2 := n.X-4, n.Y+nodeH/2
			mid := (x1 + x2) / 2
			g.Edges = append(g.Edges, graphEdge{From: d, To: n.Name,
				Path: fmt.Sprintf("M%d %d C%d %d, %d %d, %d %d", x1, y1, mid, y1, mid, y2, x2, y2)})
		}
	}
	g.Width = 2*margin + max(len(layers), 1)*(nodeW+gapX) - gapX
	g.Height = 2*margin + max(rows, 1)*(nodeH+gapY) - gapY
	return g
}

// cut shortens s to n runes, marking the cut with an ellipsis.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
