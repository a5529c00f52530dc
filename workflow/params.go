package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Limits on the params of a run. Tasks read each param as the environment variable
// ZKSCHED_PARAM_<name>, and the kernel refuses to start a process with one variable over
// 128 KiB, so a value is kept well under it; the count keeps a run's environment, and the
// JSON stored with every task instance, small.
const (
	// MaxParams is the most params a run may have.
	MaxParams = 100
	// MaxParamValue is the longest param value, in bytes.
	MaxParamValue = 64 << 10
)

// CheckParams checks params given for a run, wherever they come from (a file's params,
// `zksched submit --param`, `zksched schedule trigger --param`, the API), by one rule: at most
// MaxParams of them; names of 1 to 128 letters, digits and '_', not starting with a digit;
// values of at most MaxParamValue bytes of UTF-8 without NUL. It returns the problems, at
// most MaxErrors, each an *Error naming its param (Error.Param), joined with errors.Join; nil
// if there is none.
func CheckParams(params map[string]string) error {
	var errs errorList
	for _, p := range paramProblems(params) {
		errs.addParam(0, p.param, p.msg)
	}
	return joinErrors(errs.list())
}

// paramProblem is a problem of a run's params: msg, starting "params: ", is about the param
// named param ("" for all of them).
type paramProblem struct{ param, msg string }

// paramProblems is CheckParams as messages.
func paramProblems(params map[string]string) []paramProblem {
	if len(params) > MaxParams {
		return []paramProblem{{"", fmt.Sprintf("params: %d of them; a run has at most %d", len(params), MaxParams)}}
	}
	var probs []paramProblem
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		switch {
		case !envRE.MatchString(k) || len(k) > maxNameLen:
			probs = append(probs, paramProblem{k, fmt.Sprintf("params: name %s is invalid: %s (tasks read it as $ZKSCHED_PARAM_<name>)", quote(k), paramRule)})
		case len(v) > MaxParamValue:
			probs = append(probs, paramProblem{k, fmt.Sprintf("params: %s is %d bytes; a value is at most %d", k, len(v), MaxParamValue)})
		case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			probs = append(probs, paramProblem{k, fmt.Sprintf("params: %s is not text: a value is UTF-8 without NUL", k)})
		}
	}
	return probs
}

// The types of a declared param. A run's params are text whatever their type: tasks read
// them as $ZKSCHED_PARAM_<name> and templates as .params.<name>. The type says which texts
// a run may give, and how a value is written once checked (see Spec.RunParams).
const (
	// ParamString takes any text (the type of a param declared by its default alone).
	ParamString = "string"
	// ParamInteger takes a decimal integer of 64 bits, written without sign or leading zeros
	// it did not need ("+007" becomes "7").
	ParamInteger = "integer"
	// ParamNumber takes a JSON number ("3", "-1.5", "2e10"), written as given.
	ParamNumber = "number"
	// ParamBoolean takes true or false (also 1, 0, t, f, TRUE, False, ...), written "true" or
	// "false".
	ParamBoolean = "boolean"
	// ParamJSON takes a JSON document, written compact.
	ParamJSON = "json"
)

// ParamTypes returns the types a declared param may have.
func ParamTypes() []string {
	return []string{ParamString, ParamInteger, ParamNumber, ParamBoolean, ParamJSON}
}

// The values of a workflow's params-extra: what a run may do with a param the workflow does
// not declare.
const (
	// ParamsExtraRefuse refuses a run given an undeclared param (the default, also for "").
	ParamsExtraRefuse = "refuse"
	// ParamsExtraAllow passes undeclared params on to the tasks as they are given.
	ParamsExtraAllow = "allow"
)

