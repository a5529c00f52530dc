package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestMistakesAreUsageErrors: a wrong mode or a second one is told apart wherever the flags
// are, with the usage, before anything runs.
func TestMistakesAreUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "5", "--json", "nope"}, `unknown mode "nope"`},
		{[]string{"-n", "5", "burn-down", "latency"}, "unexpected arguments [latency]"},
		{[]string{}, "usage: zksched-bench"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut.String(), exitUsage, tc.want)
		}
	}
}
