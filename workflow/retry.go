package workflow

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// A task's retry policy beyond retries and retry-interval: how the wait before each retry
// grows (retry-backoff) and which failures are retried at all (retry-on, no-retry-on). The
// error kinds those name are defined here, once, as users write them.

// The error kinds of a failed attempt, as retry-on and no-retry-on name them.
const (
	// ErrorTimeout: the attempt ran past the task's timeout and was stopped.
	ErrorTimeout = "timeout"
	// ErrorKilled: the task's process was killed with SIGKILL by something other than
	// zksched, such as the kernel's OOM killer (exit status 137).
	ErrorKilled = "killed"
	// ErrorModelError: a model call of an llm or agent task failed for a reason other than a
	// rate limit (a server error, a bad request, an unreachable provider, ...).
	ErrorModelError = "model-error"
	// ErrorRateLimit: the model provider refused a call for its rate limit (HTTP 429) after
	// the worker's own retries of the call.
	ErrorRateLimit = "rate-limit"
)

// ErrorKinds are the error kinds retry-on and no-retry-on may name.
func ErrorKinds() []string {
	return []string{ErrorTimeout, ErrorKilled, ErrorModelError, ErrorRateLimit}
}

// Bounds of the retry policy.
const (
	// MaxExitCode is the highest exit status a process can have; retry-on names codes
	// 1..MaxExitCode (0 is success, never retried).
	MaxExitCode = 255
	// DefaultBackoffFactor is the factor of a retry-backoff that names none.
	DefaultBackoffFactor = 2.0
	// maxRetryWait bounds a computed wait, so that a backoff without max never overflows.
	maxRetryWait = time.Duration(1 << 62)
)

// RetryBackoff makes the wait before each retry grow: Initial before the first, Factor times
// the one before for each later retry, at most Max, then shortened by up to Jitter of itself
// at random, so that tasks that failed together do not all retry at once.
type RetryBackoff struct {
	// Initial is the wait before the first retry; required, more than 0.
	Initial Duration `json:"initial" yaml:"initial"`
	// Factor multiplies the wait at each further retry, at least 1. Parse sets
	// DefaultBackoffFactor when the file names none.
	Factor float64 `json:"factor" yaml:"factor"`
	// Max caps the wait, at least Initial; 0 means no cap.
	Max Duration `json:"max,omitempty" yaml:"max,omitempty"`
	// Jitter, 0..1, is the share of each wait drawn at random: the wait is w × (1 − Jitter × r)
	// with r uniform in [0, 1). 0 waits exactly w.
	Jitter float64 `json:"jitter,omitempty" yaml:"jitter,omitempty"`
}

// RetryOn names failures by their exit code or their error kind (ErrorKinds): a task's
// retry-on retries only the failures it names, its no-retry-on never those it names.
type RetryOn struct {
	// ExitCodes are exit statuses of the task's process, 1..MaxExitCode.
	ExitCodes []int `json:"exit-codes,omitempty" yaml:"exit-codes,omitempty"`
	// Errors are error kinds, each one of ErrorKinds.
	Errors []string `json:"errors,omitempty" yaml:"errors,omitempty"`
}

// Failure is how a failed attempt failed, as retry-on and no-retry-on see it.
type Failure struct {
	// ExitCode is the exit status of the task's process; nil when there was no process, or
	// when the attempt was stopped (a timeout) and its status is the stop's.
	ExitCode *int
	// Kind is one of ErrorKinds, "" for none.
	Kind string
}

// String names the failure as the messages of a refused retry do: "exit 3", "timeout",
// "exit 137 (killed)".
func (f Failure) String() string {
	switch {
	case f.ExitCode != nil && f.Kind != "":
		return fmt.Sprintf("exit %d (%s)", *f.ExitCode, f.Kind)
	case f.ExitCode != nil:
		return fmt.Sprintf("exit %d", *f.ExitCode)
	case f.Kind != "":
		return f.Kind
	}
	return "a failure with no exit code and no error kind"
}

// matches reports whether r names f, by its exit code or its kind.
func (r *RetryOn) matches(f Failure) bool {
	return (f.ExitCode != nil && slices.Contains(r.ExitCodes, *f.ExitCode)) ||
		(f.Kind != "" && slices.Contains(r.Errors, f.Kind))
}

