package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// The fields of a tool-calling agent: its tools and the bounds of its loop. Its prompt is
// promptField, shared with llm tasks, and the workdir of its shell tools workdirField, shared
// with shell tasks.
var (
	toolsField = field{
		name:   "tools",
		decode: func(d *decoder, v *yaml.Node, t *Task, where string) { t.Tools = d.tools(v, where+": tools") },
		isSet:  func(t *Task) bool { return len(t.Tools) > 0 },
	}
	loopFields = []field{
		toolsField,
		intField("max-turns", func(t *Task) *int { return &t.MaxTurns }),
		intField("max-tool-calls", func(t *Task) *int { return &t.MaxToolCalls }),
		intField("max-total-tokens", func(t *Task) *int { return &t.MaxTotalTokens }),
		floatField("max-cost", func(t *Task) **float64 { return &t.MaxCost }),
		stringField("output-format", func(t *Task) *string { return &t.OutputFormat }),
		{
			name: "output-schema",
			decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
				t.OutputSchema = d.argumentsSchema(v, where+": output-schema")
			},
			isSet: func(t *Task) bool { return len(t.OutputSchema) > 0 },
		},
	}
)

var (
	// toolNameRE is what every provider accepts as a function's name.
	toolNameRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	toolNameRule = "use 1 to 64 letters, digits, '_' or '-'"
)

// headerNameRE is an HTTP header name (a token of RFC 9110).
var headerNameRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// maxArgumentsDepth bounds the nesting of a tool's arguments schema.
const maxArgumentsDepth = 64

// toolFields are the keys of one tool.
var toolFields = []string{"name", "description", "type", "command", "url", "method", "headers", "include", "exclude", "workflow", "version",
	"arguments", "idempotent", "on-interrupted", "timeout", "approve", "approve-when"}

// tools reads a tool-calling agent's list of tools, each a mapping of toolFields. The line
// of each tool, and of each of its keys, is kept as "tools.<i>" and "tools.<i>.<key>" (i
// from 0), so that validation problems point at them.
func (d *decoder) tools(v *yaml.Node, what string) []Tool {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(v.Line, "%s must be a list of tools, like [{name: search, description: \"...\", type: shell, command: ./search.sh}], not %s",
			what, kindName(v))
		return nil
	}
	var tools []Tool
	for i, item := range v.Content {
		if !d.visit(1) {
			return nil
		}
		item = d.resolve(item)
		where := fmt.Sprintf("%s #%d", what, i+1)
		if item.Kind != yaml.MappingNode {
			d.errorf(item.Line, "%s must be a mapping with name, description, type and command, not %s", where, kindName(item))
			continue
		}
		d.taskField(fmt.Sprintf("tools.%d", i), item.Line)
		var tool Tool
		for _, kv := range d.mapping(item, where) {
			key := kv.key.Value
			d.taskField(fmt.Sprintf("tools.%d.%s", i, key), kv.key.Line)
			switch key {
			case "name":
				tool.Name, _ = d.scalar(kv.value, where+": name", "a string")
			case "description":
				tool.Description, _ = d.scalar(kv.value, where+": description", "a string")
			case "type":
				tool.Type, _ = d.scalar(kv.value, where+": type", "a string")
			case "command":
				tool.Command, _ = d.scalar(kv.value, where+": command", "a string")
			case "arguments":
				tool.Arguments = d.argumentsSchema(kv.value, where+": arguments")
			case "idempotent":
				n := d.resolve(kv.value)
				if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&tool.Idempotent) != nil {
					d.errorf(n.Line, "%s: idempotent must be true or false, not %s", where, kindName(n))
				}
			case "approve":
				n := d.resolve(kv.value)
				if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&tool.Approve) != nil {
					d.errorf(n.Line, "%s: approve must be true or false, not %s", where, kindName(n))
				}
			case "workflow":
				tool.Workflow, _ = d.scalar(kv.value, where+": workflow", "a string")
			case "version":
				if n, ok := d.intValue(kv.value, where+": version"); ok {
					tool.Version = n
				}
			case "approve-when":
				tool.ApproveWhen, _ = d.scalar(kv.value, where+": approve-when", "a string")
			case "url":
				tool.URL, _ = d.scalar(kv.value, where+": url", "a string")
			case "method":
				tool.Method, _ = d.scalar(kv.value, where+": method", "a string")
			case "headers":
				tool.Headers = d.stringMap(kv.value, where+": headers")
			case "include":
				tool.Include = d.stringList(kv.value, where+": include", "names")
			case "exclude":
				tool.Exclude = d.stringList(kv.value, where+": exclude", "names")
			case "on-interrupted":
				tool.OnInterrupted, _ = d.scalar(kv.value, where+": on-interrupted", "a string")
			case "timeout":
				if v, ok := d.durationValue(kv.value, where+": timeout"); ok {
					tool.Timeout = Duration(v)
				}
			default:
				d.errorf(kv.key.Line, "unknown field %s in %s (a tool has %s)%s",
					quote(key), where, strings.Join(toolFields, ", "), didYouMean(key, toolFields))
			}
		}
		tools = append(tools, tool)
	}
	return tools
}

