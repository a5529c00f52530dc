package workflow

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	tparse "text/template/parse"

	"go.yaml.in/yaml/v3"
)

// The fields of llm and agent tasks. prompt, provider, system, temperature and max-tokens
// belong to both types (an agent has a prompt when its model calls tools, see tool.go).
var (
	promptField = stringField("prompt", func(t *Task) *string { return &t.Prompt })
	modelFields = []field{
		stringField("provider", func(t *Task) *string { return &t.Provider }),
		stringField("system", func(t *Task) *string { return &t.System }),
		floatField("temperature", func(t *Task) **float64 { return &t.Temperature }),
		intField("max-tokens", func(t *Task) *int { return &t.MaxTokens }),
	}
	stepsField = field{
		name:   "steps",
		decode: func(d *decoder, v *yaml.Node, t *Task, where string) { t.Steps = d.steps(v, where+": steps") },
		isSet:  func(t *Task) bool { return len(t.Steps) > 0 },
	}
)

// Bounds of the model fields.
const (
	// MaxTemperature is the highest temperature a task may ask for; the providers accept 0..2.
	MaxTemperature = 2.0
	// MaxSteps is the most steps an agent task may have.
	MaxSteps = 100
)

func floatField(name string, p func(*Task) **float64) field {
	return field{
		name: name,
		decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
			if f, ok := d.number(v, where+": "+name); ok {
				*p(t) = &f
			}
		},
		isSet: func(t *Task) bool { return *p(t) != nil },
	}
}

// stepFields are the keys of one agent step.
var stepFields = []string{"name", "prompt", "wait", "timeout", "on-timeout"}

// steps reads an agent task's list of steps, each a mapping with name and prompt, or name and
// wait: true (with timeout and on-timeout).
func (d *decoder) steps(v *yaml.Node, what string) []Step {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(v.Line, "%s must be a list of steps, like [{name: a, prompt: \"...\"}], not %s", what, kindName(v))
		return nil
	}
	var steps []Step
	for i, item := range v.Content {
		if !d.visit(1) {
			return nil
		}
		item = d.resolve(item)
		where := fmt.Sprintf("%s #%d", what, i+1)
		if item.Kind != yaml.MappingNode {
			d.errorf(item.Line, "%s must be a mapping with name and prompt, not %s", where, kindName(item))
			continue
		}
		var st Step
		for _, kv := range d.mapping(item, where) {
			switch key := kv.key.Value; key {
			case "name":
				st.Name, _ = d.scalar(kv.value, where+": name", "a string")
			case "prompt":
				st.Prompt, _ = d.scalar(kv.value, where+": prompt", "a string")
			case "wait":
				n := d.resolve(kv.value)
				if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&st.Wait) != nil {
					d.errorf(n.Line, "%s: wait must be true or false, not %s", where, kindName(n))
				}
			case "timeout":
				if v, ok := d.durationValue(kv.value, where+": timeout"); ok {
					st.Timeout = Duration(v)
				}
			case "on-timeout":
				st.OnTimeout, _ = d.scalar(kv.value, where+": on-timeout", "a string")
			default:
				d.errorf(kv.key.Line, "unknown field %s in %s (a step has name and prompt, or name and wait: true "+
					"with timeout and on-timeout)%s", quote(key), where, didYouMean(key, stepFields))
			}
		}
		steps = append(steps, st)
	}
	return steps
}

// checkModel checks the fields llm and agent tasks share.
func checkModel(t *Task) []problem {
	var probs []problem
	switch {
	case t.Provider == "":
		probs = append(probs, problem{field: "provider", msg: fmt.Sprintf(
			"provider is required for an %s task: the name of a provider under llm.providers in the config", t.Type)})
	case !groupRE.MatchString(t.Provider):
		probs = append(probs, problem{field: "provider", msg: fmt.Sprintf("provider %s is invalid: %s", quote(t.Provider), groupRule)})
	}
	if t.Temperature != nil && (*t.Temperature < 0 || *t.Temperature > MaxTemperature) {
		probs = append(probs, problem{field: "temperature", msg: fmt.Sprintf("temperature %g is out of range 0..%g", *t.Temperature, MaxTemperature)})
	}
	if t.MaxTokens < 0 {
		probs = append(probs, problem{field: "max-tokens", msg: fmt.Sprintf("max-tokens %d is negative; 0 leaves the model's default", t.MaxTokens)})
	}
	if t.System != "" {
		probs = append(probs, checkTemplate(t, "system", "system prompt", t.System, nil)...)
	}
	return probs
}