// Param declares one param of a workflow. A file declares it either by its default alone,
// `region: eu` (a string param with that default, the form older versions stored), or with
// a mapping of these fields. Default and Enum hold the values as tasks read them: checked
// against Type (and Pattern) and written as Spec.RunParams writes a given value.
//
// It is stored as JSON in the same two forms: a string for a param that is a string with a
// default and nothing else, an object otherwise.
type Param struct {
	// Type is one of ParamTypes; Parse sets ParamString when the file names none, and ""
	// means ParamString too.
	Type string `json:"type" yaml:"type"`
	// Default is the value of a run that gives none; nil for no default.
	Default *string `json:"default,omitempty" yaml:"default,omitempty"`
	// Enum, unless empty, lists the only values a run may give.
	Enum []string `json:"enum,omitempty" yaml:"enum,omitempty"`
	// Required makes a run without the param refused. A required param has no default.
	Required bool `json:"required,omitempty" yaml:"required,omitempty"`
	// Description is free text, for a person giving the param (a run form, the docs).
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Pattern is a regular expression (Go's RE2 syntax) a string param's value must match
	// whole, as if written ^(?:pattern)$.
	Pattern string `json:"pattern,omitempty" yaml:"pattern,omitempty"`
}

// typ is p's type, ParamString for "".
func (p Param) typ() string {
	if p.Type == "" {
		return ParamString
	}
	return p.Type
}

// short reports whether p is written as its default alone.
func (p Param) short() bool {
	return p.typ() == ParamString && p.Default != nil && len(p.Enum) == 0 && !p.Required && p.Description == "" && p.Pattern == ""
}

// MarshalJSON writes p as its default alone when that says all of it, so the stored spec of
// a file that declares params by their defaults is the one older versions stored.
func (p Param) MarshalJSON() ([]byte, error) {
	if p.short() {
		return json.Marshal(*p.Default)
	}
	type plain Param
	q := plain(p)
	q.Type = p.typ()
	return json.Marshal(q)
}

// UnmarshalJSON reads either form: a string (or null, the empty string) is a string param
// with that default; an object declares the param.
func (p *Param) UnmarshalJSON(b []byte) error {
	var def *string
	if err := json.Unmarshal(b, &def); err == nil {
		if def == nil {
			def = new(string)
		}
		*p = Param{Type: ParamString, Default: def}
		return nil
	}
	type plain Param
	var q plain
	if err := json.Unmarshal(b, &q); err != nil {
		return fmt.Errorf("a param is a string (its default) or an object declaring it: %w", err)
	}
	*p = Param(q)
	p.Type = p.typ()
	return nil
}

// paramFields are the keys of a param's declaration.
var paramFields = []string{"type", "default", "enum", "required", "description", "pattern"}

// maxParamDepth bounds the nesting of a json param's default written as YAML.
const maxParamDepth = 64

// decodeParams reads the workflow's params: each its default alone (a string param) or a
// mapping declaring it.
func (d *decoder) decodeParams(v *yaml.Node) map[string]Param {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "params must be a mapping of names to defaults or declarations, like {region: eu} or "+
			"{size: {type: integer, default: 3}}, not %s", kindName(v))
		return nil
	}
	params := make(map[string]Param)
	for _, kv := range d.mapping(v, "params") {
		name := kv.key.Value
		d.pos.fields["params."+name] = kv.key.Line
		if n := d.resolve(kv.value); n.Kind == yaml.MappingNode {
			params[name] = d.decodeParam(name, n)
			continue
		}
		if s, ok := d.scalar(kv.value, "params: "+name, "a default or a mapping declaring the param (type, default, ...)"); ok {
			params[name] = Param{Type: ParamString, Default: &s}
		}
	}
	return params
}

// decodeParam reads the mapping n declaring the param name.
func (d *decoder) decodeParam(name string, n *yaml.Node) Param {
	what := "params: " + name
	var p Param
	for _, kv := range d.mapping(n, what) {
		key := kv.key.Value
		switch key {
		case "type":
			p.Type, _ = d.scalar(kv.value, what+": type", "a string")
		case "default":
			if s, ok := d.paramValue(kv.value, what+": default"); ok {
				p.Default = &s
			}
		case "enum":
			l := d.resolve(kv.value)
			if l.Tag == "!!null" {
				continue
			}
			if l.Kind != yaml.SequenceNode {
				d.errorf(l.Line, "%s: enum must be a list of values, like [eu, us], not %s", what, kindName(l))
				continue
			}
			for _, item := range l.Content {
				if !d.visit(1) {
					return p
				}
				if s, ok := d.paramValue(item, what+": enum entries"); ok {
					p.Enum = append(p.Enum, s)
				}
			}
		case "required":
			r := d.resolve(kv.value)
			if r.Kind != yaml.ScalarNode || r.Tag != "!!bool" || r.Decode(&p.Required) != nil {
				d.errorf(r.Line, "%s: required must be true or false, not %s", what, kindName(r))
			}
		case "description":
			p.Description, _ = d.scalar(kv.value, what+": description", "a string")
		case "pattern":
			p.Pattern, _ = d.scalar(kv.value, what+": pattern", "a string")
		default:
			d.errorf(kv.key.Line, "unknown field %s in %s%s", quote(key), what, didYouMean(key, paramFields))
		}
	}
	return p
}

