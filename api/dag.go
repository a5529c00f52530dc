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
	Nodes []graphNode `json:"nodes"`
	Edges []graphEdge `json:"edges"`
	// Summarized is set when the graph has more than maxGraphNodes tasks: each node then
	// stands for a layer, with its tasks counted by state, and each edge for the
	// dependencies from one layer to another.
	Summarized bool `json:"summarized,omitempty"`
	// Tasks is how many tasks the graph has, drawn or summarized.
	Tasks  int `json:"tasks"`
	Width  int `json:"-"`
	Height int `json:"-"`
}

// maxGraphNodes is the most tasks a graph draws one by one. Above it a picture of every
// task is too large to read and to send (its layout, its SVG and its JSON grow with every
// task and edge), so the graph is summarized by layer.
const maxGraphNodes = 2000

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
	// Count and States are set on the node of a summarized graph's layer: how many tasks it
	// stands for, and how many of them are in each state ("pending" for those not created).
	Count  int            `json:"count,omitempty"`
	States map[string]int `json:"states,omitempty"`
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
// the items of its for-each tasks, which their task's node stands for. Above maxGraphNodes
// tasks the graph is summarized (see summarize).
func buildGraph(spec *workflow.Spec, tasks []dao.TaskBrief) graph {
	byName := map[string]dao.TaskBrief{}
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
	// The spec's tasks by name: spec.Task looks one up by a walk of them all.
	specTasks := map[string]*workflow.Task{}
	if spec != nil {
		for i := range spec.Tasks {
			specTasks[spec.Tasks[i].Name] = &spec.Tasks[i]
		}
		for _, name := range spec.Order() {
			t := specTasks[name]
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
		if name, _, item := workflow.ParseItemName(t.Name); item {
			if ft, ok := specTasks[name]; ok && ft.ForEach != "" {
				continue
			}
		}
		place(t.Name, extra)
	}
	placed := len(layerOf)
	if placed > maxGraphNodes {
		return summarize(layers, layerOf, deps, byName, extra)
	}
	g.Tasks = placed
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

// stateRank orders the states a summarized layer may show as its own: the first present among
// its tasks, so that a layer with a failure reads as failed, one still at work as running.
var stateRank = []string{string(dao.TaskFailed), string(dao.TaskKilled), string(dao.TaskRunning), string(dao.TaskWaiting),
	string(dao.TaskQueued), statePending, string(dao.TaskSkipped), string(dao.TaskSucceeded)}

// summarize is the graph of layers, each a node counting its tasks by state, with an edge
// from a layer to another where a task of the one depends on a task of the other. The layer
// extra, if there is one, holds the tasks the spec does not name.
func summarize(layers [][]string, layerOf map[string]int, deps map[string][]string, byName map[string]dao.TaskBrief, extra int) graph {
	g := graph{Summarized: true, Tasks: len(layerOf)}
	for li, names := range layers {
		states := map[string]int{}
		for _, n := range names {
			st := statePending
			if t, ok := byName[n]; ok {
				st = string(t.State)
			}
			states[st]++
		}
		node := graphNode{Name: fmt.Sprintf("layer %d", li), Layer: li, Count: len(names), States: states,
			X: margin + li*(nodeW+gapX), Y: margin}
		if li == extra {
			node.Name = "other tasks"
		}
		node.Label = cut(fmt.Sprintf("%s: %d tasks", node.Name, len(names)), labelRunes)
		node.State = statePending
		for _, st := range stateRank {
			if states[st] > 0 {
				node.State = st
				break
			}
		}
		g.Nodes = append(g.Nodes, node)
	}
	linked := map[[2]int]bool{}
	for name, ds := range deps {
		for _, d := range ds {
			from, ok := layerOf[d]
			if !ok || linked[[2]int{from, layerOf[name]}] {
				continue
			}
			linked[[2]int{from, layerOf[name]}] = true
		}
	}
	for li := range layers {
		for lj := range layers {
			if !linked[[2]int{li, lj}] {
				continue
			}
			a, b := g.Nodes[li], g.Nodes[lj]
			x1, y1 := a.X+nodeW, a.Y+nodeH/2
			x2, y2 := b.X-4, b.Y+nodeH/2
			mid := (x1 + x2) / 2
			// An edge that skips layers bends below the row, so it is not hidden by the boxes.
			bend := y1 + (lj-li-1)*(nodeH/2+gapY)
			g.Edges = append(g.Edges, graphEdge{From: a.Name, To: b.Name,
				Path: fmt.Sprintf("M%d %d C%d %d, %d %d, %d %d", x1, y1, mid, bend, mid, bend, x2, y2)})
		}
	}
	g.Width = 2*margin + max(len(layers), 1)*(nodeW+gapX) - gapX
	g.Height = 2*margin + nodeH + min(len(layers), 8)*(nodeH/2+gapY)
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