// argumentsSchema reads a tool's arguments, a JSON Schema written as YAML, as the value
// encoding/json would read from its JSON (numbers as float64, lists as []any, mappings as
// map[string]any), so that the spec is the same once stored as JSON and read back. Null and
// an empty mapping are nil.
func (d *decoder) argumentsSchema(v *yaml.Node, what string) map[string]any {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must be a JSON Schema written as a mapping, like {type: object, properties: {...}}, not %s",
			what, kindName(v))
		return nil
	}
	x, ok := d.schemaValue(v, what, 0)
	if !ok {
		return nil
	}
	m := x.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	return m
}

// schemaValue reads one value of a JSON Schema written as YAML as the JSON value it stands
// for (see argumentsSchema), within the decoder's budget: yamlJSON, strict.
func (d *decoder) schemaValue(v *yaml.Node, what string, depth int) (any, bool) {
	return d.yamlJSON(v, what, depth, maxArgumentsDepth, true)
}

// checkToolAgent checks a tool-calling agent: its prompt, its tools and the bounds of its
// loop. A problem about one tool names the field "tools.<i>" or "tools.<i>.<key>", where
// Parse has the line of the tool or of its key.
func checkToolAgent(t *Task) []problem {
	var probs []problem
	if strings.TrimSpace(t.Prompt) == "" {
		probs = append(probs, problem{field: "prompt", msg: "prompt is required for an agent with tools: it starts the conversation " +
			"in which the model calls them"})
	} else {
		probs = append(probs, checkTemplate(t, "prompt", "prompt", t.Prompt, nil)...)
	}
	switch {
	case len(t.Tools) == 0:
		probs = append(probs, problem{field: "tools", msg: "tools are required for an agent with a prompt: a list of " +
			"{name, description, type, command}; a prompt the model answers without tools is an llm task"})
	case len(t.Tools) > MaxTools:
		probs = append(probs, problem{field: "tools", msg: fmt.Sprintf("the agent has %d tools; the limit is %d", len(t.Tools), MaxTools)})
	default:
		probs = append(probs, checkTools(t.Tools)...)
	}
	if t.MaxTurns < 0 || t.MaxTurns > MaxMaxTurns {
		probs = append(probs, problem{field: "max-turns", msg: fmt.Sprintf("max-turns %d is out of range 0..%d; 0 means %d",
			t.MaxTurns, MaxMaxTurns, DefaultMaxTurns)})
	}
	if t.MaxToolCalls < 0 || t.MaxToolCalls > MaxMaxToolCalls {
		probs = append(probs, problem{field: "max-tool-calls", msg: fmt.Sprintf("max-tool-calls %d is out of range 0..%d; 0 means %d",
			t.MaxToolCalls, MaxMaxToolCalls, DefaultMaxToolCalls)})
	}
	if t.MaxTotalTokens < 0 {
		probs = append(probs, problem{field: "max-total-tokens", msg: fmt.Sprintf("max-total-tokens %d is negative; 0 means no bound",
			t.MaxTotalTokens)})
	}
	if t.MaxCost != nil && !(*t.MaxCost > 0 && *t.MaxCost < math.Inf(1)) {
		probs = append(probs, problem{field: "max-cost", msg: fmt.Sprintf("max-cost %g must be a positive amount, in the currency "+
			"of the provider's input-price and output-price", *t.MaxCost)})
	}
	switch {
	case t.OutputFormat != "" && t.OutputFormat != OutputText && t.OutputFormat != OutputJSON:
		probs = append(probs, problem{field: "output-format", msg: fmt.Sprintf("output-format %s is unknown: use %s or %s",
			quote(t.OutputFormat), OutputText, OutputJSON)})
	case len(t.OutputSchema) > 0 && t.OutputFormat != OutputJSON:
		probs = append(probs, problem{field: "output-schema", msg: "output-schema is for output-format: json: " +
			"a text answer has no schema"})
	case len(t.OutputSchema) > 0:
		if _, err := compileSchema(t.OutputSchema, outputSchemaURL); err != nil {
			probs = append(probs, problem{field: "output-schema", msg: "output-schema: " + err.Error()})
		}
	}
	return probs
}