// paramValue reads a param's value as written in the file: a scalar's text, or a mapping or
// list as compact JSON (a json param's value); ok is false for null.
func (d *decoder) paramValue(v *yaml.Node, what string) (string, bool) {
	v = d.resolve(v)
	if v.Kind == yaml.ScalarNode {
		s, ok := d.scalar(v, what, "a value")
		return s, ok && v.Tag != "!!null"
	}
	x, ok := d.jsonValue(v, what, 0)
	if !ok {
		return "", false
	}
	b, err := json.Marshal(x)
	if err != nil {
		d.errorf(v.Line, "%s is not JSON: %v", what, err)
		return "", false
	}
	return string(b), true
}

// jsonValue reads a YAML value as the JSON value it stands for, within the decoder's budget.
func (d *decoder) jsonValue(v *yaml.Node, what string, depth int) (any, bool) {
	return d.yamlJSON(v, what, depth, maxParamDepth, false)
}

// yamlJSON reads a YAML value as the JSON value it stands for, within the decoder's budget,
// nested at most maxDepth deep. Strict (a JSON Schema, see argumentsSchema) refuses a YAML
// value JSON has no form for — a key that is not a string, .inf and .nan, a tagged value such
// as !!binary — and reads every number as a float, as JSON does; otherwise a scalar is what
// YAML decodes it to, and a key its text.
func (d *decoder) yamlJSON(v *yaml.Node, what string, depth, maxDepth int, strict bool) (any, bool) {
	v = d.resolve(v)
	if depth > maxDepth {
		d.errorf(v.Line, "%s is nested more than %d deep", what, maxDepth)
		return nil, false
	}
	switch v.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for _, kv := range d.mapping(v, what) {
			if strict && kv.key.Tag != "!!str" {
				d.errorf(kv.key.Line, "%s: the key %s is not a string, as JSON keys are: quote it (\"%s\")",
					what, quote(kv.key.Value), clip(kv.key.Value))
				return nil, false
			}
			x, ok := d.yamlJSON(kv.value, what, depth+1, maxDepth, strict)
			if !ok {
				return nil, false
			}
			m[kv.key.Value] = x
		}
		return m, !d.exhausted && !d.errs.full
	case yaml.SequenceNode:
		l := make([]any, 0, len(v.Content))
		for _, item := range v.Content {
			if !d.visit(1) {
				return nil, false
			}
			x, ok := d.yamlJSON(item, what, depth+1, maxDepth, strict)
			if !ok {
				return nil, false
			}
			l = append(l, x)
		}
		return l, true
	case yaml.ScalarNode:
		if !d.expand(len(v.Value)) {
			return nil, false
		}
		if strict {
			return d.strictScalar(v, what)
		}
		if v.Tag == "!!str" {
			return v.Value, true
		}
		var x any
		if err := v.Decode(&x); err != nil {
			d.errorf(v.Line, "%s: %s is not a JSON value", what, quote(v.Value))
			return nil, false
		}
		return x, true
	}
	d.errorf(v.Line, "%s must be a value, not %s", what, kindName(v))
	return nil, false
}

// strictScalar reads a scalar of a JSON Schema (yamlJSON, strict).
func (d *decoder) strictScalar(v *yaml.Node, what string) (any, bool) {
	switch v.Tag {
	case "!!str", "!!timestamp":
		// A date is the text it is written as, as everywhere in the file.
		return v.Value, true
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		if v.Decode(&b) == nil {
			return b, true
		}
	case "!!int", "!!float":
		var f float64
		if v.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, true
		}
		d.errorf(v.Line, "%s: %s is not a JSON number", what, quote(v.Value))
		return nil, false
	}
	d.errorf(v.Line, "%s: %s (%s) is not a JSON value", what, quote(v.Value), v.Tag)
	return nil, false
}

// numberRE is JSON's syntax of a number.
var numberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// check checks the value v given for p and returns it as tasks read it; msg, unless empty,
// says why v is refused. re is p's compiled Pattern, nil for none.
func (p Param) check(v string, re *regexp.Regexp) (out, msg string) {
	if v, msg = p.normalize(v); msg != "" {
		return "", msg
	}
	if re != nil && !re.MatchString(v) {
		return "", fmt.Sprintf("must match the pattern %s, not %s", quote(p.Pattern), quote(v))
	}
	if len(p.Enum) > 0 && !slices.Contains(p.Enum, v) {
		quoted := make([]string, len(p.Enum))
		for i, e := range p.Enum {
			quoted[i] = quote(e)
		}
		return "", fmt.Sprintf("must be one of %s, not %s", nameList(quoted), quote(v))
	}
	return v, ""
}