// RetryPolicy is what a task instance carries of its task's retry policy besides retries and
// retry-interval (task_instance.retry_policy, as JSON). The nil policy waits retry-interval
// before each retry and retries every failure.
type RetryPolicy struct {
	Backoff   *RetryBackoff `json:"backoff,omitempty"`
	RetryOn   *RetryOn      `json:"retry-on,omitempty"`
	NoRetryOn *RetryOn      `json:"no-retry-on,omitempty"`
}

// RetryPolicy returns the task's retry policy, nil when it has none beyond retries and
// retry-interval.
func (t *Task) RetryPolicy() *RetryPolicy {
	if t.RetryBackoff == nil && t.RetryOn == nil && t.NoRetryOn == nil {
		return nil
	}
	return &RetryPolicy{Backoff: t.RetryBackoff, RetryOn: t.RetryOn, NoRetryOn: t.NoRetryOn}
}

// Refusal says why the policy does not retry f ("exit 3 is not in retry-on"), "" when it
// does. no-retry-on is asked first: a failure both name is not retried.
func (p *RetryPolicy) Refusal(f Failure) string {
	switch {
	case p == nil:
		return ""
	case p.NoRetryOn != nil && p.NoRetryOn.matches(f):
		return f.String() + " is in no-retry-on"
	case p.RetryOn != nil && !p.RetryOn.matches(f):
		return f.String() + " is not in retry-on"
	}
	return ""
}

// Wait is the wait before retry n (1 for the first) of a task whose retry-interval is
// interval: interval without a backoff; with one, Initial × Factor^(n−1), at most Max, less
// Jitter × rnd() of itself. rnd returns a number in [0, 1); nil draws none (no jitter).
func (p *RetryPolicy) Wait(interval time.Duration, n int, rnd func() float64) time.Duration {
	if p == nil || p.Backoff == nil {
		return interval
	}
	b := p.Backoff
	w := float64(b.Initial) * math.Pow(b.Factor, float64(max(n, 1)-1))
	if b.Max > 0 {
		w = min(w, float64(b.Max))
	}
	w = min(w, float64(maxRetryWait))
	if b.Jitter > 0 && rnd != nil {
		w *= 1 - b.Jitter*rnd()
	}
	return time.Duration(w)
}

// retryBackoffFields are the keys of the retry-backoff mapping.
var retryBackoffFields = []string{"initial", "factor", "max", "jitter"}

// retryOnFields are the keys of a retry-on or no-retry-on mapping.
var retryOnFields = []string{"exit-codes", "errors"}

// retryBackoffField is a task's retry-backoff mapping.
var retryBackoffField = field{
	name: "retry-backoff",
	decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
		t.RetryBackoff = d.retryBackoff(v, where)
	},
	isSet: func(t *Task) bool { return t.RetryBackoff != nil },
}

// retryOnField is a task's retry-on or no-retry-on mapping.
func retryOnField(name string, p func(*Task) **RetryOn) field {
	return field{
		name: name,
		decode: func(d *decoder, v *yaml.Node, t *Task, where string) {
			*p(t) = d.retryOn(v, name, where)
		},
		isSet: func(t *Task) bool { return *p(t) != nil },
	}
}

// retryBackoff reads a retry-backoff mapping; its keys' lines are kept as
// "retry-backoff.<key>" so validation problems point at the line at fault.
func (d *decoder) retryBackoff(v *yaml.Node, where string) *RetryBackoff {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	what := where + ": retry-backoff"
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must be a mapping, like {initial: 10s, factor: 2, max: 5m, jitter: 0.2}, not %s", what, kindName(v))
		return nil
	}
	b := &RetryBackoff{Factor: DefaultBackoffFactor}
	for _, kv := range d.mapping(v, what) {
		key := kv.key.Value
		d.taskField("retry-backoff."+key, kv.key.Line)
		switch key {
		case "initial":
			if dur, ok := d.durationValue(kv.value, what+": initial"); ok {
				b.Initial = Duration(dur)
			}
		case "max":
			if dur, ok := d.durationValue(kv.value, what+": max"); ok {
				b.Max = Duration(dur)
			}
		case "factor":
			if f, ok := d.number(kv.value, what+": factor"); ok {
				b.Factor = f
			}
		case "jitter":
			if f, ok := d.number(kv.value, what+": jitter"); ok {
				b.Jitter = f
			}
		default:
			d.errorf(kv.key.Line, "unknown field %s in %s%s", quote(key), what, didYouMean(key, retryBackoffFields))
		}
	}
	return b
}

