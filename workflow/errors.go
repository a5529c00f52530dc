package workflow

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds on what a rejection says, so that a hostile file cannot make the answer to it large:
// the errors are read by a person, who needs the first few to start fixing the file.
const (
	// MaxErrors is the most problems Parse, ParseFile and Validate report; past it they stop
	// looking and say so in one more error.
	MaxErrors = 20
	// MaxQuoted is the most bytes of a value from the file that a message quotes; a longer
	// one is cut and ends with an ellipsis.
	MaxQuoted = 200
	// maxMessage bounds one message whole, for those that quote several values.
	maxMessage = 1024
	// maxListed is the most names a message lists.
	maxListed = 10
)

// errStopped is the message of the error that ends a list cut at MaxErrors.
var errStopped = fmt.Sprintf("stopped after %d errors: fix these and check the file again for more", MaxErrors)

// clip cuts s to at most MaxQuoted bytes, on a character boundary, marking the cut with an
// ellipsis.
func clip(s string) string {
	return clipTo(s, MaxQuoted)
}

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// quote is %q of a value from the file, cut to MaxQuoted bytes.
func quote(s string) string {
	return strconv.Quote(clip(s))
}

// nameList joins names for a message: at most maxListed of them, each cut to MaxQuoted
// bytes.
func nameList(names []string) string {
	shown := names[:min(len(names), maxListed)]
	parts := make([]string, len(shown))
	for i, n := range shown {
		parts[i] = clip(n)
	}
	s := strings.Join(parts, ", ")
	if more := len(names) - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

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
	// Param is the run param the problem is about, for the problems of a run's params
	// (CheckParams, Spec.RunParams), so a form can show each beside its field; empty for a
	// problem of no one param.
	Param string
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

// errorList collects a file's errors: each once (a mapping brought into several places by
// an alias would otherwise give the same error once per place), each message at most
// maxMessage bytes, and at most MaxErrors of them; full says when one more was refused.
type errorList struct {
	errs []*Error
	seen map[errorKey]bool
	full bool
}

type errorKey struct {
	line int
	msg  string
}

// add records the error, unless it is a repeat or the list is full.
func (l *errorList) add(line int, msg string) { l.addParam(line, "", msg) }

// addParam records the error about the run param param, as add does.
func (l *errorList) addParam(line int, param, msg string) {
	if l.full {
		return
	}
	msg = clipTo(msg, maxMessage)
	k := errorKey{line, msg}
	if l.seen[k] {
		return
	}
	if len(l.errs) == MaxErrors {
		l.full = true
		return
	}
	if l.seen == nil {
		l.seen = make(map[errorKey]bool)
	}
	l.seen[k] = true
	l.errs = append(l.errs, &Error{Line: line, Msg: msg, Param: param})
}

// list returns the errors, ended by one that says the list was cut, if it was.
func (l *errorList) list() []*Error {
	if l.full {
		return append(l.errs, &Error{Msg: errStopped})
	}
	return l.errs
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

// aType is a task or tool type with its article, as a message reads it: "a shell", "an
// llm", "an agent", "an http".
func aType(typ string) string {
	if typ == "llm" || typ == "http" || typ == "mcp" || strings.IndexByte("aeiou", firstByte(typ)) >= 0 {
		return "an " + typ
	}
	return "a " + typ
}

func firstByte(s string) byte {
	if s == "" {
		return 0
	}
	return s[0]
}
