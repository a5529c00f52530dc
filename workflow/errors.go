package workflow

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Error is one problem with a workflow. Parse, ParseFile and Validate return every problem
// they find as an *Error, joined with errors.Join, so a caller can show them one by one (or
// mark lines in an editor) by unwrapping the joined error.
type Error struct {
	// File is the path given to ParseFile; empty otherwise.
	File string
	// Line is the 1-based line in the file; 0 when not known, as for Validate on a Spec that
	// did not come from a file.
	Line int
	// Msg says what is wrong, naming the task and field.
	Msg string
}

// Error formats e as "file: line 4: msg", leaving out what is not known.
func (e *Error) Error() string {
	s := e.Msg
	if e.Line > 0 {
		s = fmt.Sprintf("line %d: %s", e.Line, s)
	}
	if e.File != "" {
		s = e.File + ": " + s
	}
	return s
}

// dedupe drops repeated errors, which a mapping brought into several places by an alias
// would otherwise produce once per place.
func dedupe(errs []*Error) []*Error {
	type key struct {
		line int
		msg  string
	}
	seen := make(map[key]bool)
	var out []*Error
	for _, e := range errs {
		k := key{e.Line, e.Msg}
		if !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// sortByLine puts errors in file order, keeping the order of those on one line; errors with
// no line go last.
func sortByLine(errs []*Error) {
	slices.SortStableFunc(errs, func(a, b *Error) int {
		return cmp.Compare(sortLine(a), sortLine(b))
	})
}

func sortLine(e *Error) int {
	if e.Line == 0 {
		return math.MaxInt
	}
	return e.Line
}
