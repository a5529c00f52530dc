package workflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
)

// The JSON Schema of the workflow file, for editors: `zksched schema workflow` prints it and
// docs/workflow.schema.json holds it. It is made from the Go types the file is read into
// (their yaml tags), the type registry (which fields belong to which task type) and the
// package's own lists of values, so it follows the format as it changes; the tests check it
// against Parse.
//
// It accepts everything Parse reads, and refuses what Parse refuses for the file's shape: an
// unknown field, a value of the wrong kind, an unknown task type or policy, a field of another
// task type. The rest (templates, cron expressions, dependencies, ...) is left to Parse.
//
// Parse reads the file's values as written, so the schema does too: a text field takes any
// scalar (`port: 8080` is the text "8080"), and an empty value (null) leaves any field out,
// except one that must be there.

// schemaDialect is the JSON Schema dialect of Schema.
const schemaDialect = "https://json-schema.org/draft/2020-12/schema"

// schemaObject is one mapping of the file: the Go type it is read into, its name in the
// schema's $defs ("" for the workflow itself) and the keys it must have.
type schemaObject struct {
	def      string
	typ      reflect.Type
	required []string
	// aliases are keys read as another key (alias → key), kept for files written before
	// the key was renamed; with one, either the key or its alias is required.
	aliases map[string]string
}

// schemaObjects are the mappings of a workflow file.
var schemaObjects = []schemaObject{
	{def: "", typ: reflect.TypeFor[Spec](), required: []string{"name", "tasks"}},
	{def: "task", typ: reflect.TypeFor[Task](), required: []string{"name", "type"}},
	{def: "step", typ: reflect.TypeFor[Step](), required: []string{"name"}},
	{def: "tool", typ: reflect.TypeFor[Tool](), required: []string{"name", "description", "type"}},
	{def: "schedule", typ: reflect.TypeFor[Schedule](), required: []string{"cron"}},
	{def: "concurrency", typ: reflect.TypeFor[Concurrency](), required: []string{"key"}},
	{def: "on-assets", typ: reflect.TypeFor[OnAssets](), required: []string{}},
	{def: "notify", typ: reflect.TypeFor[Notify](), required: []string{"events"}, aliases: map[string]string{"on": "events"}},
	{def: "retry-backoff", typ: reflect.TypeFor[RetryBackoff](), required: []string{"initial"}},
	{def: "retry-on", typ: reflect.TypeFor[RetryOn](), required: []string{}},
	{def: "trigger", typ: reflect.TypeFor[Trigger](), required: []string{"webhook"}},
	{def: "webhook", typ: reflect.TypeFor[Webhook](), required: []string{"name", "secret-env", "signature"}},
	{def: "http", typ: reflect.TypeFor[SensorHTTP](), required: []string{}},
	{def: "expect", typ: reflect.TypeFor[SensorExpect](), required: []string{}},
	{def: "sql", typ: reflect.TypeFor[SensorSQL](), required: []string{"dsn-env", "query"}},
	{def: "file", typ: reflect.TypeFor[SensorFile](), required: []string{"path"}},
	{def: "time", typ: reflect.TypeFor[SensorTime](), required: []string{}},
	{def: "workflow-run", typ: reflect.TypeFor[SensorWorkflow](), required: []string{"name"}},
}

// typeRequired are the fields a task of each type must have; Validate refuses the task
// without them.
var typeRequired = map[string][]string{
	"shell":      {"command"},
	"llm":        {"provider", "prompt"},
	"agent":      {"provider"},
	TypeWorkflow: {"workflow"},
}

// typeForm is one form of a task type that comes in more than one: a task of the type has
// every field of one form's fields, and no field of another form.
type typeForm struct {
	fields   []string
	optional []string
}

// typeForms are the forms of the types that have more than one; checkAgent refuses an agent
// that mixes them.
var typeForms = map[string][]typeForm{
	"agent": {
		{fields: []string{"steps"}},
		{fields: []string{"prompt", "tools"}, optional: []string{"max-turns", "max-tool-calls", "max-total-tokens", "workdir",
			"output-format", "output-schema", "max-cost"}},
	},
}

