package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The budget of one Parse. Aliases (*name) and merge keys (<<) let a small file expand into
// an enormous spec (the "billion laughs" attack), so the walk counts what it reads each time
// an alias brings it in, and stops at these bounds, which real workflows stay far below.
const (
	// maxVisits bounds the YAML nodes Parse looks at.
	maxVisits = 1 << 19
	// maxExpanded bounds the bytes of the values Parse reads. A spec is stored and sent
	// whole, so it must not grow much past the file it came from.
	maxExpanded = 4 << 20
	// maxMergeDepth bounds merge keys bringing in mappings that merge others in turn.
	maxMergeDepth = 32
)

// Parse reads a workflow file: strict YAML (an unknown field or a duplicate key is an error
// with its line), defaults filled in (Group "default"), then Validate. Problems are returned
// as *Error values with their lines, joined with errors.Join: all the problems of the YAML
// itself (malformed, unknown fields, values of the wrong kind) if there are any, otherwise
// all the problems Validate finds; at most MaxErrors of them, each quoting at most MaxQuoted
// bytes of a value, and within a budget of nodes and bytes that aliases cannot get around.
// No Spec is returned unless the whole file is good.
func Parse(data []byte) (*Spec, error) {
	s, errs := parse(data)
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return s, nil
}

// ParseFile reads and parses the workflow file at path. Problems in the file carry the path,
// as in "demo.yaml: line 4: unknown field ...".
func ParseFile(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read workflow file: %w", err)
	}
	defer f.Close()
	// Read one byte past the limit so a larger file is refused without being read whole.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read workflow file: %w", err)
	}
	s, errs := parse(data)
	if len(errs) > 0 {
		for _, e := range errs {
			e.File = path
		}
		return nil, joinErrors(errs)
	}
	return s, nil
}

func joinErrors(errs []*Error) error {
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e
	}
	return errors.Join(joined...)
}

func parse(data []byte) (*Spec, []*Error) {
	if len(data) > MaxFileSize {
		return nil, []*Error{{Msg: fmt.Sprintf("the file is larger than %d bytes (1 MiB), the limit for a workflow file", MaxFileSize)}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, []*Error{{Msg: "the file is empty: a workflow needs a name and tasks"}}
	case err != nil:
		return nil, []*Error{yamlError(err, data)}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, []*Error{yamlError(err, data)}
	default:
		return nil, []*Error{{Line: next.Line, Msg: "a second YAML document starts here: a workflow file holds one"}}
	}

	d := &decoder{merging: make(map[*yaml.Node]bool)}
	s := d.decodeSpec(doc.Content[0])
	if len(d.errs.errs) > 0 {
		return nil, d.errs.list()
	}
	s.setDefaults()
	probs := s.problems()
	if len(probs) == 0 {
		return s, nil
	}
	var errs errorList
	for _, p := range probs {
		errs.add(d.pos.line(p), p.msg)
	}
	sortByLine(errs.errs)
	return nil, errs.list()
}

// setDefaults fills in what a file may leave out, and turns empty lists and maps into nil so
// that a Spec survives a JSON round trip (which omits them) unchanged.
func (s *Spec) setDefaults() {
	if len(s.Params) == 0 {
		s.Params = nil
	}
	for name, p := range s.Params {
		p.setDefaults()
		s.Params[name] = p
	}
	s.setPolicyDefaults()
	if len(s.Triggers) == 0 {
		s.Triggers = nil
	}
	for _, t := range s.Triggers {
		if t.Webhook != nil && len(t.Webhook.Params) == 0 {
			t.Webhook.Params = nil
		}
	}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		if t.Group == "" && t.File != nil {
			// A file sensor is checked where its file is.
			t.Group = t.File.Group
		}
		if t.Group == "" {
			t.Group = DefaultGroup
		}
		if len(t.DependsOn) == 0 {
			t.DependsOn = nil
		}
		if len(t.Env) == 0 {
			t.Env = nil
		}
	}
}

var yamlErrorRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns the YAML library's "yaml: line 3: did not find expected key" into an Error
// of the same form as the others. A tab used for indentation gets a hint: the library's
// message for it does not mention tabs, and it is the most common way to break a YAML file.
func yamlError(err error, data []byte) *Error {
	if m := yamlErrorRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		msg := "malformed YAML: " + m[2]
		if lines := bytes.Split(data, []byte("\n")); line >= 1 && line <= len(lines) &&
			bytes.HasPrefix(bytes.TrimLeft(lines[line-1], " "), []byte("\t")) {
			msg += " (YAML is indented with spaces; this line starts with a tab)"
		}
		return &Error{Line: line, Msg: msg}
	}
	return &Error{Msg: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}

// decoder walks the YAML node tree into a Spec. It reads the tree itself, rather than letting
// the YAML library fill the structs, to name the task in every message, to know each field's
// line for validation errors, and to suggest the field a typo meant.
type decoder struct {
	errs      errorList
	visits    int
	expanded  int
	exhausted bool
	// merging holds the mappings being merged in, to refuse one that merges itself.
	merging map[*yaml.Node]bool
	pos     positions
	// fields are the lines of the keys of the task being decoded (taskPos.fields).
	fields map[string]int
}