// checkTools checks each tool of a tool-calling agent, naming it by its name, or by its
// position when it has none.
func checkTools(tools []Tool) []problem {
	var probs []problem
	seen := make(map[string]int, len(tools))
	for i, tool := range tools {
		label := fmt.Sprintf("tool #%d", i+1)
		if tool.Name != "" {
			label = "tool " + quote(tool.Name)
		}
		add := func(key, format string, args ...any) {
			field := fmt.Sprintf("tools.%d", i)
			if key != "" {
				field += "." + key
			}
			probs = append(probs, problem{field: field, msg: label + ": " + fmt.Sprintf(format, args...)})
		}
		first, dup := seen[tool.Name]
		switch {
		case tool.Name == "":
			add("", "name is required: the model calls the tool by it")
		case !toolNameRE.MatchString(tool.Name):
			add("name", "name is invalid: %s (what every model provider accepts)", toolNameRule)
		case dup:
			add("name", "name is already used by tool #%d", first+1)
		default:
			seen[tool.Name] = i
		}
		if strings.TrimSpace(tool.Description) == "" {
			add("description", "description is required: it tells the model what the tool does and when to use it")
		}
		switch {
		case tool.Type == "":
			add("", "type is required (tool types: %s)", strings.Join(ToolTypes(), ", "))
		case !slices.Contains(ToolTypes(), tool.Type):
			add("type", "unknown type %s (tool types: %s)", quote(tool.Type), strings.Join(ToolTypes(), ", "))
		case tool.Type == ToolShell && strings.TrimSpace(tool.Command) == "":
			add("", "command is required for a shell tool: the script run with bash -c, which reads the call's arguments "+
				"from its environment")
		case tool.Type == ToolHTTP && strings.TrimSpace(tool.URL) == "":
			add("", "url is required for an http tool: where each call is sent (under one of the workers' worker.http-tools.allow)")
		case tool.Type == ToolWorkflow && tool.Workflow == "":
			add("", "workflow is required for a workflow tool: the stored workflow each call starts")
		case tool.Type == ToolWorkflow && !nameRE.MatchString(tool.Workflow):
			add("workflow", "workflow %s is invalid: %s", quote(tool.Workflow), nameRule)
		case tool.Type == ToolWorkflow && tool.Version < 0:
			add("version", "version %d is negative; 0 means the latest stored", tool.Version)
		case tool.Type == ToolMCP && (tool.Command == "") == (tool.URL == ""):
			add("", "an mcp tool has a command (its server, run per attempt and spoken to over its standard input and "+
				"output) or a url (a server over streamable HTTP), one of them")
		}
		if tool.URL != "" {
			if u, err := url.Parse(tool.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				add("url", "url %s must be an http or https URL with a host and no user", quote(tool.URL))
			}
		}
		own := map[string][]string{ToolShell: {"command", "arguments"}, ToolHTTP: {"url", "method", "headers", "arguments"},
			ToolMCP: {"command", "url", "include", "exclude"}, ToolWorkflow: {"workflow", "version", "arguments"}}[tool.Type]
		for key, set := range map[string]bool{"command": tool.Command != "", "url": tool.URL != "", "method": tool.Method != "",
			"headers": len(tool.Headers) > 0, "include": len(tool.Include) > 0, "exclude": len(tool.Exclude) > 0,
			"arguments": len(tool.Arguments) > 0, "workflow": tool.Workflow != "", "version": tool.Version != 0} {
			if set && own != nil && !slices.Contains(own, key) {
				add(key, "%s is not a field of %s tool", key, aType(tool.Type))
			}
		}
		switch {
		case tool.ApproveWhen != "" && tool.Approve:
			add("approve-when", "approve: true already makes every call wait for approval; approve-when picks some of them")
		case tool.ApproveWhen != "":
			if tmpl, err := parseTemplate("approve-when", tool.ApproveWhen); err != nil {
				add("approve-when", "%v", err)
			} else if err := staticProblem(tmpl); err != nil {
				add("approve-when", "approve-when: %v", err)
			}
		}
		if tool.Method != "" && !slices.Contains(HTTPMethods(), tool.Method) {
			add("method", "method %s is unknown: use %s", quote(tool.Method), strings.Join(HTTPMethods(), ", "))
		}
		for k := range tool.Headers {
			if !headerNameRE.MatchString(k) {
				add("headers", "header name %s is invalid: letters, digits and !#$%%&'*+-.^_`|~", quote(k))
			}
		}
		if len(tool.Arguments) > 0 {
			if _, err := compileArguments(tool.Arguments); err != nil {
				add("arguments", "arguments: %v", err)
			}
		}
		switch {
		case tool.OnInterrupted == "":
		case tool.Type == ToolWorkflow:
			add("on-interrupted", "on-interrupted does not apply to a workflow tool: a call cut off by a crash goes on "+
				"with the child it started, and never starts a second; leave it out")
		case !slices.Contains(OnInterruptedPolicies(), tool.OnInterrupted):
			add("on-interrupted", "on-interrupted %s is unknown: use %s", quote(tool.OnInterrupted), strings.Join(OnInterruptedPolicies(), ", "))
		case tool.OnInterrupted == OnInterruptedRetry && !tool.Idempotent:
			add("on-interrupted", "on-interrupted: retry needs idempotent: true: a call cut off by a crash may have taken effect, "+
				"and a call that is not idempotent, run twice, may have its effect twice; use ask or fail, or make the tool "+
				"dedupe on $ZKSCHED_TOOL_CALL_ID and say idempotent: true")
		}
		if tool.Timeout < 0 {
			add("timeout", "timeout %s is negative; 0 means %s", tool.Timeout, Duration(DefaultToolTimeout))
		}
	}
	return probs
}

