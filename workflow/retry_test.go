package workflow

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseRetryPolicy(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(wf(
		"  - name: a",
		"    type: shell",
		"    command: ./a.sh",
		"    retries: 5",
		"    retry-backoff: {initial: 10s, factor: 1.5, max: 5m, jitter: 0.2}",
		"    retry-on: {exit-codes: [1, 75], errors: [timeout, rate-limit]}",
		"    no-retry-on:",
		"      errors: [killed]",
		"  - {name: b, type: noop, retry-backoff: {initial: 1s}}",
	)))
	if err != nil {
		t.Fatal(err)
	}
	a, b := s.Tasks[0], s.Tasks[1]
	want := &RetryPolicy{
		Backoff:   &RetryBackoff{Initial: Duration(10 * time.Second), Factor: 1.5, Max: Duration(5 * time.Minute), Jitter: 0.2},
		RetryOn:   &RetryOn{ExitCodes: []int{1, 75}, Errors: []string{ErrorTimeout, ErrorRateLimit}},
		NoRetryOn: &RetryOn{Errors: []string{ErrorKilled}},
	}
	if got := a.RetryPolicy(); !reflect.DeepEqual(got, want) {
		t.Errorf("a's policy = %+v; want %+v", got, want)
	}
	if got, want := *b.RetryBackoff, (RetryBackoff{Initial: Duration(time.Second), Factor: DefaultBackoffFactor}); got != want {
		t.Errorf("b's backoff = %+v; want the default factor: %+v", got, want)
	}
	if p := (&Task{Retries: 3, RetryInterval: Duration(time.Second)}).RetryPolicy(); p != nil {
		t.Errorf("a task with retries and retry-interval alone has policy %+v; want nil", p)
	}
	// The spec is stored as JSON and read back with a plain json.Unmarshal.
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, s) {
		t.Errorf("JSON round trip changed the spec:\n%s", data)
	}
	if err := back.Validate(); err != nil {
		t.Errorf("the spec read back does not validate: %v", err)
	}
}

func TestParseRetryPolicyRefusals(t *testing.T) {
	t.Parallel()
	task := func(lines ...string) string {
		return wf(append([]string{"  - name: a", "    type: noop"}, lines...)...)
	}
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"factor below 1", task("    retry-backoff:", "      initial: 1s", "      factor: 0.5"), []string{
			`line 7: task "a": retry-backoff: factor 0.5 is out of range: at least 1`}},
		{"factor 0", task("    retry-backoff: {initial: 1s, factor: 0}"), []string{
			`line 5: task "a": retry-backoff: factor 0 is out of range: at least 1`}},
		{"max below initial", task("    retry-backoff:", "      initial: 1m", "      max: 30s"), []string{
			`line 7: task "a": retry-backoff: max 30s is less than initial 1m0s`}},
		{"jitter above 1", task("    retry-backoff:", "      initial: 1s", "      jitter: 1.5"), []string{
			`line 7: task "a": retry-backoff: jitter 1.5 is out of range 0..1`}},
		{"negative jitter", task("    retry-backoff: {initial: 1s, jitter: -0.1}"), []string{
			`line 5: task "a": retry-backoff: jitter -0.1 is out of range 0..1`}},
		{"no initial", task("    retry-backoff:", "      factor: 3"), []string{
			`line 5: task "a": retry-backoff: initial is required, the wait before the first retry, more than 0`}},
		{"beside retry-interval", task("    retry-interval: 10s", "    retry-backoff: {initial: 1s}"), []string{
			`line 6: task "a": retry-backoff and retry-interval are exclusive: retry-backoff's initial is the wait before the first retry`}},
		{"unknown backoff field", task("    retry-backoff: {initial: 1s, facter: 2}"), []string{
			`line 5: unknown field "facter" in task "a": retry-backoff (did you mean "factor"?)`}},
		{"factor not a number", task("    retry-backoff: {initial: 1s, factor: double}"), []string{
			`line 5: task "a": retry-backoff: factor must be a number, not "double"`}},
		{"backoff a duration", task("    retry-backoff: 10s"), []string{
			`line 5: task "a": retry-backoff must be a mapping, like {initial: 10s, factor: 2, max: 5m, jitter: 0.2}, not "10s"`}},
		{"retry-on a list", task("    retry-on: [timeout]"), []string{
			`line 5: task "a": retry-on must be a mapping, like {exit-codes: [1, 75], errors: [timeout, rate-limit]}, not a list`}},
		{"empty retry-on", task("    retry-on: {}"), []string{
			`line 5: task "a": retry-on names no exit codes and no errors: give exit-codes, errors or both`}},
		{"exit code 0", task("    retry-on:", "      exit-codes: [1, 0]"), []string{
			`line 6: task "a": retry-on: exit code 0 is out of range 1..255`}},
		{"exit code 256", task("    no-retry-on:", "      exit-codes: [256]"), []string{
			`line 6: task "a": no-retry-on: exit code 256 is out of range 1..255`}},
		{"exit code a string", task("    retry-on: {exit-codes: [one]}"), []string{
			`line 5: task "a": retry-on: exit-codes entries must be an integer, not "one"`}},
		{"unknown error kind", task("    no-retry-on:", "      errors: [rate-limited]"), []string{
			`line 6: task "a": no-retry-on: unknown error kind "rate-limited" (known kinds: timeout, killed, model-error, rate-limit) (did you mean "rate-limit"?)`}},
		{"unknown retry-on field", task("    retry-on: {exit: [1]}"), []string{
			`line 5: unknown field "exit" in task "a": retry-on`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.yaml))
			if got := problems(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("Parse errors:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

func TestRetryPolicyWait(t *testing.T) {
	t.Parallel()
	backoff := func(b RetryBackoff) *RetryPolicy { return &RetryPolicy{Backoff: &b} }
	half := func() float64 { return 0.5 }
	tests := []struct {
		name   string
		policy *RetryPolicy
		rnd    func() float64
		want   []time.Duration // the waits before retries 1, 2, ...
	}{
		{"no policy: the fixed interval", nil, half, []time.Duration{30 * time.Second, 30 * time.Second, 30 * time.Second}},
		{"no backoff: the fixed interval", &RetryPolicy{RetryOn: &RetryOn{Errors: []string{ErrorTimeout}}}, half,
			[]time.Duration{30 * time.Second, 30 * time.Second}},
		{"doubling", backoff(RetryBackoff{Initial: Duration(time.Second), Factor: 2}), nil,
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}},
		{"factor 1 is fixed", backoff(RetryBackoff{Initial: Duration(5 * time.Second), Factor: 1}), nil,
			[]time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second}},
		{"capped at max", backoff(RetryBackoff{Initial: Duration(10 * time.Second), Factor: 3, Max: Duration(time.Minute)}), nil,
			[]time.Duration{10 * time.Second, 30 * time.Second, time.Minute, time.Minute}},
		{"jitter takes its share of the wait", backoff(RetryBackoff{Initial: Duration(10 * time.Second), Factor: 2, Max: Duration(30 * time.Second), Jitter: 0.2}), half,
			[]time.Duration{9 * time.Second, 18 * time.Second, 27 * time.Second}},
		{"jitter without a source", backoff(RetryBackoff{Initial: Duration(10 * time.Second), Factor: 2, Jitter: 1}), nil,
			[]time.Duration{10 * time.Second, 20 * time.Second}},
		{"full jitter at its extremes", backoff(RetryBackoff{Initial: Duration(10 * time.Second), Factor: 2, Jitter: 1}), func() float64 { return 0 },
			[]time.Duration{10 * time.Second, 20 * time.Second}},
	}
	for _, tt := range tests {
		for i, want := range tt.want {
			if got := tt.policy.Wait(30*time.Second, i+1, tt.rnd); got != want {
				t.Errorf("%s: Wait before retry %d = %s; want %s", tt.name, i+1, got, want)
			}
		}
	}
	// Without max, the wait stops growing before it overflows.
	p := backoff(RetryBackoff{Initial: Duration(time.Hour), Factor: 10})
	if got := p.Wait(0, MaxRetries, nil); got <= 0 || got < p.Wait(0, 10, nil) {
		t.Errorf("Wait before retry %d = %s; want a long positive wait", MaxRetries, got)
	}
}

