package workflow

import (
	"fmt"
	"maps"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Assets are named pieces of data that tasks produce and workflows wait for. A task that
// declares produces: [A] writes an asset event of A each time it succeeds, with its output;
// a workflow that declares on-assets: {all: [A, B]} (or any:) is started by the masters once
// every (any) named asset has had an event since its last asset-started run.

// OnAssets is a workflow's on-assets: the assets whose events start a run of it. Exactly one
// of All and Any is set.
type OnAssets struct {
	// All starts a run once each of these assets has had an event since the last run they
	// started: one run per set of events, one of each.
	All []string `json:"all,omitempty" yaml:"all,omitempty"`
	// Any starts a run for each event of any of these assets.
	Any []string `json:"any,omitempty" yaml:"any,omitempty"`
}

// Assets returns the assets named, and whether a run needs an event of each (all) or of one
// (any).
func (o *OnAssets) Assets() (names []string, all bool) {
	if len(o.All) > 0 {
		return o.All, true
	}
	return o.Any, false
}

// AssetInput is one asset event a run started on, as its templates read it.
type AssetInput struct {
	// Output is the producer's output (the first 64 KiB).
	Output string `json:"output"`
	// Event is the event's id.
	Event int64 `json:"event"`
}

// MaxAssetsPerList bounds produces and on-assets lists.
const MaxAssetsPerList = 64

// onAssetsFields are the keys of the on-assets mapping.
var onAssetsFields = []string{"all", "any"}

// assetList reads a list of asset names; an empty list is kept as an empty, non-nil slice so
// that validation can refuse it instead of reading it as left out.
func (d *decoder) assetList(v *yaml.Node, what string) []string {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	list := d.stringList(v, what, "asset names")
	if list == nil && v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
		return []string{}
	}
	return list
}

// producesField is a task's produces: the assets its success produces.
var producesField = field{
	name: "produces",
	decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
		t.Produces = d.assetList(v, where+": produces")
	},
	isSet: func(t *Task) bool { return t.Produces != nil },
}

// decodeOnAssets reads the on-assets mapping.
func (d *decoder) decodeOnAssets(v *yaml.Node) *OnAssets {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "on-assets must be a mapping, like {all: [orders, customers]} or {any: [orders]}, not %s", kindName(v))
		return nil
	}
	o := &OnAssets{}
	for _, kv := range d.mapping(v, "on-assets") {
		key := kv.key.Value
		d.pos.fields["on-assets."+key] = kv.key.Line
		switch key {
		case "all":
			o.All = d.assetList(kv.value, "on-assets: all")
		case "any":
			o.Any = d.assetList(kv.value, "on-assets: any")
		default:
			d.errorf(kv.key.Line, "unknown field %s in on-assets%s", quote(key), didYouMean(key, onAssetsFields))
		}
	}
	return o
}

// assetNameProblems checks a list of asset names: not empty, each valid and once.
func assetNameProblems(list []string, what string) []string {
	if len(list) == 0 {
		return []string{fmt.Sprintf("%s is empty: name at least one asset", what)}
	}
	var probs []string
	if len(list) > MaxAssetsPerList {
		probs = append(probs, fmt.Sprintf("%s names %d assets; the limit is %d", what, len(list), MaxAssetsPerList))
	}
	for i, a := range list {
		switch {
		case !nameRE.MatchString(a):
			probs = append(probs, fmt.Sprintf("%s: asset name %s is invalid: %s", what, quote(a), nameRule))
		case slices.Contains(list[:i], a):
			probs = append(probs, fmt.Sprintf("%s names asset %s twice", what, quote(a)))
		}
	}
	return probs
}

// producesProblems checks a task's produces. A task that runs nowhere (a wait task, a
// workflow task) or once per item (for-each) produces nothing: its success is not one
// attempt's.
func producesProblems(t *Task) []problem {
	if t.Produces == nil {
		return nil
	}
	var probs []problem
	for _, msg := range assetNameProblems(t.Produces, "produces") {
		probs = append(probs, problem{field: "produces", msg: msg})
	}
	switch {
	case t.Type == TypeWait || t.Type == TypeWorkflow:
		probs = append(probs, problem{field: "produces", msg: fmt.Sprintf("%s task runs on no worker and produces no asset: "+
			"put produces on a task downstream of it", aType(t.Type))})
	case t.ForEach != "":
		probs = append(probs, problem{field: "produces", msg: "a for-each task would produce one event per item: " +
			"put produces on a task downstream of it"})
	}
	return probs
}