// checkNoLoop refuses the fields of a tool-calling agent on an agent with steps.
func checkNoLoop(t *Task) []problem {
	var probs []problem
	if t.Prompt != "" {
		probs = append(probs, problem{field: "prompt", msg: "an agent has steps or a prompt and tools, not both: " +
			"each step has its own prompt"})
	}
	if len(t.Tools) > 0 {
		probs = append(probs, problem{field: "tools", msg: "an agent has steps or a prompt and tools, not both: " +
			"steps run their prompts in order, tools are called by the model in a loop that a prompt starts"})
	}
	if t.Workdir != "" {
		probs = append(probs, problem{field: "workdir", msg: "workdir is where an agent's tools run; an agent with steps has none"})
	}
	for _, f := range loopFields[1:] {
		if f.isSet(t) {
			probs = append(probs, problem{field: f.name, msg: f.name + " bounds an agent with tools; an agent with steps " +
				"makes one model call a step"})
		}
	}
	return probs
}

// argumentsURL names a tool's arguments schema while it is compiled: a $ref to anything but
// the schema itself resolves to a URL that cannot be loaded (.invalid is no domain).
const argumentsURL = "https://zksched.invalid/tool-arguments.json"

// compileArguments compiles a tool's arguments schema: a JSON Schema (draft 2020-12 unless
// its $schema names another) of an object, which may refer only to itself. Nothing is
// loaded from outside, neither files nor URLs.
func compileArguments(schema map[string]any) (*jsonschema.Schema, error) {
	if schema["type"] != "object" {
		return nil, errors.New(`the schema must have type: object: a call's arguments are an object of named values`)
	}
	return compileSchema(schema, argumentsURL)
}

// outputSchemaURL names an agent's output schema while it is compiled, as argumentsURL does.
const outputSchemaURL = "https://zksched.invalid/output.json"

// compileSchema compiles a JSON Schema named by url (draft 2020-12 unless its $schema names
// another), which may refer only to itself.
func compileSchema(schema map[string]any, url string) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(url, schema); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %s", clipTo(libraryMessage(err.Error()), maxMessage/2))
	}
	s, err := c.Compile(url)
	if err != nil {
		var load *jsonschema.LoadURLError
		var invalid *jsonschema.SchemaValidationError
		var verr *jsonschema.ValidationError
		switch {
		case errors.As(err, &load):
			return nil, fmt.Errorf("$ref %s cannot be loaded: a schema may refer only to itself, as \"#/$defs/NAME\"",
				quote(load.URL))
		case errors.As(err, &invalid) && errors.As(invalid.Err, &verr):
			return nil, fmt.Errorf("not a valid JSON Schema: %s", validationMessage(verr))
		}
		return nil, fmt.Errorf("not a valid JSON Schema: %s", clipTo(libraryMessage(err.Error()), maxMessage/2))
	}
	return s, nil
}

// maxCauses is the most failures a validation message lists.
const maxCauses = 5

