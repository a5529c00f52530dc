// Package workflowtest makes hostile workflow files for the tests that check a parser, the
// API and a real master refuse them within bounds.
package workflowtest

import (
	"fmt"
	"strings"
)

// Hostile is one hostile workflow file and what it is meant to stress.
type Hostile struct {
	// Name says what the file does, for subtest names.
	Name string
	// YAML is the file, at most size bytes.
	YAML []byte
}

// AliasBomb returns the reported attack: a file of about size bytes in which one large
// value, the workflow's description (anchored as &big), is the type of each of aliases tasks
// through an alias, so that every task's "unknown type" message would quote the whole value.
func AliasBomb(size, aliases int) []byte {
	var tail strings.Builder
	tail.WriteString("tasks:\n")
	for i := range aliases {
		fmt.Fprintf(&tail, "  - {name: t%d, type: *big}\n", i)
	}
	head := "name: w\ndescription: &big "
	n := max(size-len(head)-tail.Len()-1, 1)
	return []byte(head + strings.Repeat("x", n) + "\n" + tail.String())
}

// ManyErrors returns a file of about size bytes whose every line is a different error: tasks
// with a long unknown field each, so the messages are many and each quotes a long key.
func ManyErrors(size int) []byte {
	var b strings.Builder
	b.WriteString("name: w\ntasks:\n")
	key := strings.Repeat("k", 1000)
	for i := 0; b.Len() < size-1100; i++ {
		fmt.Fprintf(&b, "  - {name: t%d, type: noop, %s%d: v}\n", i, key, i)
	}
	return []byte(b.String())
}

// DeeplyNested returns a file of about size bytes holding a flow list nested depth levels
// deep (the YAML library refuses more than 10,000) as an unknown field, padded with a
// comment.
func DeeplyNested(size, depth int) []byte {
	head := "name: w\ntasks: [{name: a, type: noop}]\nx-deep: " + strings.Repeat("[", depth) +
		strings.Repeat("]", depth) + "\n#"
	return []byte(head + strings.Repeat("x", max(size-len(head)-1, 0)) + "\n")
}

// MergeBomb returns a file in which each level merges the one before ten times, levels deep:
// ten to the power levels keys to look at, in a few short lines.
func MergeBomb(levels int) []byte {
	var b strings.Builder
	b.WriteString("name: w\nx-defs:\n  - &e0 {A: x, B: x, C: x, D: x, E: x, F: x, G: x, H: x, I: x, J: x}\n")
	for i := 1; i <= levels; i++ {
		prev := fmt.Sprintf("*e%d", i-1)
		fmt.Fprintf(&b, "  - &e%d {<<: [%s]}\n", i, strings.TrimSuffix(strings.Repeat(prev+", ", 10), ", "))
	}
	fmt.Fprintf(&b, "tasks:\n  - {name: a, type: noop, env: *e%d}\n", levels)
	return []byte(b.String())
}

// LongValues returns a file of about size bytes with a few fields whose values are long
// and wrong: a name, a group and a type each of a third of size.
func LongValues(size int) []byte {
	n := max(size/3-40, 1)
	return []byte(fmt.Sprintf("name: %s\ntasks:\n  - {name: a, type: %s, group: %s}\n",
		strings.Repeat("n", n), strings.Repeat("t", n), strings.Repeat("g", n)))
}

// All returns the hostile shapes, each of about size bytes (the merge bomb is small: its
// size is in what it expands to).
func All(size int) []Hostile {
	return []Hostile{
		{Name: "alias bomb", YAML: AliasBomb(size*9/10, 300)},
		{Name: "many errors", YAML: ManyErrors(size)},
		{Name: "deeply nested", YAML: DeeplyNested(size, 9_000)},
		{Name: "merge bomb", YAML: MergeBomb(7)},
		{Name: "long values", YAML: LongValues(size)},
	}
}
