package workflow

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// field is one key of a task mapping: how to read it from YAML into a Task, and whether a
// Task has it set (so Validate can refuse a field on a task type it does not belong to, also
// for a Spec that came from JSON).
type field struct {
	name string
	// decode reads v into t; where names the task for messages ("task \"extract\"").
	decode func(d *decoder, v *yaml.Node, t *Task, where string)
	isSet  func(t *Task) bool
}

func stringField(name string, p func(*Task) *string) field {
	return field{
		name: name,
		decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
			if s, ok := d.scalar(v, where+": "+name, "a string"); ok {
				*p(t) = s
			}
		},
		isSet: func(t *Task) bool { return *p(t) != "" },
	}
}

func intField(name string, p func(*Task) *int) field {
	return field{
		name: name,
		decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
			if n, ok := d.intValue(v, where+": "+name); ok {
				*p(t) = n
			}
		},
		isSet: func(t *Task) bool { return *p(t) != 0 },
	}
}

func durationField(name string, p func(*Task) *Duration) field {
	return field{
		name: name,
		decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
			if dur, ok := d.durationValue(v, where+": "+name); ok {
				*p(t) = Duration(dur)
			}
		},
		isSet: func(t *Task) bool { return *p(t) != 0 },
	}
}

func stringListField(name string, p func(*Task) *[]string) field {
	return field{
		name: name,
		decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
			if list := d.stringList(v, where+": "+name, "task names"); list != nil {
				*p(t) = list
			}
		},
		isSet: func(t *Task) bool { return len(*p(t)) > 0 },
	}
}

func stringMapField(name string, p func(*Task) *map[string]string) field {
	return field{
		name: name,
		decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
			*p(t) = d.stringMap(v, where+": "+name)
		},
		isSet: func(t *Task) bool { return len(*p(t)) > 0 },
	}
}

// intValue reads an integer; ok is false for null and for a value that is not one (then
// recorded as an error).
func (d *decoder) intValue(v *yaml.Node, what string) (int, bool) {
	v = d.resolve(v)
	s, ok := d.scalar(v, what, "an integer")
	if !ok || v.Tag == "!!null" {
		return 0, false
	}
	// Decoding through the node keeps YAML's own integer syntax (0x1F, 1_000, +5).
	var n int
	if v.Tag != "!!int" || v.Decode(&n) != nil {
		d.errorf(v.Line, "%s must be an integer, not %s", what, quote(s))
		return 0, false
	}
	return n, true
}

// durationValue reads a Go duration; ok is false for null and for a malformed one (then
// recorded as an error).
func (d *decoder) durationValue(v *yaml.Node, what string) (time.Duration, bool) {
	v = d.resolve(v)
	s, ok := d.scalar(v, what, "a duration")
	if !ok || v.Tag == "!!null" {
		return 0, false
	}
	dur, err := parseDuration(s)
	if err != nil {
		d.errorf(v.Line, "%s %v", what, err)
		return 0, false
	}
	return dur, true
}

// stringMap reads a mapping of strings to strings, such as params or env. Values are taken as
// written, so `day: 2026-11-01` and `port: 8080` are the strings "2026-11-01" and "8080".
func (d *decoder) stringMap(v *yaml.Node, what string) map[string]string {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must be a mapping of names to values, like {A: b}, not %s", what, kindName(v))
		return nil
	}
	m := make(map[string]string)
	for _, kv := range d.mapping(v, what) {
		if s, ok := d.scalar(kv.value, fmt.Sprintf("%s: %s", what, kv.key.Value), "a string"); ok {
			m[kv.key.Value] = s
		}
	}
	return m
}

// stringList reads a list of strings, nouns saying what they are ("task names"); nil for
// null or when it is not a list of strings.
func (d *decoder) stringList(v *yaml.Node, what, nouns string) []string {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(v.Line, "%s must be a list of %s, like [a, b], not %s", what, nouns, kindName(v))
		return nil
	}
	var list []string
	for _, item := range v.Content {
		if !d.visit(1) {
			return nil
		}
		if s, ok := d.scalar(item, what+" entries", nouns); ok {
			list = append(list, s)
		}
	}
	return list
}