// schemaEnums are the fields that take one of a list of values, by "<def>.<key>" ("workflow"
// for the workflow's own keys).
func schemaEnums() map[string][]string {
	onTimeout := []string{OnTimeoutFail, OnTimeoutSucceed}
	return map[string][]string{
		"workflow.when-full":    whenFullPolicies,
		"workflow.params-extra": {ParamsExtraRefuse, ParamsExtraAllow},
		"task.type":             Types(),
		"task.output-format":    {OutputText, OutputJSON},
		"task.trigger":          Triggers(),
		"task.on-timeout":       {OnTimeoutFail, OnTimeoutSkip, OnTimeoutSucceed},
		"task.mode":             {SensorReschedule, SensorPoke},
		"step.on-timeout":       onTimeout,
		"tool.type":             ToolTypes(),
		"tool.on-interrupted":   OnInterruptedPolicies(),
		"tool.method":           HTTPMethods(),
		"schedule.misfire":      misfirePolicies,
		"concurrency.when-full": ConcurrencyPolicies(),
		"notify.on":             NotifyEvents,
		"notify.events":         NotifyEvents,
		"retry-on.errors":       ErrorKinds(),
		"webhook.signature":     Signatures(),
		"workflow-run.state":    SensorWorkflowStates(),

		"task.output-overflow": OverflowPolicies(),
	}
}

// schemaBounds are the ranges Validate holds integer and number fields to, by "<def>.<key>";
// an infinite bound is none. 0 is in each range where Parse reads it as "the default".
var schemaBounds = map[string][2]float64{
	"workflow.max-active-instances": {0, MaxActiveInstances},
	"workflow.priority":             {MinPriority, MaxPriority},
	"task.retries":                  {0, MaxRetries},
	"task.priority":                 {MinPriority, MaxPriority},
	"task.max-parallel":             {0, math.Inf(1)},
	"task.output-limit":             {0, MaxOutputLimit},
	"task.temperature":              {0, MaxTemperature},
	"task.max-tokens":               {0, math.Inf(1)},
	"task.max-turns":                {0, MaxMaxTurns},
	"task.max-tool-calls":           {0, MaxMaxToolCalls},
	"task.max-total-tokens":         {0, math.Inf(1)},
	"task.version":                  {0, math.Inf(1)},
	"schedule.misfire-limit":        {0, MaxMisfireLimit},
	"concurrency.max":               {0, MaxActiveInstances},
	"retry-backoff.factor":          {1, math.Inf(1)},
	"retry-backoff.jitter":          {0, 1},
	"retry-on.exit-codes":           {1, MaxExitCode},
}

// schemaNames are the patterns Validate holds names to: of the mappings' keys, by
// "<def>.<key>", and of text fields.
var schemaNames = map[string]string{
	"workflow.name":          nameRE.String(),
	"workflow.params":        `^[A-Za-z_][A-Za-z0-9_]{0,127}$`,
	"task.name":              nameRE.String(),
	"task.env":               envRE.String(),
	"task.params":            `^[A-Za-z_][A-Za-z0-9_]{0,127}$`,
	"task.group":             groupRE.String(),
	"task.pool":              groupRE.String(),
	"task.provider":          groupRE.String(),
	"task.workflow":          nameRE.String(),
	"step.name":              nameRE.String(),
	"tool.name":              toolNameRE.String(),
	"notify.webhook-url-env": envRE.String(),
	"webhook.name":           nameRE.String(),
	"webhook.secret-env":     envRE.String(),
	"webhook.params":         `^[A-Za-z_][A-Za-z0-9_]{0,127}$`,
	"webhook.dedupe-header":  headerNameRE.String(),
	"http.url-env":           envRE.String(),
	"sql.dsn-env":            envRE.String(),
	"file.group":             groupRE.String(),
	"workflow-run.name":      nameRE.String(),
}