// normalize checks v against p's type alone and returns it as tasks read it; msg, unless
// empty, says why v is refused.
func (p Param) normalize(v string) (out, msg string) {
	switch p.typ() {
	case ParamInteger:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", fmt.Sprintf("must be an integer (decimal, 64 bits), not %s", quote(v))
		}
		v = strconv.FormatInt(n, 10)
	case ParamNumber:
		if _, err := strconv.ParseFloat(v, 64); !numberRE.MatchString(v) || err != nil {
			return "", fmt.Sprintf("must be a number, written as in JSON (3, -1.5, 2e10), not %s", quote(v))
		}
	case ParamBoolean:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", fmt.Sprintf("must be true or false, not %s", quote(v))
		}
		v = strconv.FormatBool(b)
	case ParamJSON:
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(v)); err != nil {
			return "", fmt.Sprintf("must be JSON, not %s", quote(v))
		}
		v = b.String()
	}
	return v, ""
}

// setDefaults writes p's default and enum entries as tasks read them, leaving those its
// type refuses for Validate to report.
func (p *Param) setDefaults() {
	if p.Type == "" {
		p.Type = ParamString
	}
	if p.Default != nil {
		if v, msg := p.normalize(*p.Default); msg == "" {
			p.Default = &v
		}
	}
	for i, e := range p.Enum {
		if v, msg := p.normalize(e); msg == "" {
			p.Enum[i] = v
		}
	}
}

// pattern compiles p's Pattern to match a whole value; nil for none.
func (p Param) pattern() (*regexp.Regexp, error) {
	if p.Pattern == "" {
		return nil, nil
	}
	return regexp.Compile(`^(?:` + p.Pattern + `)$`)
}

// paramDeclProblems are the problems of the workflow's params and params-extra: names, types,
// patterns, and defaults and enum entries checked as a run's values would be.
func (s *Spec) paramDeclProblems() []problem {
	var probs []problem
	add := func(field, format string, args ...any) {
		probs = append(probs, problem{task: -1, field: field, msg: fmt.Sprintf(format, args...)})
	}
	// The names, and the defaults' size and text, follow the rule of a run's params.
	defaults := make(map[string]string, len(s.Params))
	for name, p := range s.Params {
		defaults[name] = ""
		if p.Default != nil {
			defaults[name] = *p.Default
		}
	}
	for _, p := range paramProblems(defaults) {
		add("params", "%s", p.msg)
	}
	switch s.ParamsExtra {
	case "", ParamsExtraRefuse, ParamsExtraAllow:
	default:
		add("params-extra", "params-extra %s is unknown: use %s or %s", quote(s.ParamsExtra), ParamsExtraAllow, ParamsExtraRefuse)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Params)) {
		if !envRE.MatchString(name) || len(name) > maxNameLen {
			continue // refused for its name above
		}
		p, field := s.Params[name], "params."+name
		addParam := func(format string, args ...any) {
			add(field, "params: %s: %s", name, fmt.Sprintf(format, args...))
		}
		if !slices.Contains(ParamTypes(), p.typ()) {
			addParam("type %s is unknown: use %s%s", quote(p.Type), strings.Join(ParamTypes(), ", "), didYouMean(p.Type, ParamTypes()))
			continue
		}
		re, err := p.pattern()
		switch {
		case err != nil:
			addParam("pattern %s is not a regular expression: %v", quote(p.Pattern), err)
			continue
		case re != nil && p.typ() != ParamString:
			addParam("a pattern is for string params, not for %s param", aType(p.typ()))
			continue
		}
		// Enum entries are checked without the enum itself.
		free := p
		free.Enum = nil
		for _, e := range p.Enum {
			if _, msg := free.check(e, re); msg != "" {
				addParam("enum entry %s", msg)
			}
		}
		switch {
		case p.Required && p.Default != nil:
			addParam("a required param has no default: a run must give it (leave out required, or the default)")
		case p.Default != nil:
			if _, msg := p.check(*p.Default, re); msg != "" {
				addParam("the default %s", msg)
			}
		}
		if s.Schedule == nil {
			continue
		}
		if name == ParamFireTime || name == ParamFireDate {
			if p.typ() != ParamString || len(p.Enum) > 0 || p.Pattern != "" {
				addParam("the schedule's fires give it as text: declare it as a string without enum or pattern")
			}
		} else if p.Required {
			addParam("it is required, but the schedule's fires give only %s and %s: give it a default instead", ParamFireTime, ParamFireDate)
		}
	}
	return probs
}