func checkLLM(t *Task) []problem {
	probs := checkModel(t)
	if strings.TrimSpace(t.Prompt) == "" {
		return append(probs, problem{field: "prompt", msg: "prompt is required for an llm task"})
	}
	return append(probs, checkTemplate(t, "prompt", "prompt", t.Prompt, nil)...)
}

// checkAgent checks an agent task: one with steps, or a tool-calling agent (checkToolAgent),
// which has a prompt and tools instead.
func checkAgent(t *Task) []problem {
	probs := checkModel(t)
	if len(t.Steps) == 0 && (t.Prompt != "" || t.Workdir != "" || slices.ContainsFunc(loopFields, func(f field) bool { return f.isSet(t) })) {
		return append(probs, checkToolAgent(t)...)
	}
	probs = append(probs, checkNoLoop(t)...)
	switch {
	case len(t.Steps) == 0:
		return append(probs, problem{field: "steps", msg: "steps are required for an agent task: a list of {name, prompt}; " +
			"or, for an agent whose model calls tools, a prompt and tools"})
	case len(t.Steps) > MaxSteps:
		return append(probs, problem{field: "steps", msg: fmt.Sprintf("the agent has %d steps; the limit is %d", len(t.Steps), MaxSteps)})
	}
	seen := make(map[string]int, len(t.Steps))
	var earlier []string
	for i, st := range t.Steps {
		label := fmt.Sprintf("step #%d", i+1)
		if st.Name != "" {
			label = "step " + quote(st.Name)
		}
		add := func(format string, args ...any) {
			probs = append(probs, problem{field: "steps", msg: label + ": " + fmt.Sprintf(format, args...)})
		}
		first, dup := seen[st.Name]
		switch {
		case st.Name == "":
			add("name is required")
		case !nameRE.MatchString(st.Name):
			add("name is invalid: %s", nameRule)
		case dup:
			add("name is already used by step #%d", first+1)
		default:
			seen[st.Name] = i
		}
		switch {
		case st.Wait && st.Prompt != "":
			add("a wait step has no prompt: the signal that ends its wait gives its output")
		case st.Wait:
		case strings.TrimSpace(st.Prompt) == "":
			add("the prompt is empty (a step that waits for a signal instead says wait: true)")
		default:
			probs = append(probs, checkTemplate(t, "steps", label+" prompt", st.Prompt, append([]string{}, earlier...))...)
		}
		switch {
		case !st.Wait && (st.Timeout != 0 || st.OnTimeout != ""):
			add("timeout and on-timeout belong to wait steps (wait: true); the task's timeout bounds each attempt")
		case st.Timeout < 0:
			add("timeout %s is negative", st.Timeout)
		case st.OnTimeout != "" && st.OnTimeout != OnTimeoutFail && st.OnTimeout != OnTimeoutSucceed:
			add("on-timeout %s is unknown: use %s or %s", quote(st.OnTimeout), OnTimeoutFail, OnTimeoutSucceed)
		}
		if st.Name != "" {
			earlier = append(earlier, st.Name)
		}
	}
	return probs
}

// checkTemplate parses a prompt template, refuses what Render would refuse whatever the data
// (see staticProblem), and checks what it refers to: .upstream.<name>
// must be a dependency of the task, .steps.<name> a step before this one (steps is nil
// outside an agent's steps). References inside {{with}} and {{range}}, where the dot is
// something else, and .params, which `zksched submit --param` may add to, are left to run
// time.
func checkTemplate(t *Task, field, what, text string, steps []string) []problem {
	tmpl, err := parseTemplate(what, text)
	if err != nil {
		return []problem{{field: field, msg: err.Error()}}
	}
	if err := staticProblem(tmpl); err != nil {
		return []problem{{field: field, msg: fmt.Sprintf("%s: %v", what, err)}}
	}
	var probs []problem
	// A for-each task's items are rendered before they exist: only what the task runs on
	// each item sees one.
	items := t.ForEach != "" && field != "when" && field != "for-each"
	for _, ref := range templateRefs(tmpl) {
		if msg := checkRef(t, ref, steps, items, field == "workflow-run"); msg != "" {
			probs = append(probs, problem{field: field, msg: fmt.Sprintf("%s: %s", what, msg)})
		}
	}
	return probs
}