// validationMessage says briefly what a validation failed on: the innermost failures, each
// with where it is ("at '/city': got number, want string"), sorted.
func validationMessage(e *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, libraryMessage(strings.Replace(e.Error(), "at ''", "at the top", 1)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(e)
	// The validator visits an object's properties in no fixed order.
	slices.Sort(leaves)
	msg := strings.Join(leaves[:min(len(leaves), maxCauses)], "; ")
	if more := len(leaves) - maxCauses; more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	return clipTo(msg, maxMessage/2)
}

// libraryMessage is a message of the JSON Schema library made safe to show: the library
// quotes values whole, in single quotes, so the double quotes a value holds become single
// quotes too, leaving a message's double quotes to its own values, cut to MaxQuoted. The
// whole message is cut by its callers.
func libraryMessage(s string) string {
	return strings.ReplaceAll(s, `"`, "'")
}

// The compiled arguments schemas of CheckArgs, by their JSON. A worker runs few distinct
// tools, so the cache is emptied rather than managed when it is full.
var (
	argsMu    sync.Mutex
	argsCache = map[string]*jsonschema.Schema{}
)

// maxCachedArgs is the most compiled schemas CheckArgs keeps.
const maxCachedArgs = 256

// CheckArgs checks the arguments of a call of the tool, a JSON object, against its
// Arguments schema; a tool without one takes no arguments, so only an empty object (or
// nothing, or null) passes. The error, meant to go back to the model, says what is wrong:
// the arguments are not JSON, or which values do not match the schema and where. Compiled
// schemas are cached, so checking each call is cheap; CheckArgs may be called from many
// goroutines.
func (t Tool) CheckArgs(args json.RawMessage) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("the arguments are not JSON: %v", err)
	}
	if len(t.Arguments) == 0 {
		if m, ok := v.(map[string]any); v == nil || ok && len(m) == 0 {
			return nil
		}
		return fmt.Errorf("tool %s takes no arguments: call it with {}", t.Name)
	}
	s, err := t.argsSchema()
	if err != nil {
		return err
	}
	if err := s.Validate(v); err != nil {
		var verr *jsonschema.ValidationError
		if errors.As(err, &verr) {
			return fmt.Errorf("the arguments do not match the tool's schema: %s", validationMessage(verr))
		}
		return fmt.Errorf("the arguments do not match the tool's schema: %v", err)
	}
	return nil
}

// argsSchema returns the tool's compiled Arguments schema, from the cache if it is there.
func (t Tool) argsSchema() (*jsonschema.Schema, error) {
	key, err := json.Marshal(t.Arguments)
	if err != nil {
		return nil, fmt.Errorf("tool %s: arguments: %v", t.Name, err)
	}
	argsMu.Lock()
	s, ok := argsCache[string(key)]
	argsMu.Unlock()
	if ok {
		return s, nil
	}
	s, err = compileArguments(t.Arguments)
	if err != nil {
		// Validate refuses such a spec; only one built by hand gets here.
		return nil, fmt.Errorf("tool %s: arguments: %v", t.Name, err)
	}
	argsMu.Lock()
	if len(argsCache) >= maxCachedArgs {
		clear(argsCache)
	}
	argsCache[string(key)] = s
	argsMu.Unlock()
	return s, nil
}

// CheckOutput checks a tool-calling agent's final answer against its output-format: for
// json, that the answer (a code fence around it taken off) is one JSON value matching
// output-schema, if any. It returns the answer as it is to be stored: the JSON without the
// fence.
func (t *Task) CheckOutput(answer string) (string, error) {
	if t.OutputFormat != OutputJSON {
		return answer, nil
	}
	text := strings.TrimSpace(answer)
	if strings.HasPrefix(text, "```") && strings.HasSuffix(text, "```") && len(text) >= 6 {
		text = strings.TrimSpace(strings.TrimSuffix(text, "```"))
		_, body, _ := strings.Cut(text, "\n")
		text = strings.TrimSpace(body)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return answer, fmt.Errorf("the answer is not JSON: %v", err)
	}
	if dec.More() {
		return answer, errors.New("the answer holds more than one JSON value")
	}
	if len(t.OutputSchema) == 0 {
		return text, nil
	}
	s, err := compileSchema(t.OutputSchema, outputSchemaURL)
	if err != nil {
		return answer, err
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return answer, fmt.Errorf("the answer is not JSON: %v", err)
	}
	if err := s.Validate(inst); err != nil {
		var verr *jsonschema.ValidationError
		if errors.As(err, &verr) {
			return answer, fmt.Errorf("the answer does not match output-schema: %s", validationMessage(verr))
		}
		return answer, fmt.Errorf("the answer does not match output-schema: %v", err)
	}
	return text, nil
}

// ToolCallID is the stable id of the seq-th tool call of turn in the tool-calling agent's task
// instance taskID: the same in every attempt, it is the call's ZKSCHED_TOOL_CALL_ID and
// Idempotency-Key.
func ToolCallID(taskID int64, turn, seq int) string {
	return fmt.Sprintf("zk-%d-%d-%d", taskID, turn, seq)
}