// taskField records the line of a key inside a mapping of the task being decoded, as
// "<field>.<key>", so validation problems point at it.
func (d *decoder) taskField(key string, line int) {
	if d.fields != nil {
		d.fields[key] = line
	}
}

// positions remembers where each field was in the file, so that validation problems, found
// on the Spec after decoding, can still be reported with a line.
type positions struct {
	fields map[string]int // workflow-level keys
	tasks  []taskPos
}

type taskPos struct {
	line   int
	fields map[string]int
}

// line is the line of the field a problem is about, or of its task (of the mapping that
// holds it, for a workflow-level "schedule.cron" the file leaves out), or 0 if unknown.
func (p positions) line(pr problem) int {
	if pr.task < 0 {
		if l, ok := p.fields[pr.field]; ok {
			return l
		}
		parent, _, _ := strings.Cut(pr.field, ".")
		return p.fields[parent]
	}
	if pr.task >= len(p.tasks) {
		return 0
	}
	tp := p.tasks[pr.task]
	// "tools.2.name" is on the line of that key, else of tools.2, else of tools.
	for key, ok := pr.field, true; ok; key, _, ok = cutLast(key, ".") {
		if l, found := tp.fields[key]; found {
			return l
		}
	}
	return tp.line
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

func (d *decoder) errorf(line int, format string, args ...any) {
	if d.errs.full {
		return
	}
	d.errs.add(line, fmt.Sprintf(format, args...))
}

// visit counts n more nodes against maxVisits and reports whether the walk may go on: not
// once the budget is spent or MaxErrors are found.
func (d *decoder) visit(n int) bool {
	if d.exhausted || d.errs.full {
		return false
	}
	d.visits += n
	if d.visits > maxVisits {
		d.exhausted = true
		d.errorf(0, "the document expands to more than %d YAML nodes through aliases (*name) and merge keys (<<)", maxVisits)
		return false
	}
	return true
}

// expand counts the bytes of a value read against maxExpanded and reports whether the walk
// may go on.
func (d *decoder) expand(n int) bool {
	if d.exhausted || d.errs.full {
		return false
	}
	d.expanded += n
	if d.expanded > maxExpanded {
		d.exhausted = true
		d.errorf(0, "the document expands to more than %d bytes of values through aliases (*name): "+
			"a value brought in by an alias counts each time", maxExpanded)
		return false
	}
	return true
}

// resolve follows an alias to the node it names.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

// scalar returns the text of a scalar as written; null (~, or nothing) is "". For a mapping
// or a list it records "<what> must be <want>, not a mapping".
func (d *decoder) scalar(n *yaml.Node, what, want string) (string, bool) {
	n = d.resolve(n)
	if n.Kind != yaml.ScalarNode {
		d.errorf(n.Line, "%s must be %s, not %s", what, want, kindName(n))
		return "", false
	}
	if n.Tag == "!!null" {
		return "", true
	}
	if !d.expand(len(n.Value)) {
		return "", false
	}
	return n.Value, true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty"
		}
		return quote(n.Value)
	}
	return "an unexpected YAML node"
}

// pair is one key and value of a mapping.
type pair struct{ key, value *yaml.Node }

// mapping returns the key/value pairs of the mapping n, with YAML merge keys (<<: *defaults)
// expanded: n's own keys win over merged ones, and an earlier merged mapping wins over a later
// one. A key written twice in one mapping is an error; where names the mapping in messages.
func (d *decoder) mapping(n *yaml.Node, where string) []pair {
	return d.mergedMapping(n, where, 0)
}

// mergedMapping is mapping for a mapping brought in by depth merge keys.
func (d *decoder) mergedMapping(n *yaml.Node, where string, depth int) []pair {
	var pairs []pair
	var merges []*yaml.Node
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !d.visit(2) {
			return nil
		}
		k, v := d.resolve(n.Content[i]), n.Content[i+1]
		if k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k.Line, "keys in %s must be names, not %s", where, kindName(k))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.errorf(k.Line, "duplicate key %s in %s (first at line %d)", quote(k.Value), where, first.Line)
			continue
		}
		seen[k.Value] = k
		pairs = append(pairs, pair{k, v})
	}
	if len(merges) > 0 {
		if depth == maxMergeDepth {
			d.errorf(n.Line, "%s merges mappings (<<) more than %d deep", where, maxMergeDepth)
			return pairs
		}
		d.merging[n] = true
		defer delete(d.merging, n)
	}
	for _, m := range merges {
		m = d.resolve(m)
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			src = d.resolve(src)
			if src.Kind != yaml.MappingNode {
				d.errorf(src.Line, "a merge key (<<) in %s must bring in a mapping, not %s", where, kindName(src))
				continue
			}
			if d.merging[src] {
				d.errorf(src.Line, "a merge key (<<) in %s brings in a mapping that contains it", where)
				continue
			}
			for _, p := range d.mergedMapping(src, where, depth+1) {
				if _, ok := seen[p.key.Value]; !ok {
					seen[p.key.Value] = p.key
					pairs = append(pairs, p)
				}
			}
		}
	}
	return pairs
}

