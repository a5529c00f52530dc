package workflow

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

var (
	// nameRE is the rule for workflow and task names: they appear in URLs, logs and the
	// command line, so they are kept to characters that need no quoting there.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

	// groupRE is the rule conf applies to worker group names; pools and providers follow it
	// too.
	groupRE   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	groupRule = "use 1 to 128 letters, digits, '_', '.' or '-'"

	envRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	envRule   = "use letters, digits and '_', not starting with a digit"
	paramRule = "use 1 to 128 letters, digits and '_', not starting with a digit"
)

// nameRule states nameRE in words.
const nameRule = "use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit"

// NameRule states the rule of workflow and task names, for the messages of those who check
// a name with ValidName.
const NameRule = nameRule

// ValidName reports whether s follows the rule of workflow and task names (NameRule).
func ValidName(s string) bool { return nameRE.MatchString(s) }

// maxNameLen is the longest name of a workflow, task, group, pool, provider or param.
const maxNameLen = 128

// problem is one thing wrong with a Spec, with the task and field it is about so that Parse
// can report the line they were on.
type problem struct {
	task  int    // index into Spec.Tasks; -1 for the workflow itself
	field string // YAML name of the field; "" for the whole task or workflow
	msg   string
}

// Validate checks everything Parse checks after reading the YAML: names, types and their
// fields, ranges, environment variable names, and that the dependencies form a DAG. It
// returns the problems (at most MaxErrors), each an *Error naming the task and field, joined
// with errors.Join; nil if there is none. It does not fill in defaults: an empty Group is an error here.
func (s *Spec) Validate() error {
	var errs errorList
	for _, p := range s.problems() {
		errs.add(0, p.msg)
	}
	return joinErrors(errs.list())
}