func TestRetryPolicyRefusal(t *testing.T) {
	t.Parallel()
	exit := func(c int) *int { return &c }
	on := &RetryPolicy{RetryOn: &RetryOn{ExitCodes: []int{1, 75}, Errors: []string{ErrorTimeout, ErrorRateLimit}}}
	notOn := &RetryPolicy{NoRetryOn: &RetryOn{ExitCodes: []int{2}, Errors: []string{ErrorModelError, ErrorKilled}}}
	both := &RetryPolicy{RetryOn: &RetryOn{Errors: []string{ErrorModelError}}, NoRetryOn: &RetryOn{Errors: []string{ErrorModelError}}}
	tests := []struct {
		policy *RetryPolicy
		f      Failure
		want   string
	}{
		{nil, Failure{ExitCode: exit(3)}, ""},
		{on, Failure{ExitCode: exit(1)}, ""},
		{on, Failure{ExitCode: exit(75)}, ""},
		{on, Failure{ExitCode: exit(3)}, "exit 3 is not in retry-on"},
		{on, Failure{Kind: ErrorTimeout}, ""},
		{on, Failure{Kind: ErrorRateLimit}, ""},
		{on, Failure{Kind: ErrorModelError}, "model-error is not in retry-on"},
		{on, Failure{ExitCode: exit(137), Kind: ErrorKilled}, "exit 137 (killed) is not in retry-on"},
		{on, Failure{}, "a failure with no exit code and no error kind is not in retry-on"},
		{notOn, Failure{ExitCode: exit(1)}, ""},
		{notOn, Failure{ExitCode: exit(2)}, "exit 2 is in no-retry-on"},
		{notOn, Failure{ExitCode: exit(137), Kind: ErrorKilled}, "exit 137 (killed) is in no-retry-on"},
		{notOn, Failure{Kind: ErrorModelError}, "model-error is in no-retry-on"},
		{notOn, Failure{Kind: ErrorTimeout}, ""},
		{notOn, Failure{}, ""},
		{both, Failure{Kind: ErrorModelError}, "model-error is in no-retry-on"},
	}
	for _, tt := range tests {
		if got := tt.policy.Refusal(tt.f); got != tt.want {
			t.Errorf("%+v: Refusal(%s) = %q; want %q", tt.policy, tt.f, got, tt.want)
		}
	}
}
