package workflow

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
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
// most MaxErrors, each an *Error, joined with errors.Join; nil if there is none.
func CheckParams(params map[string]string) error {
	var errs errorList
	for _, msg := range paramProblems(params) {
		errs.add(0, msg)
	}
	return joinErrors(errs.list())
}

// paramProblems is CheckParams as messages, each starting "params: ".
func paramProblems(params map[string]string) []string {
	if len(params) > MaxParams {
		return []string{fmt.Sprintf("params: %d of them; a run has at most %d", len(params), MaxParams)}
	}
	var probs []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		switch {
		case !envRE.MatchString(k) || len(k) > maxNameLen:
			probs = append(probs, fmt.Sprintf("params: name %s is invalid: %s (tasks read it as $ZKSCHED_PARAM_<name>)", quote(k), paramRule))
		case len(v) > MaxParamValue:
			probs = append(probs, fmt.Sprintf("params: %s is %d bytes; a value is at most %d", k, len(v), MaxParamValue))
		case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			probs = append(probs, fmt.Sprintf("params: %s is not text: a value is UTF-8 without NUL", k))
		}
	}
	return probs
}