func (s *Spec) problems() []problem {
	var probs []problem
	add := func(task int, field, format string, args ...any) {
		probs = append(probs, problem{task: task, field: field, msg: fmt.Sprintf(format, args...)})
	}

	switch {
	case s.Name == "":
		add(-1, "name", "workflow name is required")
	case !nameRE.MatchString(s.Name):
		add(-1, "name", "workflow name %s is invalid: %s", quote(s.Name), nameRule)
	}
	probs = append(probs, s.paramDeclProblems()...)
	probs = append(probs, s.policyProblems()...)
	probs = append(probs, s.triggerProblems()...)
	probs = append(probs, s.onAssetsProblems()...)
	switch {
	case len(s.Tasks) == 0:
		add(-1, "tasks", "the workflow has no tasks")
		return probs
	case len(s.Tasks) > MaxTasks:
		// Checking a spec this size is the work the limit is there to refuse.
		add(-1, "tasks", "the workflow has %d tasks; the limit is %d", len(s.Tasks), MaxTasks)
		return probs
	}

	known := "known types: " + strings.Join(Types(), ", ")
	index := make(map[string]int, len(s.Tasks))
	for i := range s.Tasks {
		t := &s.Tasks[i]
		label := taskLabel(i, t.Name)
		addTask := func(field, format string, args ...any) {
			add(i, field, "%s: %s", label, fmt.Sprintf(format, args...))
		}

		first, dup := index[t.Name]
		if t.Name != "" && !dup {
			index[t.Name] = i
		}
		switch {
		case t.Name == "":
			addTask("name", "name is required")
		case !nameRE.MatchString(t.Name):
			addTask("name", "name is invalid: %s", nameRule)
		case dup:
			add(i, "name", "task #%d: name %s is already used by task #%d", i+1, quote(t.Name), first+1)
		}

		tt, ok := lookupType(t.Type)
		switch {
		case t.Type == "":
			addTask("type", "type is required (%s)", known)
		case !ok:
			addTask("type", "unknown type %s (%s)", quote(t.Type), known)
		default:
			if tt.check != nil {
				for _, p := range tt.check(t) {
					addTask(p.field, "%s", p.msg)
				}
			}
			foreign := foreignFields(tt, t)
			if p, ok := workflowKeyProblem(t); ok {
				addTask(p.field, "%s", p.msg)
				foreign = slices.DeleteFunc(foreign, func(f string) bool { return f == "workflow" || f == "workflow-run" })
			}
			for _, f := range foreign {
				addTask(f, "%s is a field of %s tasks, not of %s task",
					f, strings.Join(typesWithField(f), " and "), aType(tt.name))
			}
			if t.Type == TypeWorkflow && t.Workflow != "" && t.Workflow == s.Name {
				addTask("workflow", "workflow %s is this workflow: a workflow cannot start an instance of itself", quote(t.Workflow))
			}
		}

		if t.Retries < 0 || t.Retries > MaxRetries {
			addTask("retries", "retries %d is out of range 0..%d", t.Retries, MaxRetries)
		}
		if t.RetryInterval < 0 {
			addTask("retry-interval", "retry-interval %s is negative", t.RetryInterval)
		}
		for _, p := range retryProblems(t) {
			addTask(p.field, "%s", p.msg)
		}
		if t.Timeout < 0 {
			addTask("timeout", "timeout %s is negative", t.Timeout)
		}
		if t.Deadline < 0 {
			addTask("deadline", "deadline %s is negative", t.Deadline)
		}
		if t.Priority < MinPriority || t.Priority > MaxPriority {
			addTask("priority", "priority %d is out of range %d..%d", t.Priority, MinPriority, MaxPriority)
		}
		switch {
		case t.Group == "":
			addTask("group", "group is required")
		case !groupRE.MatchString(t.Group):
			addTask("group", "group %s is invalid: %s", quote(t.Group), groupRule)
		}
		if t.Pool != "" && !groupRE.MatchString(t.Pool) {
			addTask("pool", "pool %s is invalid: %s", quote(t.Pool), groupRule)
		}
		for _, k := range slices.Sorted(maps.Keys(t.Env)) {
			if !envRE.MatchString(k) {
				addTask("env", "env name %s is invalid: %s", quote(k), envRule)
			}
		}
		switch {
		case t.Trigger == "":
		case !slices.Contains(Triggers(), t.Trigger):
			addTask("trigger", "unknown trigger %s (known triggers: %s)", quote(t.Trigger), strings.Join(Triggers(), ", "))
		case len(t.DependsOn) == 0:
			addTask("trigger", "trigger %s needs depends-on: a task without dependencies starts with the run", t.Trigger)
		}
		if t.When != "" {
			for _, p := range checkTemplate(t, "when", "when", t.When, nil) {
				addTask(p.field, "%s", p.msg)
			}
		}
		for _, p := range checkForEach(t) {
			addTask(p.field, "%s", p.msg)
		}
		for _, p := range checkOutput(t) {
			addTask(p.field, "%s", p.msg)
		}
		for _, p := range producesProblems(t) {
			addTask(p.field, "%s", p.msg)
		}
	}

	probs = append(probs, s.assetRefProblems()...)

	// Dependencies are checked once every name is known, so a task may depend on one written
	// after it.
	for i, t := range s.Tasks {
		label := taskLabel(i, t.Name)
		listed := make(map[string]bool, len(t.DependsOn))
		for _, dep := range t.DependsOn {
			switch _, exists := index[dep]; {
			case listed[dep]:
				add(i, "depends-on", "%s lists dependency %s twice", label, quote(dep))
			case dep == t.Name:
				add(i, "depends-on", "%s depends on itself", label)
			case !exists:
				add(i, "depends-on", "%s depends on %s, which is not a task of this workflow", label, quote(dep))
			}
			listed[dep] = true
		}
	}
	for _, cycle := range s.cycles(index) {
		var names []string
		for k, i := range cycle {
			if k == maxListed && len(cycle) > maxListed+1 {
				names = append(names, fmt.Sprintf("… (%d tasks more) …", len(cycle)-maxListed-1), clip(s.Tasks[cycle[len(cycle)-1]].Name))
				break
			}
			names = append(names, clip(s.Tasks[i].Name))
		}
		add(cycle[0], "depends-on", "dependency cycle: %s (each task depends on the one before it)",
			strings.Join(names, " -> "))
	}
	return probs
}

