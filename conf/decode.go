package conf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decodeFile decodes the YAML document data, read from the file name, onto dst, a pointer to
// a struct such as [Config]. Keys the file does not mention keep the value dst already has.
func decodeFile(dst any, name string, data []byte) []error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file sets nothing
		}
		return []error{yamlError(name, err)}
	}
	// A second document would be silently ignored; refuse it, it is almost certainly a
	// concatenation mistake.
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return []error{fmt.Errorf("conf: %s:%d: more than one YAML document", name, extra.Line)}
	case !errors.Is(err, io.EOF):
		return []error{yamlError(name, err)}
	}

	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	root = unalias(root)
	if isNull(root) {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		return []error{fmt.Errorf("conf: %s:%d: not a YAML mapping: want sections such as registry: and worker: at the top level, got %s",
			name, root.Line, describe(root))}
	}

	d := decoder{where: func(n *yaml.Node) string { return fmt.Sprintf("%s:%d", name, n.Line) }}
	d.decode(reflect.ValueOf(dst).Elem(), root, "")
	return d.errs
}

// yamlLine matches the position the YAML parser puts in its messages.
var yamlLine = regexp.MustCompile(`^line (\d+): `)

// yamlParserProblems are the messages of the YAML library's parser, as opposed to its
// scanner. It reports their line counting from 0, and leaves the line out when it is the
// first, so yamlError adds one to point at the right line.
var yamlParserProblems = map[string]bool{
	"did not find expected <document start>": true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found undefined tag handle":             true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// yamlError restates a YAML parser error as "conf: file:line: problem".
func yamlError(name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	if yamlParserProblems[msg] {
		line++
	}
	if line == 0 {
		return fmt.Errorf("conf: %s: %s", name, msg)
	}
	return fmt.Errorf("conf: %s:%d: %s", name, line, msg)
}

// decoder assigns YAML nodes to Go values by reflection over their yaml tags. Doing it
// here rather than through yaml.Node.Decode lets every error name the dotted key it is about
// (registry.session-timeout), whatever the type, and lets the environment reuse the same
// conversions. It understands structs, maps with string keys (map sections such as
// llm.providers.<name>), slices, strings, bools, integers, floats and time.Duration.
type decoder struct {
	// where names the source of a node for messages: "file.yaml:3", or the name of the
	// environment variable being applied.
	where func(n *yaml.Node) string
	// errs collects every problem, so one run reports them all.
	errs []error
	// merging holds the mappings being merged, to refuse a mapping that merges itself
	// (&a {<<: *a}) instead of recursing forever.
	merging map[*yaml.Node]bool
}

// failf records a problem with the value of key.
func (d *decoder) failf(n *yaml.Node, key, format string, args ...any) {
	d.errs = append(d.errs, fmt.Errorf("conf: %s: %s: %s", d.where(n), key, fmt.Sprintf(format, args...)))
}

var durationType = reflect.TypeFor[time.Duration]()

// decode assigns node n to v. key is v's dotted path, "" for the whole configuration. A null
// node (an empty value, ~ or null) leaves v as it is, so "key:" with nothing after it keeps
// the default rather than zeroing it.
func (d *decoder) decode(v reflect.Value, n *yaml.Node, key string) {
	n = unalias(n)
	if isNull(n) {
		return
	}
	switch t := v.Type(); {
	case t.Kind() == reflect.Struct:
		d.decodeStruct(v, n, key)
	case t.Kind() == reflect.Map:
		d.decodeMap(v, n, key)
	case t.Kind() == reflect.Slice:
		d.decodeSlice(v, n, key)
	case n.Kind != yaml.ScalarNode:
		d.failf(n, key, "want %s, got %s", scalarName(t), describe(n))
	case t == durationType:
		dur, err := ParseDuration(n.Value)
		if err != nil {
			d.failf(n, key, "%v", err)
			return
		}
		v.SetInt(int64(dur))
	case t.Kind() == reflect.String:
		v.SetString(n.Value)
	case t.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if err != nil {
			d.failf(n, key, "invalid boolean %q", n.Value)
			return
		}
		v.SetBool(b)
	case v.CanInt():
		i, err := strconv.ParseInt(n.Value, 10, t.Bits())
		if err != nil {
			d.failf(n, key, "%s", numberProblem(err, "integer", n.Value))
			return
		}
		v.SetInt(i)
	case v.CanUint():
		u, err := strconv.ParseUint(n.Value, 10, t.Bits())
		if err != nil {
			d.failf(n, key, "%s", numberProblem(err, "unsigned integer", n.Value))
			return
		}
		v.SetUint(u)
	case v.CanFloat():
		f, err := strconv.ParseFloat(n.Value, t.Bits())
		if err != nil {
			d.failf(n, key, "%s", numberProblem(err, "number", n.Value))
			return
		}
		v.SetFloat(f)
	default:
		// A programming error in the config types, found by any test that loads a file.
		panic(fmt.Sprintf("conf: %s: unsupported field type %s", key, t))
	}
}

// leadingDays matches a duration that starts with whole days: its sign, the days, and the
// rest, a Go duration or nothing.
var leadingDays = regexp.MustCompile(`^([+-]?)([0-9]+)d(.*)$`)

// maxDays is the most days a time.Duration holds.
const maxDays = math.MaxInt64 / int64(24*time.Hour)

// ParseDuration reads a duration of the configuration: a Go duration (500ms, 10s, 1m30s,
// 168h) that may start with whole days, "d" (30d, 1d12h), which retention periods are
// naturally given in. Days are 24 hours.
func ParseDuration(s string) (time.Duration, error) {
	m := leadingDays.FindStringSubmatch(s)
	if m == nil {
		dur, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return dur, nil
	}
	days, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil || days > maxDays {
		return 0, fmt.Errorf("duration %q out of range", s)
	}
	dur := time.Duration(days) * 24 * time.Hour
	if m[3] != "" {
		if strings.HasPrefix(m[3], "+") || strings.HasPrefix(m[3], "-") {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		rest, err := time.ParseDuration(m[3])
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		if rest > math.MaxInt64-dur {
			return 0, fmt.Errorf("duration %q out of range", s)
		}
		dur += rest
	}
	if m[1] == "-" {
		dur = -dur
	}
	return dur, nil
}

// FormatDuration writes d as the configuration reads it: whole days as "30d", anything else as
// a Go duration.
func FormatDuration(d time.Duration) string {
	day := 24 * time.Hour
	if d != 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
}

func (d *decoder) decodeStruct(v reflect.Value, n *yaml.Node, key string) {
	if n.Kind != yaml.MappingNode {
		d.failf(n, displayKey(key), "want a mapping, got %s", describe(n))
		return
	}
	fields := make(map[string]int)
	for _, f := range fieldsOf(v.Type()) {
		fields[f.name] = f.index
	}
	for _, p := range d.pairs(n, key) {
		i, ok := fields[p.name]
		if !ok {
			d.errs = append(d.errs, fmt.Errorf("conf: %s: unknown key %q", d.where(p.key), joinKey(key, p.name)))
			continue
		}
		d.decode(v.Field(i), p.value, joinKey(key, p.name))
	}
}

// decodeMap decodes a mapping whose keys are names chosen by the user. An entry the map
// already has is decoded onto, so its keys that the node does not mention are kept.
func (d *decoder) decodeMap(v reflect.Value, n *yaml.Node, key string) {
	if n.Kind != yaml.MappingNode {
		d.failf(n, key, "want a mapping, got %s", describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		panic(fmt.Sprintf("conf: %s: map keys must be strings, not %s", key, v.Type().Key()))
	}
	for _, p := range d.pairs(n, key) {
		d.setMapEntry(v, p.name, func(elem reflect.Value) { d.decode(elem, p.value, joinKey(key, p.name)) })
	}
}

// setMapEntry lets set change the entry name of map v (a copy, as map entries cannot be
// changed in place) and stores it back.
func (d *decoder) setMapEntry(v reflect.Value, name string, set func(elem reflect.Value)) {
	k := reflect.ValueOf(name).Convert(v.Type().Key())
	elem := reflect.New(v.Type().Elem()).Elem()
	if old := v.MapIndex(k); old.IsValid() {
		elem.Set(old)
	}
	set(elem)
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	v.SetMapIndex(k, elem)
}

// decodeSlice replaces v with the list n: a list from the file or the environment replaces
// the default rather than adding to it.
func (d *decoder) decodeSlice(v reflect.Value, n *yaml.Node, key string) {
	if n.Kind != yaml.SequenceNode {
		d.failf(n, key, "want a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(s.Index(i), item, fmt.Sprintf("%s[%d]", key, i))
	}
	v.Set(s)
}

// pair is one key and value of a YAML mapping.
type pair struct {
	name  string
	key   *yaml.Node
	value *yaml.Node
}

// pairs returns the entries of mapping n, merged mappings ("<<: *anchor") first so that the
// mapping's own keys override them. It reports keys that are not strings and keys given
// twice, which YAML forbids and which would otherwise silently keep the last value.
func (d *decoder) pairs(n *yaml.Node, key string) []pair {
	var merged, own []pair
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.ScalarNode && kn.ShortTag() == "!!merge" {
			merged = append(merged, d.merge(vn, key)...)
			continue
		}
		if kn.Kind != yaml.ScalarNode {
			d.failf(kn, displayKey(key), "a key must be a string, got %s", describe(kn))
			continue
		}
		if first, ok := seen[kn.Value]; ok {
			d.errs = append(d.errs, fmt.Errorf("conf: %s: duplicate key %q (first at line %d)",
				d.where(kn), joinKey(key, kn.Value), first.Line))
			continue
		}
		seen[kn.Value] = kn
		own = append(own, pair{name: kn.Value, key: kn, value: vn})
	}
	return append(merged, own...)
}

// merge returns the entries a merge key brings in: one mapping, or a list of mappings of
// which the earlier ones win.
func (d *decoder) merge(vn *yaml.Node, key string) []pair {
	vn = unalias(vn)
	switch vn.Kind {
	case yaml.MappingNode:
		return d.mergeMapping(vn, key)
	case yaml.SequenceNode:
		var out []pair
		for i := len(vn.Content) - 1; i >= 0; i-- {
			m := unalias(vn.Content[i])
			if m.Kind != yaml.MappingNode {
				d.failf(m, displayKey(key), "a merge (<<) takes mappings, got %s", describe(m))
				continue
			}
			out = append(out, d.mergeMapping(m, key)...)
		}
		return out
	default:
		d.failf(vn, displayKey(key), "a merge (<<) takes a mapping or a list of mappings, got %s", describe(vn))
		return nil
	}
}

func (d *decoder) mergeMapping(m *yaml.Node, key string) []pair {
	if d.merging[m] {
		d.failf(m, displayKey(key), "a mapping merges itself")
		return nil
	}
	if d.merging == nil {
		d.merging = make(map[*yaml.Node]bool)
	}
	d.merging[m] = true
	defer delete(d.merging, m)
	return d.pairs(m, key)
}

// field is one configurable field of a struct: its yaml key and its index.
type field struct {
	name  string
	index int
}

// fieldsOf returns the configurable fields of struct type t, in declaration order.
func fieldsOf(t reflect.Type) []field {
	var fields []field
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		fields = append(fields, field{name: name, index: i})
	}
	return fields
}

// unalias follows YAML aliases (*anchor) to the node they stand for.
func unalias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe says what a node is, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	default:
		return "nothing"
	}
}

// scalarName names what a scalar of type t should be.
func scalarName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "a duration"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "a boolean"
	default:
		return "a number"
	}
}

func numberProblem(err error, what, value string) string {
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Sprintf("%s %q out of range", what, value)
	}
	return fmt.Sprintf("invalid %s %q", what, value)
}

func joinKey(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// displayKey names the whole configuration in messages about its top level.
func displayKey(key string) string {
	if key == "" {
		return "top level"
	}
	return key
}
