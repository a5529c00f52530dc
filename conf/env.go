package conf

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// envPrefix starts every environment variable zksched reads.
const envPrefix = "ZKSCHED_"

// applyEnv applies the ZKSCHED_<SECTION>_<KEY> variables of env ("K=V" strings) onto dst, a
// pointer to a struct such as [Config] whose fields are the sections.
//
// A variable whose SECTION is not a section of [Config] is not ours to judge and is ignored:
// the worker gives task processes ZKSCHED_TASK_INSTANCE, ZKSCHED_ATTEMPT and ZKSCHED_WORKER,
// and a task may run zksched itself. A known section with an unknown KEY is an error, so a
// typo is not silently ignored. An empty variable counts as unset, as no key accepts an empty
// value.
func applyEnv(dst any, env []string) []error {
	root := reflect.ValueOf(dst).Elem()
	sections := fieldsOf(root.Type())
	var errs []error
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		rest, ok := strings.CutPrefix(name, envPrefix)
		if !ok {
			continue
		}
		d := decoder{where: func(*yaml.Node) string { return name }}
		inSection, found := false, false
		for _, section := range sections {
			sub, ok := strings.CutPrefix(rest, envName(section.name)+"_")
			if !ok {
				continue
			}
			inSection = true
			if d.env(root.Field(section.index), sub, section.name, val, true) {
				found = true
				break
			}
		}
		if inSection && !found {
			errs = append(errs, fmt.Errorf("conf: %s: unknown key", name))
		}
		errs = append(errs, d.errs...)
	}
	return errs
}

// envName is the environment spelling of a YAML key: upper case, with - and . turned into _.
func envName(key string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToUpper(key))
}

// env finds the key that rest (the variable's name past the part that led to v) names
// inside v and, if apply is set, assigns val to it. It reports whether rest names a key.
// key is v's dotted path.
func (d *decoder) env(v reflect.Value, rest, key, val string, apply bool) bool {
	switch v.Kind() {
	case reflect.Struct:
		for _, field := range fieldsOf(v.Type()) {
			f, name := v.Field(field.index), field.name
			if composite(f.Type()) {
				sub, ok := strings.CutPrefix(rest, envName(name)+"_")
				if ok && d.env(f, sub, joinKey(key, name), val, apply) {
					return true
				}
				continue
			}
			if rest == envName(name) {
				if apply {
					d.setEnv(f, joinKey(key, name), val)
				}
				return true
			}
		}
		return false
	case reflect.Map:
		return d.envMap(v, rest, key, val, apply)
	default:
		return false
	}
}

// envMap resolves rest inside a map section such as llm.providers, where it is
// <NAME>_<KEY> (or just <NAME> for a map of plain values). Names lose their case and
// punctuation in the environment, so an entry the file already has is matched by its
// environment spelling; otherwise the entry is created under the lower-cased name, cut at
// the first point where the remainder is a known key.
func (d *decoder) envMap(v reflect.Value, rest, key, val string, apply bool) bool {
	elemType := v.Type().Elem()
	resolves := func(name, sub string) bool {
		if !composite(elemType) {
			return sub == ""
		}
		return sub != "" && d.env(reflect.New(elemType).Elem(), sub, joinKey(key, name), val, false)
	}
	split := func(name, sub string) bool {
		if !resolves(name, sub) {
			return false
		}
		if apply && val != "" {
			d.setMapEntry(v, name, func(elem reflect.Value) {
				if composite(elemType) {
					d.env(elem, sub, joinKey(key, name), val, true)
				} else {
					d.setEnv(elem, joinKey(key, name), val)
				}
			})
		}
		return true
	}
	for iter := v.MapRange(); iter.Next(); {
		name := iter.Key().String()
		if rest == envName(name) && split(name, "") {
			return true
		}
		if sub, ok := strings.CutPrefix(rest, envName(name)+"_"); ok && split(name, sub) {
			return true
		}
	}
	if !composite(elemType) {
		return rest != "" && split(strings.ToLower(rest), "")
	}
	for i := range len(rest) {
		if i > 0 && rest[i] == '_' && split(strings.ToLower(rest[:i]), rest[i+1:]) {
			return true
		}
	}
	return false
}

// setEnv assigns the variable's value val to the leaf v. A list is comma-separated.
func (d *decoder) setEnv(v reflect.Value, key, val string) {
	if val == "" {
		return
	}
	// Tagged as strings, so "~" or "null" in a variable is taken literally, not as unset.
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: val}
	if v.Kind() == reflect.Slice {
		n = &yaml.Node{Kind: yaml.SequenceNode}
		for item := range strings.SplitSeq(val, ",") {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.TrimSpace(item)})
		}
	}
	d.decode(v, n, key)
}

// composite reports whether values of type t hold keys of their own rather than a value.
func composite(t reflect.Type) bool {
	return t.Kind() == reflect.Struct || t.Kind() == reflect.Map
}