// foreignFields returns the type-specific fields set on t that do not belong to its type tt.
func foreignFields(tt taskType, t *Task) []string {
	var names []string
	for _, other := range taskTypes {
		for _, f := range other.fields {
			if _, own := findField(tt.fields, f.name); own || slices.Contains(names, f.name) {
				continue
			}
			if f.isSet(t) {
				names = append(names, f.name)
			}
		}
	}
	return names
}

// cycles finds the dependency cycles among the tasks in index (the first task of each name):
// one per strongly connected component of the graph, so that two separate cycles are both
// reported and one tangle is reported once. Each cycle is a list of task positions in run
// order — every task depends on the one before it — starting and ending with the task of the
// component written first in the file. Self-dependencies are left to their own message.
func (s *Spec) cycles(index map[string]int) [][]int {
	n := len(s.Tasks)
	down := make([][]int, n) // down[u]: tasks that depend on u, in file order
	for i, t := range s.Tasks {
		if index[t.Name] != i {
			continue
		}
		for _, dep := range t.DependsOn {
			// Tasks are visited in file order, so a repeated dependency can only repeat
			// the last entry.
			if j, ok := index[dep]; ok && j != i && (len(down[j]) == 0 || down[j][len(down[j])-1] != i) {
				down[j] = append(down[j], i)
			}
		}
	}

	var cycles [][]int
	for _, comp := range stronglyConnected(down) {
		if len(comp) < 2 {
			continue
		}
		cycles = append(cycles, shortestCycle(down, comp))
	}
	slices.SortFunc(cycles, func(a, b []int) int { return a[0] - b[0] })
	return cycles
}

// shortestCycle returns a shortest cycle through the first (in file order) task of the
// strongly connected component comp, found breadth-first so the message stays short and
// the same for the same file.
func shortestCycle(down [][]int, comp []int) []int {
	in := make(map[int]bool, len(comp))
	for _, v := range comp {
		in[v] = true
	}
	start := slices.Min(comp)
	parent := map[int]int{start: -1}
	queue := []int{start}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, v := range down[u] {
			if v == start {
				cycle := []int{start}
				for w := u; w != start; w = parent[w] {
					cycle = append(cycle, w)
				}
				slices.Reverse(cycle[1:])
				return append(cycle, start)
			}
			if _, seen := parent[v]; !seen && in[v] {
				parent[v] = u
				queue = append(queue, v)
			}
		}
	}
	// Unreachable: every member of a strongly connected component lies on a cycle.
	return []int{start, start}
}

// stronglyConnected returns the strongly connected components of the graph given as
// adjacency lists, by Tarjan's algorithm. It keeps its own stack rather than recursing, as a
// chain of 10,000 tasks would recurse 10,000 deep.
func stronglyConnected(adj [][]int) [][]int {
	n := len(adj)
	const unvisited = -1
	order := make([]int, n) // discovery order of each vertex
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range order {
		order[i] = unvisited
	}
	var (
		comps   [][]int
		stack   []int
		counter int
	)
	type frame struct{ v, next int }
	for root := range n {
		if order[root] != unvisited {
			continue
		}
		calls := []frame{{v: root}}
		order[root], low[root] = counter, counter
		counter++
		stack = append(stack, root)
		onStack[root] = true
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			if f.next < len(adj[f.v]) {
				w := adj[f.v][f.next]
				f.next++
				switch {
				case order[w] == unvisited:
					order[w], low[w] = counter, counter
					counter++
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{v: w})
				case onStack[w]:
					low[f.v] = min(low[f.v], order[w])
				}
				continue
			}
			v := f.v
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				parent := calls[len(calls)-1].v
				low[parent] = min(low[parent], low[v])
			}
			if low[v] == order[v] {
				var comp []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				comps = append(comps, comp)
			}
		}
	}
	return comps
}
