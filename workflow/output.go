package workflow

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// A task's output, what the tasks downstream read, is bounded: it is stored in the task's
// row and copied into the params of each task that reads it. Past its limit the task fails,
// naming the limit and the size, or, with output-overflow: truncate, its output is cut to
// the limit and marked truncated wherever it is shown.

// Bounds of a task's output-limit.
const (
	// DefaultOutputLimit is the output limit of a task that names none, unless the workers'
	// worker.output-limit says otherwise; the masters bound a for-each task's array of its
	// items' outputs by it when the task names none.
	DefaultOutputLimit = 1 << 20
	// MaxOutputLimit is the most a task's output-limit, or a worker's worker.output-limit-max,
	// may be.
	MaxOutputLimit = 64 << 20
)

// The values of output-overflow.
const (
	// OverflowFail fails a task whose output is over its limit: the default.
	OverflowFail = "fail"
	// OverflowTruncate keeps the first bytes of an output over the limit, as many as fit,
	// and marks it truncated.
	OverflowTruncate = "truncate"
)

// OverflowPolicies are the values of output-overflow.
func OverflowPolicies() []string { return []string{OverflowFail, OverflowTruncate} }

// Truncate returns the first bytes of output that fit in limit bytes, cut at the start of a
// UTF-8 character so that a character is never split.
func Truncate(output string, limit int) string {
	if len(output) <= limit {
		return output
	}
	cut := max(limit, 0)
	for cut > 0 && !utf8.RuneStart(output[cut]) {
		cut--
	}
	return output[:cut]
}

// OutputTooLarge is the error of a task whose output is over its limit.
type OutputTooLarge struct {
	// What names the output: "output", or "for-each output" for a for-each task's array.
	What string
	// Size is the output's size in bytes; Limit the limit it is over.
	Size, Limit int
	// Partial says Size is a lower bound: the output was not read to its end.
	Partial bool
}

func (e *OutputTooLarge) Error() string {
	size := FormatBytes(e.Size)
	if e.Partial {
		size = "more than " + size
	}
	return fmt.Sprintf("%s is %s, over the task's output-limit of %s: raise output-limit (at most the workers' "+
		"worker.output-limit-max) or set output-overflow: truncate", e.What, size, FormatBytes(e.Limit))
}

// FormatBytes writes a size in bytes and, from 1 KiB on, in KiB or MiB too: "200000 bytes
// (195.3 KiB)".
func FormatBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d bytes (%.1f KiB)", n, float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// checkOutput checks a task's output-limit and output-overflow.
func checkOutput(t *Task) []problem {
	var probs []problem
	if t.OutputLimit < 0 || t.OutputLimit > MaxOutputLimit {
		probs = append(probs, problem{field: "output-limit", msg: fmt.Sprintf(
			"output-limit %d is out of range: 1..%d bytes, or 0 for the workers' worker.output-limit", t.OutputLimit, MaxOutputLimit)})
	}
	if t.OutputOverflow != "" && !slices.Contains(OverflowPolicies(), t.OutputOverflow) {
		probs = append(probs, problem{field: "output-overflow", msg: fmt.Sprintf("unknown output-overflow %s (known: %s)",
			quote(t.OutputOverflow), strings.Join(OverflowPolicies(), ", "))})
	}
	if (t.OutputLimit != 0 || t.OutputOverflow != "") && !slices.Contains(forEachTypes, t.Type) && t.Type != "" {
		if _, known := lookupType(t.Type); known {
			field := "output-limit"
			if t.OutputLimit == 0 {
				field = "output-overflow"
			}
			probs = append(probs, problem{field: field, msg: fmt.Sprintf(
				"%s bounds the output of tasks that run on workers (%s), not of %s task", field, strings.Join(forEachTypes, ", "), aType(t.Type))})
		}
	}
	return probs
}