// Defaults returns the defaults of the workflow's params: the params of a run that gives
// none.
func (s *Spec) Defaults() map[string]string {
	defaults := make(map[string]string, len(s.Params))
	for name, p := range s.Params {
		if p.Default != nil {
			defaults[name] = *p.Default
		}
	}
	return defaults
}

// RunParams checks the params given for a run of the workflow, wherever they come from (the
// command line, the API, a child task, a schedule's fire): the rule of CheckParams; each one
// declared (unless params-extra: allow; a scheduled workflow's fires give fire_time and
// fire_date too), of its type, in its enum and matching its pattern; and every required one
// given. It returns the params as tasks read them (see the Param types) and nil, or nil and
// the problems, each an *Error naming its param (Error.Param), joined with errors.Join.
func (s *Spec) RunParams(given map[string]string) (map[string]string, error) {
	if err := CheckParams(given); err != nil {
		return nil, err
	}
	var errs errorList
	out, cloned := given, false
	for _, name := range slices.Sorted(maps.Keys(given)) {
		p, ok := s.Params[name]
		if !ok {
			if !s.extraAllowed(name) {
				errs.addParam(0, name, s.undeclared(name))
			}
			continue
		}
		re, err := p.pattern()
		if err != nil {
			// Validate refuses such a spec; one read from storage unchecked refuses the run.
			errs.addParam(0, name, fmt.Sprintf("params: %s: pattern %s is not a regular expression: %v", name, quote(p.Pattern), err))
			continue
		}
		v, msg := p.check(given[name], re)
		switch {
		case msg != "":
			errs.addParam(0, name, fmt.Sprintf("params: %s %s", name, msg))
		case v != given[name]:
			if !cloned {
				out, cloned = maps.Clone(given), true
			}
			out[name] = v
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Params)) {
		if _, ok := given[name]; !ok && s.Params[name].Required {
			errs.addParam(0, name, fmt.Sprintf("params: %s is required: the workflow gives it no default", name))
		}
	}
	if len(errs.errs) > 0 {
		return nil, joinErrors(errs.list())
	}
	return out, nil
}

// extraAllowed reports whether a run may give the param name, which the workflow does not
// declare.
func (s *Spec) extraAllowed(name string) bool {
	return s.ParamsExtra == ParamsExtraAllow || s.Schedule != nil && (name == ParamFireTime || name == ParamFireDate)
}

// undeclared says that the param name is not the workflow's.
func (s *Spec) undeclared(name string) string {
	declared := slices.Sorted(maps.Keys(s.Params))
	if len(declared) == 0 {
		return fmt.Sprintf("params: %s is not a param of workflow %s: it declares none", quote(name), s.Name)
	}
	return fmt.Sprintf("params: %s is not a param of workflow %s%s: it declares %s", quote(name), s.Name,
		didYouMean(name, declared), nameList(declared))
}

// ParamView is a declared param as the API shows it, for a form that runs the workflow: its
// values are text, as a run gives them.
type ParamView struct {
	Name string `json:"name"`
	// Type is one of ParamTypes.
	Type string `json:"type"`
	// Default is the value of a run that gives none; absent for none.
	Default *string `json:"default,omitempty"`
	// Enum, unless absent, lists the only values a run may give.
	Enum        []string `json:"enum,omitempty"`
	Required    bool     `json:"required"`
	Description string   `json:"description,omitempty"`
	// Pattern is the regular expression (RE2) a string value must match whole.
	Pattern string `json:"pattern,omitempty"`
}

// DeclaredParams returns the workflow's params, sorted by name.
func (s *Spec) DeclaredParams() []ParamView {
	views := make([]ParamView, 0, len(s.Params))
	for _, name := range slices.Sorted(maps.Keys(s.Params)) {
		p := s.Params[name]
		views = append(views, ParamView{Name: name, Type: p.typ(), Default: p.Default, Enum: p.Enum,
			Required: p.Required, Description: p.Description, Pattern: p.Pattern})
	}
	return views
}