func (d *decoder) decodeSpec(root *yaml.Node) *Spec {
	root = d.resolve(root)
	s := &Spec{}
	if root.Kind != yaml.MappingNode {
		d.errorf(root.Line, "a workflow must be a YAML mapping with a name and tasks, not %s", kindName(root))
		return s
	}
	d.pos.fields = make(map[string]int)
	for _, kv := range d.mapping(root, "the workflow") {
		key := kv.key.Value
		d.pos.fields[key] = kv.key.Line
		switch key {
		case "name":
			s.Name, _ = d.scalar(kv.value, "workflow name", "a string")
		case "description":
			s.Description, _ = d.scalar(kv.value, "workflow description", "a string")
		case "params":
			s.Params = d.decodeParams(kv.value)
		case "params-extra":
			s.ParamsExtra, _ = d.scalar(kv.value, "params-extra", "a string")
		case "tasks":
			s.Tasks = d.decodeTasks(kv.value)
		case "schedule":
			s.Schedule = d.decodeSchedule(kv.value)
		case "max-active-instances":
			s.MaxActiveInstances, _ = d.intValue(kv.value, "max-active-instances")
		case "when-full":
			s.WhenFull, _ = d.scalar(kv.value, "when-full", "a string")
		case "concurrency":
			s.Concurrency = d.decodeConcurrency(kv.value)
		case "timeout":
			if v, ok := d.durationValue(kv.value, "workflow timeout"); ok {
				s.Timeout = Duration(v)
			}
		case "priority":
			s.Priority, _ = d.intValue(kv.value, "workflow priority")
		case "notify":
			s.Notify = d.decodeNotify(kv.value)
		case "deadline":
			if v, ok := d.durationValue(kv.value, "workflow deadline"); ok {
				s.Deadline = Duration(v)
			}
		case "triggers":
			s.Triggers = d.decodeTriggers(kv.value)
		case "on-assets":
			s.OnAssets = d.decodeOnAssets(kv.value)
		default:
			d.errorf(kv.key.Line, "unknown field %s in the workflow%s", quote(key), didYouMean(key, workflowFields))
		}
	}
	return s
}

// workflowFields are the top-level keys of a workflow file.
var workflowFields = []string{"name", "description", "params", "params-extra", "tasks", "schedule", "max-active-instances",
	"when-full", "concurrency", "timeout", "priority", "notify", "deadline", "triggers", "on-assets"}

func (d *decoder) decodeTasks(v *yaml.Node) []Task {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(v.Line, "tasks must be a list of tasks, not %s", kindName(v))
		return nil
	}
	if len(v.Content) > MaxTasks {
		d.errorf(v.Line, "the workflow has %d tasks; the limit is %d", len(v.Content), MaxTasks)
		return nil
	}
	tasks := make([]Task, len(v.Content))
	d.pos.tasks = make([]taskPos, len(v.Content))
	for i, n := range v.Content {
		if !d.visit(1) {
			return nil
		}
		tasks[i], d.pos.tasks[i] = d.decodeTask(i, n)
	}
	return tasks
}

func (d *decoder) decodeTask(i int, n *yaml.Node) (Task, taskPos) {
	n = d.resolve(n)
	var t Task
	tp := taskPos{line: n.Line, fields: make(map[string]int)}
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, "task #%d must be a mapping of fields (name, type, ...), not %s", i+1, kindName(n))
		return t, tp
	}
	where := taskLabel(i, nameOf(n))
	d.fields = tp.fields
	defer func() { d.fields = nil }()
	for _, kv := range d.mapping(n, where) {
		key := kv.key.Value
		f, ok := lookupField(key)
		if !ok {
			d.errorf(kv.key.Line, "unknown field %s in %s%s", quote(key), where, didYouMean(key, fieldNames()))
			continue
		}
		tp.fields[key] = kv.key.Line
		f.decode(d, kv.value, &t, where)
	}
	return t, tp
}

// nameOf finds a task's name before the task is decoded, so that every message about the
// task, including the first, can name it.
func nameOf(n *yaml.Node) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode {
			return n.Content[i+1].Value
		}
	}
	return ""
}

// taskLabel names a task in messages: by its name, or by its position when it has none.
func taskLabel(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("task #%d", i+1)
	}
	return "task " + quote(name)
}

// didYouMean suggests the known name closest to a misspelt one, if one is close enough to be
// a likely typo.
func didYouMean(got string, known []string) string {
	// No typo makes a name much longer than the one it meant.
	if len(got) > maxKnownName+2 {
		return ""
	}
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(got, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// maxKnownName is longer than every field name didYouMean is given.
const maxKnownName = 32

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