// retryOn reads a retry-on or no-retry-on mapping (name says which).
func (d *decoder) retryOn(v *yaml.Node, name, where string) *RetryOn {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	what := where + ": " + name
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must be a mapping, like {exit-codes: [1, 75], errors: [timeout, rate-limit]}, not %s", what, kindName(v))
		return nil
	}
	r := &RetryOn{}
	for _, kv := range d.mapping(v, what) {
		key := kv.key.Value
		d.taskField(name+"."+key, kv.key.Line)
		switch key {
		case "exit-codes":
			r.ExitCodes = d.intList(kv.value, what+": exit-codes")
		case "errors":
			r.Errors = d.scalarList(kv.value, what+": errors", "error kinds")
		default:
			d.errorf(kv.key.Line, "unknown field %s in %s%s", quote(key), what, didYouMean(key, retryOnFields))
		}
	}
	return r
}

// number reads a number; ok is false for null and for a value that is not one (then recorded
// as an error).
func (d *decoder) number(v *yaml.Node, what string) (float64, bool) {
	v = d.resolve(v)
	s, ok := d.scalar(v, what, "a number")
	if !ok || v.Tag == "!!null" {
		return 0, false
	}
	var f float64
	if (v.Tag != "!!float" && v.Tag != "!!int") || v.Decode(&f) != nil {
		d.errorf(v.Line, "%s must be a number, not %s", what, quote(s))
		return 0, false
	}
	return f, true
}

// intList reads a list of integers.
func (d *decoder) intList(v *yaml.Node, what string) []int {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(v.Line, "%s must be a list of integers, like [1, 75], not %s", what, kindName(v))
		return nil
	}
	var list []int
	for _, item := range v.Content {
		if !d.visit(1) {
			return nil
		}
		if n, ok := d.intValue(item, what+" entries"); ok {
			list = append(list, n)
		}
	}
	return list
}

// retryProblems checks a task's retry policy: a backoff with an initial wait, a factor of at
// least 1, a max of at least initial, a jitter in 0..1, and not beside retry-interval; each
// retry-on and no-retry-on naming something, exit codes in 1..MaxExitCode and known error
// kinds.
func retryProblems(t *Task) []problem {
	var probs []problem
	add := func(field, format string, args ...any) {
		probs = append(probs, problem{field: field, msg: fmt.Sprintf(format, args...)})
	}
	if b := t.RetryBackoff; b != nil {
		if t.RetryInterval != 0 {
			add("retry-backoff", "retry-backoff and retry-interval are exclusive: retry-backoff's initial is the wait before the first retry")
		}
		if b.Initial <= 0 {
			add("retry-backoff.initial", "retry-backoff: initial is required, the wait before the first retry, more than 0")
		}
		if b.Factor < 1 || math.IsInf(b.Factor, 0) || math.IsNaN(b.Factor) {
			add("retry-backoff.factor", "retry-backoff: factor %s is out of range: at least 1", formatNumber(b.Factor))
		}
		if b.Max < 0 || (b.Max > 0 && b.Max < b.Initial) {
			add("retry-backoff.max", "retry-backoff: max %s is less than initial %s", b.Max, b.Initial)
		}
		if b.Jitter < 0 || b.Jitter > 1 || math.IsNaN(b.Jitter) {
			add("retry-backoff.jitter", "retry-backoff: jitter %s is out of range 0..1", formatNumber(b.Jitter))
		}
	}
	for _, r := range []struct {
		name string
		on   *RetryOn
	}{{"retry-on", t.RetryOn}, {"no-retry-on", t.NoRetryOn}} {
		if r.on == nil {
			continue
		}
		if len(r.on.ExitCodes) == 0 && len(r.on.Errors) == 0 {
			add(r.name, "%s names no exit codes and no errors: give exit-codes, errors or both", r.name)
		}
		for _, c := range r.on.ExitCodes {
			if c < 1 || c > MaxExitCode {
				add(r.name+".exit-codes", "%s: exit code %d is out of range 1..%d", r.name, c, MaxExitCode)
			}
		}
		for _, e := range r.on.Errors {
			if !slices.Contains(ErrorKinds(), e) {
				add(r.name+".errors", "%s: unknown error kind %s (known kinds: %s)%s", r.name, quote(e),
					strings.Join(ErrorKinds(), ", "), didYouMean(e, ErrorKinds()))
			}
		}
	}
	return probs
}

// formatNumber writes f as the file would.
func formatNumber(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