func checkRef(t *Task, path []string, steps []string, items, run bool) string {
	ref := clip("." + strings.Join(path, "."))
	switch path[0] {
	case "params":
		return ""
	case "run":
		switch {
		case !run:
			return fmt.Sprintf("%s: only a workflow sensor's since has .run", ref)
		case len(path) > 1 && !slices.Contains(runFields, path[1]):
			return fmt.Sprintf("%s: the run has only .%s", ref, strings.Join(runFields, ", ."))
		case len(path) > 2:
			return fmt.Sprintf("%s: .%s has no fields", ref, path[1])
		}
		return ""
	case "assets":
		switch {
		case len(path) > 2 && path[2] != "output" && path[2] != "event":
			return fmt.Sprintf("%s: an asset event has only .output and .event", ref)
		case len(path) > 3:
			return fmt.Sprintf("%s: .%s has no fields", ref, path[2])
		}
		return ""
	case "item", "index":
		switch {
		case t.ForEach == "":
			return fmt.Sprintf("%s: only a task with for-each has .item and .index", ref)
		case !items:
			return fmt.Sprintf("%s: the items do not exist yet where for-each and when are rendered; the prompts of each item see them", ref)
		case len(path) > 1:
			return fmt.Sprintf("%s: .%s has no fields", ref, path[0])
		}
		return ""
	case "upstream":
		switch {
		case len(path) == 1:
			return ""
		case !slices.Contains(t.DependsOn, path[1]):
			if len(t.DependsOn) == 0 {
				return fmt.Sprintf("%s refers to task %s, but the task has no depends-on: only the outputs of its dependencies are available", ref, quote(path[1]))
			}
			return fmt.Sprintf("%s refers to task %s, which is not in depends-on (%s): only the outputs of dependencies are available",
				ref, quote(path[1]), nameList(t.DependsOn))
		case len(path) > 2 && path[2] != "output":
			return fmt.Sprintf("%s: an upstream task has only .output", ref)
		case len(path) > 3:
			return fmt.Sprintf("%s: .output is a string, it has no fields", ref)
		}
		return ""
	case "steps":
		switch {
		case steps == nil:
			return fmt.Sprintf("%s: only the prompts of an agent's steps can use .steps", ref)
		case len(path) == 1:
			return ""
		case !slices.Contains(steps, path[1]):
			if len(steps) == 0 {
				return fmt.Sprintf("%s: the first step has no earlier steps to use", ref)
			}
			return fmt.Sprintf("%s: %s is not an earlier step (earlier steps: %s)", ref, quote(path[1]), nameList(steps))
		case len(path) > 2:
			return fmt.Sprintf("%s: a step's output is a string, it has no fields", ref)
		}
		return ""
	}
	if t.ForEach != "" {
		return fmt.Sprintf("%s is unknown: a prompt can use .params.<name>, .upstream.<task>.output, in an agent's steps "+
			".steps.<step> and, in a for-each task's prompts, .item and .index", ref)
	}
	return fmt.Sprintf("%s is unknown: a prompt can use .params.<name>, .upstream.<task>.output and, in an agent's steps, .steps.<step>", ref)
}

// templateRefs returns the field paths a template reads from its data (.upstream.a.output is
// [upstream a output]; {{index .upstream "a-b" "output"}} is [upstream a-b output]), outside
// {{with}} and {{range}} bodies, where the dot is not the data.
func templateRefs(tmpl *template.Template) [][]string {
	var refs [][]string
	var walk func(n tparse.Node, dotIsData bool)
	walkPipe := func(p *tparse.PipeNode, dotIsData bool) {
		if p != nil {
			walk(p, dotIsData)
		}
	}
	walk = func(n tparse.Node, dotIsData bool) {
		switch n := n.(type) {
		case *tparse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c, dotIsData)
			}
		case *tparse.ActionNode:
			walkPipe(n.Pipe, dotIsData)
		case *tparse.IfNode:
			walkPipe(n.Pipe, dotIsData)
			walk(n.List, dotIsData)
			walk(n.ElseList, dotIsData)
		case *tparse.RangeNode:
			walkPipe(n.Pipe, dotIsData)
			walk(n.List, false)
			walk(n.ElseList, dotIsData)
		case *tparse.WithNode:
			walkPipe(n.Pipe, dotIsData)
			walk(n.List, false)
			walk(n.ElseList, dotIsData)
		case *tparse.TemplateNode:
			walkPipe(n.Pipe, dotIsData)
		case *tparse.PipeNode:
			for _, c := range n.Cmds {
				walk(c, dotIsData)
			}
		case *tparse.CommandNode:
			if ref := indexRef(n, dotIsData); ref != nil {
				refs = append(refs, ref)
				return
			}
			for _, a := range n.Args {
				walk(a, dotIsData)
			}
		case *tparse.FieldNode:
			if dotIsData {
				refs = append(refs, n.Ident)
			}
		case *tparse.VariableNode:
			if len(n.Ident) > 1 && n.Ident[0] == "$" {
				refs = append(refs, n.Ident[1:])
			}
		case *tparse.ChainNode:
			walk(n.Node, dotIsData)
		}
	}
	walk(tmpl.Tree.Root, true)
	return refs
}