// durationPattern matches what time.ParseDuration reads: "0", or numbers with units, such as
// "30s", "1h30m" or "1.5h".
const durationPattern = `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// Schema returns the JSON Schema of the workflow file, indented, ending in a newline.
func Schema() []byte {
	root := objectSchema(schemaObjects[0])
	defs := map[string]any{}
	for _, o := range schemaObjects[1:] {
		defs[o.def] = objectSchema(o)
	}
	defs["task"].(map[string]any)["allOf"] = typeRules()
	defs["duration"] = map[string]any{
		"description": "A Go duration such as \"30s\", \"10m\" or \"1h30m\"; 0 for none. A bare number is refused: it could mean seconds or nanoseconds.",
		"anyOf": []any{
			map[string]any{"type": "string", "pattern": durationPattern},
			map[string]any{"const": 0},
		},
	}
	defs["param"] = paramSchema()
	root["properties"].(map[string]any)["tasks"].(map[string]any)["maxItems"] = MaxTasks
	taskProps := defs["task"].(map[string]any)["properties"].(map[string]any)
	taskProps["tools"].(map[string]any)["maxItems"] = MaxTools
	// workflow: is a workflow task's name of its child, or a sensor's condition (a mapping).
	taskProps["workflow"] = map[string]any{
		"description": schemaDocs["task.workflow"],
		"anyOf":       []any{taskProps["workflow"], map[string]any{"$ref": "#/$defs/workflow-run"}},
	}
	root["$schema"] = schemaDialect
	root["title"] = "zksched workflow"
	root["description"] = "A zksched workflow file: a named DAG of tasks (zksched submit FILE). Generated by `zksched schema workflow`."
	root["$defs"] = defs
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		// Every value above is a map, slice, string, number or bool.
		panic(fmt.Sprintf("workflow: marshal the schema: %v", err))
	}
	return append(out, '\n')
}

// name is the name of a mapping in schemaDocs and the other tables.
func (o schemaObject) name() string {
	if o.def == "" {
		return "workflow"
	}
	return o.def
}

// yamlKey is the key of a struct field in the file, "" for a field the file does not have.
func yamlKey(f reflect.StructField) string {
	key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if key == "-" {
		return ""
	}
	return key
}

func objectSchema(o schemaObject) map[string]any {
	props := map[string]any{}
	for f := range o.typ.Fields() {
		key := yamlKey(f)
		if key == "" {
			continue
		}
		id := o.name() + "." + key
		s := valueSchema(id, f.Type)
		// Parse refuses an empty true-or-false.
		if !slices.Contains(o.required, key) && f.Type.Kind() != reflect.Bool {
			s = nullable(s)
		}
		s["description"] = schemaDocs[id]
		props[key] = s
	}
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             o.required,
		"additionalProperties": false,
	}
	var either []any
	for alias, key := range o.aliases {
		a := maps.Clone(props[key].(map[string]any))
		a["description"] = schemaDocs[o.name()+"."+alias]
		props[alias] = a
		either = append(either, map[string]any{"required": []string{key}}, map[string]any{"required": []string{alias}})
		s["required"] = slices.DeleteFunc(slices.Clone(o.required), func(r string) bool { return r == key })
		s["not"] = map[string]any{"required": []string{key, alias}}
	}
	if either != nil {
		s["anyOf"] = either
	}
	return s
}

// valueSchema is the schema of a value of Go type t, the field id ("<def>.<key>").
func valueSchema(id string, t reflect.Type) map[string]any {
	if t == reflect.TypeFor[Duration]() {
		return map[string]any{"$ref": "#/$defs/duration"}
	}
	for _, o := range schemaObjects[1:] {
		if t == o.typ {
			return map[string]any{"$ref": "#/$defs/" + o.def}
		}
	}
	switch t.Kind() {
	case reflect.String:
		if values, ok := schemaEnums()[id]; ok {
			return map[string]any{"enum": values}
		}
		s := textSchema()
		if p, ok := schemaNames[id]; ok {
			s["pattern"] = p
		}
		return s
	case reflect.Int, reflect.Float64:
		s := map[string]any{"type": "integer"}
		if t.Kind() == reflect.Float64 {
			s["type"] = "number"
		}
		if b, ok := schemaBounds[id]; ok {
			s["minimum"] = b[0]
			if !math.IsInf(b[1], 1) {
				s["maximum"] = b[1]
			}
		}
		return s
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Pointer:
		return valueSchema(id, t.Elem())
	case reflect.Slice:
		return map[string]any{"type": "array", "items": valueSchema(id, t.Elem())}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			// A tool's arguments: a JSON Schema, which Parse compiles.
			return map[string]any{"type": "object"}
		}
		s := map[string]any{"type": "object", "additionalProperties": nullable(textSchema())}
		if t.Elem() == reflect.TypeFor[Param]() {
			s["additionalProperties"] = map[string]any{"$ref": "#/$defs/param"}
		}
		if p, ok := schemaNames[id]; ok {
			s["propertyNames"] = map[string]any{"pattern": p}
		}
		return s
	}
	panic(fmt.Sprintf("workflow: no schema for field %s of Go type %s", id, t))
}

// textSchema is a text field: Parse takes any scalar as the text it is written as.
func textSchema() map[string]any {
	return map[string]any{"type": []any{"string", "number", "boolean"}}
}

// nullable lets s be empty (null) too, which Parse reads as leaving the field out.
func nullable(s map[string]any) map[string]any {
	switch t := s["type"].(type) {
	case string:
		s["type"] = []any{t, "null"}
		return s
	case []any:
		s["type"] = append(t, "null")
		return s
	}
	if e, ok := s["enum"].([]string); ok {
		values := make([]any, 0, len(e)+1)
		for _, v := range e {
			values = append(values, v)
		}
		// An empty text is the default too.
		s["enum"] = append(values, "", nil)
		return s
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// typeRules are the task schema's rules for each type, from the registry: the fields the
// type must have, and the fields of other types, which it may only leave empty (Validate
// refuses a field of another type that is set).
func typeRules() []any {
	task := reflect.TypeFor[Task]()
	goField := map[string]reflect.Type{}
	for f := range task.Fields() {
		goField[yamlKey(f)] = f.Type
	}
	var rules []any
	for _, tt := range taskTypes {
		props := map[string]any{}
		for _, other := range taskTypes {
			for _, f := range other.fields {
				if _, own := findField(tt.fields, f.name); own {
					continue
				}
				s := emptySchema(goField[f.name])
				// errorMessage is not JSON Schema's: the YAML language server and VS Code show
				// it instead of their own message, and validators ignore it.
				s["errorMessage"] = fmt.Sprintf("%s is a field of %s tasks, not of %s task",
					f.name, strings.Join(typesWithField(f.name), " and "), aType(tt.name))
				props[f.name] = s
			}
		}
		if !slices.Contains(forEachTypes, tt.name) {
			s := emptySchema(goField["for-each"])
			s["errorMessage"] = fmt.Sprintf("for-each is for tasks that run on workers (%s), not for %s task",
				strings.Join(forEachTypes, ", "), aType(tt.name))
			props["for-each"] = s
		}
		then := map[string]any{"properties": props}
		switch tt.name {
		case TypeSensor:
			// A sensor writes its workflow condition under workflow: too, as a mapping.
			props["workflow"] = map[string]any{
				"anyOf":        []any{emptySchema(goField["workflow"]), map[string]any{"$ref": "#/$defs/workflow-run"}},
				"errorMessage": "a sensor's workflow is a mapping, like {name: load-orders, state: succeeded}; a name alone is what a workflow task starts",
			}
		case TypeWorkflow:
			then["not"] = map[string]any{
				"required":     []string{"workflow"},
				"properties":   map[string]any{"workflow": map[string]any{"type": "object"}},
				"errorMessage": "a workflow task's workflow is the name of the workflow it starts; a mapping is a sensor's condition",
			}
		}
		if req := typeRequired[tt.name]; len(req) > 0 {
			then["required"] = req
		}
		if forms := typeForms[tt.name]; forms != nil {
			then["allOf"] = formRules(tt.name, forms, goField)
		}
		rules = append(rules, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": tt.name}}, "required": []string{"type"}},
			"then": then,
		})
	}
	return rules
}

// formRules are the rules of a type's forms (typeForms): the task has every field of one
// form, set, and once the first field of a form is set, no field of another form is.
func formRules(typ string, forms []typeForm, goField map[string]reflect.Type) []any {
	set := func(f string) map[string]any {
		switch goField[f].Kind() {
		case reflect.Slice:
			return map[string]any{"type": "array", "minItems": 1}
		case reflect.Map:
			return map[string]any{"type": "object", "minProperties": 1}
		}
		return map[string]any{"not": emptySchema(goField[f])}
	}
	var names []string
	for _, form := range forms {
		names = append(names, strings.Join(form.fields, " and "))
	}
	mixed := fmt.Sprintf("%s task has %s, not both", aType(typ), strings.Join(names, " or "))
	var anyOf, rules []any
	for i, form := range forms {
		props := map[string]any{}
		for _, f := range form.fields {
			props[f] = set(f)
		}
		anyOf = append(anyOf, map[string]any{"required": form.fields, "properties": props})
		others := map[string]any{}
		for j, other := range forms {
			if j == i {
				continue
			}
			for _, f := range slices.Concat(other.fields, other.optional) {
				s := emptySchema(goField[f])
				s["errorMessage"] = fmt.Sprintf("%s: %s belongs to %s", mixed, f, names[j])
				others[f] = s
			}
		}
		first := form.fields[0]
		rules = append(rules, map[string]any{
			"if":   map[string]any{"required": []string{first}, "properties": map[string]any{first: set(first)}},
			"then": map[string]any{"properties": others},
		})
	}
	return append([]any{map[string]any{"anyOf": anyOf}}, rules...)
}

// emptySchema is the schema of a field of Go type t left empty: the values Parse reads as
// not set.
func emptySchema(t reflect.Type) map[string]any {
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"enum": []any{"", nil}}
	case reflect.Int:
		return map[string]any{"enum": []any{0, nil}}
	case reflect.Slice:
		return map[string]any{"type": []any{"array", "null"}, "maxItems": 0}
	case reflect.Map:
		return map[string]any{"type": []any{"object", "null"}, "maxProperties": 0}
	}
	// A pointer (temperature) is set by any value.
	return map[string]any{"type": "null"}
}

// schemaDocs are the descriptions of the fields in the schema, by "<def>.<key>" ("workflow"
// for the workflow's own keys); docs/workflows.md says more.
var schemaDocs = map[string]string{
	"workflow.name":                 "The workflow's name: 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit. Storing a file under a stored name adds a version.",
	"workflow.description":          "Free text, shown with the definition.",
	"workflow.params":               "The params a run may give (`zksched submit --param k=v`), each its default alone (a string param) or declared with type, default, enum, required, description and pattern. Templates read them as {{ .params.NAME }}, shell tasks as $ZKSCHED_PARAM_NAME.",
	"workflow.params-extra":         "What a run may do with a param the workflow does not declare: refuse it (the default) or allow it.",
	"workflow.tasks":                "The tasks, a DAG through their depends-on. File order breaks ties wherever an order is chosen.",
	"workflow.schedule":             "Makes the masters run the workflow by themselves on a cron schedule; without it the workflow runs only when submitted.",
	"workflow.max-active-instances": "The most instances of the workflow that run at once; 0 for no cap.",
	"workflow.when-full":            "What a new instance does at max-active-instances: queue (wait for a slot, the default) or skip (no instance; a fire is recorded as skipped, a submit refused).",
	"workflow.concurrency":          "Runs the instances whose key renders the same at most max at a time, in submit order.",
	"workflow.timeout":              "Bounds a whole run from when it starts: past it, running tasks are killed and the instance fails.",
	"workflow.deadline":             "How long after its submission an instance should have ended: past it the deadline event is sent, once, and nothing else changes.",
	"workflow.notify":               "Who hears of the workflow's events; without it, the masters' notify.default.",
	"workflow.triggers":             "Events from outside that submit a run of the stored workflow: webhooks, POST /api/v1/hooks/NAME with a signature its secret verifies.",
	"workflow.on-assets":            "Makes the masters start a run once the named assets have had events: all (an event of each since the last asset-started run) or any (one run per event). The events are the run's .assets.NAME.output.",
	"workflow.priority":             "Added to every task's priority, so it orders claims across workflows; -1000..1000. `zksched submit --priority` overrides it for one run.",

	"task.produces":       "Asset names: each success of the task writes an event of each, with its output, which starts the workflows whose on-assets name it.",
	"task.name":           "The task's name, unique in the workflow: 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit.",
	"task.type":           "What the task does: shell (a command), llm (one prompt), agent (steps of prompts and waits, or a prompt and tools the model calls), wait (waits for a signal), sensor (waits for a condition, holding no slot between checks), workflow (starts a child workflow) or noop.",
	"task.depends-on":     "The tasks that must have ended before this one runs (see trigger).",
	"task.retries":        "How many times a failed run is retried, 0..100.",
	"task.retry-interval": "The wait before each retry; exclusive with retry-backoff.",
	"task.retry-backoff":  "Makes the wait before each retry grow: initial, times factor at each further retry, at most max, less up to jitter of itself at random.",
	"task.retry-on":       "Retries only the failures it names, by exit code or error kind; any other failure fails the task at once.",
	"task.no-retry-on":    "Never retries the failures it names, by exit code or error kind: they fail the task at once.",
	"task.timeout":        "Bounds one run: past it the run is killed and fails.",
	"task.deadline":       "How long after its instance's submission the task should have ended: past it the deadline event is sent, once, and nothing else changes.",
	"task.priority":       "Orders claims: higher is claimed first; -1000..1000.",
	"task.group":          "The worker group that runs the task; default when left out.",
	"task.pool":           "A concurrency pool shared across workflows: the masters' pools: config limits how many of its tasks run at once.",
	"task.env":            "Environment variables of the task's process (shell tasks).",
	"task.trigger":        "What the dependencies must have come to for the task to run: all-succeeded (the default), all-done or any-failed. Otherwise it is skipped.",
	"task.when":           "A template over the params and upstream outputs that renders true or false; false skips the task.",
	"task.for-each":       "A template that renders the task's items, a JSON array or one item a line: the task runs once per item, each run seeing {{ .item }} and {{ .index }}.",
	"task.max-parallel":   "The most items of a for-each task that run at once; 0 for no cap.",
	"task.command":        "shell: the script, run with bash -c.",
	"task.workdir":        "shell, agent with tools: the working directory of the command or of the tools' commands; a relative one is taken from the file's folder by zksched submit. Left out: a scratch directory of the attempt's own ($ZKSCHED_WORKDIR).",
	"task.provider":       "llm, agent: the model provider, a key of llm.providers in the workers' config.",
	"task.prompt":         "llm, agent with tools: the prompt, a template over the params and upstream outputs ({{ .upstream.TASK }}).",
	"task.system":         "llm, agent: the system prompt, a template.",
	"task.temperature":    "llm, agent: the sampling temperature, 0..2; the model's default when left out.",
	"task.max-tokens":     "llm, agent: caps the tokens of each completion; 0 leaves the model's default.",
	"task.steps":          "agent: the steps, run in order, each checkpointed when it finishes. An agent has steps, or a prompt and tools.",
	"task.on-timeout":     "wait, sensor: what the task comes to at its timeout: fail (the default) or succeed with an empty output; a sensor may also skip.",
	"task.http":           "sensor: true when a GET of the address answers as expect says (a 2xx status without it).",
	"task.sql":            "sensor: true when the first column of the query's first row is true.",
	"task.file":           "sensor: true when the file exists on the worker that checks it, one of group (the task's group without it).",
	"task.time":           "sensor: true from a time on: at (RFC 3339) or after (from the first check).",
	"task.interval":       "sensor: the wait between checks, at least 1s; 30s when left out.",
	"task.mode":           "sensor: reschedule (the default) waits between checks holding no worker slot; poke keeps one attempt and its slot, checking in a loop.",
	"task.workflow":       "workflow: the stored workflow the task starts an instance of. sensor: the run it waits for, a mapping (name, state, since), as workflow-run.",
	"task.workflow-run":   "sensor: true once a run of the named workflow has ended in state (succeeded when left out) at or after since; it waits on no worker, ended by that run's end. Also written workflow:.",
	"task.version":        "workflow: the version of the child workflow; 0 or left out for the latest stored when the task starts.",
	"task.params":         "workflow: the child's params, each a template over the params and upstream outputs.",

	"task.tools":            fmt.Sprintf("agent: the tools its model may call, 1..%d: the prompt starts a conversation in which the model calls them, sees their results and gives the final answer, the task's output.", MaxTools),
	"task.max-turns":        fmt.Sprintf("agent with tools: the most model calls, 0..%d; 0 or left out for %d.", MaxMaxTurns, DefaultMaxTurns),
	"task.max-tool-calls":   fmt.Sprintf("agent with tools: the most tool calls over all turns, 0..%d; 0 or left out for %d.", MaxMaxToolCalls, DefaultMaxToolCalls),
	"task.max-total-tokens": "agent with tools: the most tokens all its model calls use (sent and received); 0 or left out for no bound.",
	"task.max-cost":         "agent with tools: the most its model calls may cost together, at its provider's input-price and output-price per million tokens (which the workers' config must give); no bound when left out.",
	"task.output-format":    "agent with tools: text (the default) or json: the final answer must be one JSON value, matching output-schema if set; one repair turn, then the task fails.",
	"task.output-schema":    "agent with tools and output-format: json: the JSON Schema (draft 2020-12) the final answer must match.",

	"task.output-limit":    "The most bytes the task's output may have, up to 67108864; 0 or left out for the workers' worker.output-limit (1 MiB by default). A for-each task's limit bounds each item's output and the JSON array of them.",
	"task.output-overflow": "What an output over output-limit does: fail (the default) fails the task, naming the limit and the size; truncate keeps what fits, marked truncated.",

	"step.name":       "The step's name, unique in the task; later prompts read its output as {{ .steps.NAME }}.",
	"step.prompt":     "The step's prompt, a template over the params, upstream outputs and earlier steps' outputs. A wait step has none.",
	"step.wait":       "Makes the step wait for a signal instead of calling the model; the signal's output becomes the step's.",
	"step.timeout":    "A wait step's timeout, from when its wait began; it waits without end when left out.",
	"step.on-timeout": "What a wait step comes to at its timeout: fail (the default) fails the task, succeed goes on with an empty output.",

	"tool.name":           "The name the model calls the tool by, unique in the task: 1 to 64 letters, digits, '_' or '-'.",
	"tool.description":    "Tells the model what the tool does and when to use it.",
	"tool.type":           "What a call runs: shell (command, with bash -c), http (a request to url), mcp (the tools of an MCP server) or workflow (a child instance of a stored workflow).",
	"tool.command":        "shell: the script; it reads the call's arguments from its environment, never from its own text. mcp: the command of a server spoken to over its standard input and output, run per attempt like a shell task.",
	"tool.url":            "http: where each call is sent, under one of the workers' worker.http-tools.allow. mcp: a server over streamable HTTP, under the same allow list.",
	"tool.method":         "http: GET, POST, PUT, PATCH or DELETE; POST when left out. GET and DELETE send the arguments as the query string, the others as a JSON body.",
	"tool.headers":        "http: headers sent with every call; ${NAME} in a value is the worker's variable NAME if its task environment lets it through.",
	"tool.include":        "mcp: offer only these tools of the server.",
	"tool.exclude":        "mcp: never offer these tools of the server.",
	"tool.workflow":       "workflow: the stored workflow each call starts, the call's arguments as its params; its final output is the result.",
	"tool.version":        "workflow: the version each call starts; the latest stored when left out.",
	"tool.approve-when":   "A template over .params, .upstream and the call's arguments (.args) that renders true or false: true makes the call wait for approval as approve: true does.",
	"tool.approve":        "Each call waits, holding no slot, for a person's approval before it runs; a rejection goes back to the model as the call's result, with the reviewer's text.",
	"tool.arguments":      "The JSON Schema (draft 2020-12) of the call's arguments, of type object; a call that does not match goes back to the model as an error. Left out: the tool takes no arguments.",
	"tool.idempotent":     "Running a call twice has the effect of running it once (the tool dedupes on $ZKSCHED_TOOL_CALL_ID), so a call cut off by a crash may run again.",
	"tool.on-interrupted": "What a later attempt does with a call cut off by a crash: retry (only for an idempotent tool), ask (wait for a person to say whether it took effect) or fail; retry for an idempotent tool and ask for any other when left out. Not for a workflow tool, whose call goes on with the child it started.",
	"tool.timeout":        fmt.Sprintf("Bounds one call; %s when left out. The task's timeout bounds all of them.", Duration(DefaultToolTimeout)),

	"schedule.cron":          "5 fields (minute hour day-of-month month day-of-week) or @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly.",
	"schedule.timezone":      "The IANA time zone the expression is read in, such as Europe/Berlin; UTC when left out.",
	"schedule.start":         "The earliest fire time: 2026-11-01, 2026-11-01T02:00 (in the timezone) or RFC 3339; from when the schedule is stored when left out.",
	"schedule.end":           "The latest fire time, in the forms of start; none when left out.",
	"schedule.enabled":       "Whether the masters fire the schedule; true when left out.",
	"schedule.misfire":       "What to do with fires missed while no master could fire them: skip, run-once (the latest, the default) or run-all.",
	"schedule.misfire-limit": "How many missed fires run-all runs, 1..1000; 10 when left out.",

	"on-assets.all": "Asset names: a run starts once each has had an event since the last run they started.",
	"on-assets.any": "Asset names: a run starts for each event of any of them.",

	"concurrency.key":        "A template over the params alone, such as \"{{ .params.thread }}\", rendered when an instance is submitted.",
	"notify.on":              "The old name of events, still read (YAML 1.1 tools read the key on: as true): write events.",
	"notify.events":          "The events heard: failure, success, timeout (failed by the workflow timeout), deadline, task-failed (after its retries).",
	"notify.webhook-url-env": "The environment variable of the masters holding the webhook's URL; the URL is never in the file. Its name must match the masters' notify.webhook-env-pattern (default ZKSCHED_WEBHOOK_*).",
	"notify.slack":           "Send a Slack-compatible body ({\"text\": ...}) to the webhook.",
	"notify.email":           "The addresses mailed, each a bare address like ops@example.com.",
	"concurrency.max":        "How many instances with one key run at once; 1 when left out.",
	"concurrency.when-full":  "What a new instance does when its key is full: queue (the default), skip, or cancel-oldest (stop the oldest active one).",

	"trigger.webhook":       "A webhook: POST /api/v1/hooks/NAME with a signature its secret verifies submits a run of the latest stored version.",
	"webhook.name":          "The hook's name, the last part of its URL, unique across the cluster: a second workflow claiming it is refused.",
	"webhook.secret-env":    "The environment variable of the masters holding the hook's secret; never the secret itself. Its name must match the masters' api.hook-secret-env-pattern (default ZKSCHED_HOOK_SECRET_*).",
	"webhook.signature":     "How a delivery proves it knows the secret: github (X-Hub-Signature-256: sha256=HEX of the body's HMAC-SHA256), hmac-sha256 (X-Zksched-Signature-256: HEX of the HMAC-SHA256 of X-Zksched-Timestamp, a dot and the body; the timestamp within 5 minutes) or bearer (Authorization: Bearer SECRET).",
	"webhook.params":        "The run's params, each a template over the delivery: {{ .body.FIELD }} (the body's JSON) and {{ index .headers \"x-github-event\" }} (headers by lower-case name).",
	"webhook.dedupe-header": "The header holding the delivery's id: a delivery whose id the hook saw within the masters' api.hook-dedupe-window starts nothing. X-GitHub-Delivery for github and X-Zksched-Delivery for hmac-sha256 when left out; none for bearer.",
	"webhook.filter":        "A template over the delivery that renders true or false; false answers 202 and starts nothing.",

	"http.url":              "The address to GET, http or https; exclusive with url-env.",
	"http.url-env":          "The worker's environment variable that holds the address; exclusive with url.",
	"http.expect":           "What the answer must be; every condition given must hold.",
	"expect.status":         "The status the answer must have; any 2xx when left out.",
	"expect.body-contains":  "A text the body must contain.",
	"expect.json":           "A template over the params, the upstream outputs and the body read as JSON (.body) that must render true.",
	"sql.dsn-env":           "The worker's environment variable that holds the PostgreSQL connection string.",
	"sql.query":             "The query; the sensor is true when the first column of its first row is true.",
	"file.path":             "The file's path on the worker.",
	"file.group":            "The worker group whose workers check the file; the task's group when left out.",
	"time.at":               "An RFC 3339 time, such as 2026-12-01T06:00:00Z; exclusive with after.",
	"time.after":            "How long after the sensor's first check it becomes true; exclusive with at.",
	"workflow-run.name":     "The workflow whose run the sensor waits for; it need not be stored yet.",
	"workflow-run.state":    "The end the run must have: succeeded (the default), failed, stopped, or ended (any of them).",
	"workflow-run.since":    "A template over .params, .upstream and .run (id, created_at, started_at) rendering an RFC 3339 time: the run must have ended at or after it. The waiting run's creation when left out.",
	"retry-backoff.initial": "The wait before the first retry.",
	"retry-backoff.factor":  "Multiplies the wait at each further retry, at least 1; 2 when left out.",
	"retry-backoff.max":     "The longest wait, at least initial; no cap when left out.",
	"retry-backoff.jitter":  "0..1: each wait w becomes w × (1 − jitter × r), r drawn uniformly from [0, 1), so that tasks that failed together do not retry together; 0 when left out.",
	"retry-on.exit-codes":   "Exit statuses of the task's process, 1..255.",
	"retry-on.errors":       "Error kinds: timeout (past the task's timeout), killed (SIGKILL from outside zksched, such as the OOM killer: exit 137), model-error (a failed model call other than a rate limit), rate-limit (the provider's rate limit).",
}

// paramSchema is the schema of one of the workflow's params: its default alone, or a
// mapping declaring it. A value (default, enum entries) is written as text, as a run gives
// it; a json param's may be written as YAML too. Parse checks the values against the type.
func paramSchema() map[string]any {
	value := func() map[string]any {
		return map[string]any{"type": []any{"string", "number", "boolean", "object", "array"}}
	}
	return map[string]any{
		"description": "A param: its default alone (a string param), or a mapping declaring it.",
		"anyOf": []any{
			nullable(textSchema()),
			map[string]any{
				"type":                 "object",
				"additionalProperties": false,
				"properties": map[string]any{
					"type":        withDescription(nullable(map[string]any{"enum": ParamTypes()}), "string (the default), integer, number, boolean or json. The value tasks read is text: an integer in decimal, a boolean true or false, json compact."),
					"default":     nullable(withDescription(value(), "The value of a run that gives none; checked against the type, enum and pattern when the file is stored.")),
					"enum":        nullable(withDescription(map[string]any{"type": "array", "items": value()}, "The only values a run may give.")),
					"required":    map[string]any{"type": "boolean", "description": "A run without the param is refused. A required param has no default."},
					"description": nullable(withDescription(textSchema(), "Free text for whoever gives the param.")),
					"pattern":     nullable(withDescription(textSchema(), "A regular expression (RE2) a string param's value must match whole.")),
				},
			},
		},
	}
}

func withDescription(s map[string]any, doc string) map[string]any {
	s["description"] = doc
	return s
}
