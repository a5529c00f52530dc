package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubmitRefusesParams: a --param the file does not declare, or not of its type, or a
// required param left out, is a usage error (exit 2) that names the problem, told before any
// configuration or database is read: the --config here does not exist.
func TestSubmitRefusesParams(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "nightly.yaml")
	if err := os.WriteFile(file, []byte("name: nightly\nparams:\n  region: eu\n  size: {type: integer, required: true}\n"+
		"tasks:\n  - {name: a, type: noop}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noConfig := filepath.Join(t.TempDir(), "none.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--param", "regoin=us", "--param", "size=1"},
			`params: "regoin" is not a param of workflow nightly (did you mean "region"?): it declares region, size`},
		{[]string{"--param", "size=ten"}, `params: size must be an integer (decimal, 64 bits), not "ten"`},
		{[]string{"--param", "region=us"}, "params: size is required: the workflow gives it no default"},
		{[]string{"--param", "my-day=x"}, `params: name "my-day" is invalid`},
	} {
		var out, errOut strings.Builder
		args := append([]string{"submit", file, "--config", noConfig}, tc.args...)
		if code := run(args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "--param rejected, nothing stored:\n") ||
			!strings.Contains(errOut.String(), tc.want) {
			t.Errorf("zksched %s: exit %d, stderr %q; want exit %d saying %q", strings.Join(args, " "), code, errOut.String(), exitUsage, tc.want)
		}
	}
}