// indexRef reads {{index .upstream "name" "output"}} and {{index .steps "name"}} as the path
// they stand for, or returns nil for any other command.
func indexRef(c *tparse.CommandNode, dotIsData bool) []string {
	if len(c.Args) < 2 {
		return nil
	}
	if id, ok := c.Args[0].(*tparse.IdentifierNode); !ok || id.Ident != "index" {
		return nil
	}
	var base []string
	switch a := c.Args[1].(type) {
	case *tparse.FieldNode:
		if !dotIsData {
			return nil
		}
		base = a.Ident
	case *tparse.VariableNode:
		if len(a.Ident) < 2 || a.Ident[0] != "$" {
			return nil
		}
		base = a.Ident[1:]
	default:
		return nil
	}
	path := slices.Clone(base)
	for _, a := range c.Args[2:] {
		s, ok := a.(*tparse.StringNode)
		if !ok {
			return base // a computed key: only the base can be checked
		}
		path = append(path, s.Text)
	}
	return path
}

// UpstreamEnv returns the environment variable that gives a shell task the output of its
// upstream task name: ZKSCHED_UPSTREAM_<name>_OUTPUT, with every character of the name other
// than a letter, a digit or '_' (that is, '-' and '.') turned into '_', and the case kept, as
// in ZKSCHED_PARAM_<name>: the output of fetch-data is $ZKSCHED_UPSTREAM_fetch_data_OUTPUT.
func UpstreamEnv(name string) string {
	return "ZKSCHED_UPSTREAM_" + EnvSafe(name) + "_OUTPUT"
}

// EnvSafe is name as part of an environment variable's name: every character other than a
// letter, a digit or '_' becomes '_', and the case is kept.
func EnvSafe(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, name)
}

// upstreamEnvProblems reports dependencies of a shell task whose outputs would land in the
// same environment variable (fetch-data and fetch.data).
func upstreamEnvProblems(t *Task) []problem {
	byEnv := make(map[string][]string)
	for _, dep := range t.DependsOn {
		env := UpstreamEnv(dep)
		if !slices.Contains(byEnv[env], dep) {
			byEnv[env] = append(byEnv[env], dep)
		}
	}
	var probs []problem
	for _, env := range slices.Sorted(maps.Keys(byEnv)) {
		if deps := byEnv[env]; len(deps) > 1 {
			probs = append(probs, problem{field: "depends-on", msg: fmt.Sprintf(
				"dependencies %s would all pass their output as $%s; rename one of them",
				strings.Join(deps, " and "), env)})
		}
	}
	return probs
}

// CheckConfigured reports the tasks that name a provider or a pool the config does not
// have: `zksched submit` calls it with its own config (the one the cluster runs with, as a
// rule), so that a typo is refused at submit time rather than failing, or never being
// limited, at run time. Each problem is an *Error; nil if there is none.
func (s *Spec) CheckConfigured(providers, pools []string) error {
	var errs []error
	for i, t := range s.Tasks {
		label := taskLabel(i, t.Name)
		if t.Provider != "" && !slices.Contains(providers, t.Provider) {
			known := "none is configured"
			if len(providers) > 0 {
				known = "configured: " + strings.Join(providers, ", ")
			}
			errs = append(errs, &Error{Msg: fmt.Sprintf("%s: provider %s is not in the config's llm.providers (%s)", label, quote(t.Provider), known)})
		}
		if t.Pool != "" && !slices.Contains(pools, t.Pool) {
			known := "none is configured"
			if len(pools) > 0 {
				known = "configured: " + strings.Join(pools, ", ")
			}
			errs = append(errs, &Error{Msg: fmt.Sprintf("%s: pool %s has no limit in the config's pools (%s); add it, "+
				"as pools: {%s: N}", label, quote(t.Pool), known, clip(t.Pool))})
		}
	}
	return errors.Join(errs...)
}