// onAssetsProblems checks the workflow's on-assets: one of all and any, a valid list.
func (s *Spec) onAssetsProblems() []problem {
	o := s.OnAssets
	if o == nil {
		return nil
	}
	var probs []problem
	add := func(field, msg string) { probs = append(probs, problem{task: -1, field: field, msg: msg}) }
	switch {
	case o.All != nil && o.Any != nil:
		add("on-assets", "on-assets: give all or any, not both")
	case o.All != nil:
		for _, msg := range assetNameProblems(o.All, "on-assets: all") {
			add("on-assets.all", msg)
		}
	case o.Any != nil:
		for _, msg := range assetNameProblems(o.Any, "on-assets: any") {
			add("on-assets.any", msg)
		}
	default:
		add("on-assets", "on-assets needs all or any, a list of asset names, like {all: [orders, customers]}")
	}
	for _, name := range slices.Sorted(maps.Keys(s.Params)) {
		if s.Params[name].Required {
			add("on-assets", fmt.Sprintf("on-assets starts runs without params, but param %s is required", quote(name)))
		}
	}
	return probs
}

// taskTemplate is one template of a task: the field that holds it and its text.
type taskTemplate struct {
	field, text string
}

// templatesOf returns the templates of t that its run's data renders (.params, .upstream,
// .assets, …): when, for-each, the prompts, a child's params and an http sensor's
// expect.json. A new field that renders over the run's data belongs here too, so that
// assetRefProblems sees what it reads.
func templatesOf(t *Task) []taskTemplate {
	var out []taskTemplate
	add := func(field, text string) {
		if text != "" {
			out = append(out, taskTemplate{field, text})
		}
	}
	add("when", t.When)
	add("for-each", t.ForEach)
	add("system", t.System)
	add("prompt", t.Prompt)
	for _, st := range t.Steps {
		add("steps", st.Prompt)
	}
	for _, k := range slices.Sorted(maps.Keys(t.Params)) {
		add("params", t.Params[k])
	}
	if t.HTTP != nil && t.HTTP.Expect != nil {
		add("http", t.HTTP.Expect.JSON)
	}
	if t.WorkflowRun != nil {
		add("workflow", t.WorkflowRun.Since)
	}
	return out
}

// assetRefProblems refuses a template that reads an asset the workflow's on-assets does not
// name (.assets.X, or index .assets "X"), or .assets at all in a workflow without on-assets:
// its runs never have that event, so the task would fail each time it runs. Templates that do
// not parse are left to the checks that report them.
func (s *Spec) assetRefProblems() []problem {
	var named []string
	if s.OnAssets != nil {
		named, _ = s.OnAssets.Assets()
	}
	var probs []problem
	for i := range s.Tasks {
		t := &s.Tasks[i]
		seen := map[string]bool{}
		for _, tt := range templatesOf(t) {
			tmpl, err := parseTemplate(tt.field, tt.text)
			if err != nil {
				continue
			}
			for _, ref := range templateRefs(tmpl) {
				if ref[0] != "assets" || (len(ref) > 1 && slices.Contains(named, ref[1])) || (len(ref) == 1 && s.OnAssets != nil) {
					continue
				}
				asset := ""
				if len(ref) > 1 {
					asset = ref[1]
				}
				key := tt.field + "\x00" + asset
				if seen[key] {
					continue
				}
				seen[key] = true
				var msg string
				switch {
				case s.OnAssets == nil && asset == "":
					msg = "reads .assets, but the workflow has no on-assets: only a run that assets start has asset events"
				case s.OnAssets == nil:
					msg = fmt.Sprintf("reads asset %s (.assets), but the workflow has no on-assets: only a run that assets start "+
						"has asset events; add on-assets: {all: [%s]}", quote(asset), clip(asset))
				default:
					msg = fmt.Sprintf("reads asset %s (.assets), which on-assets does not name (it names %s): "+
						"a run has events of the assets on-assets names alone", quote(asset), nameList(named))
				}
				probs = append(probs, problem{task: i, field: tt.field, msg: fmt.Sprintf("%s: %s %s", taskLabel(i, t.Name), tt.field, msg)})
			}
		}
	}
	return probs
}
