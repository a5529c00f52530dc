package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/zksched/zksched/internal/soak"
	"github.com/zksched/zksched/internal/testenv"
)

// TestDocsBenchCommands checks every zksched-bench line of docs/performance.md's and
// docs/testing.md's command blocks as printed, without running it (they run for up to 30
// minutes): its mode is one of zksched-bench's, its flags and their values parse and nothing else
// is left (with one argument added, it stops at that argument alone before it starts anything),
// and the soak's --faults name fault kinds. The modes run scaled down in internal/bench and e2e/bench_*_test.go.
func TestDocsBenchCommands(t *testing.T) {
	t.Parallel()
	blocks := map[string]string{
		"docs/performance.md": testenv.DocBlock(t, "docs/performance.md", "Running the benchmarks", "sh", 1),
		"docs/testing.md":     testenv.DocBlock(t, "docs/testing.md", "The fault soak", "sh", 1),
	}
	lines := 0
	for file, block := range blocks {
		for line := range strings.Lines(block) {
			command, _, _ := strings.Cut(line, "#")
			args, ok := strings.CutPrefix(strings.TrimSpace(command), "bin/zksched-bench ")
			if !ok {
				continue
			}
			lines++
			fields := strings.Fields(args)
			if !slices.Contains(benchModes, fields[0]) {
				t.Errorf("%s: %q: the mode %q is not one of %v", file, line, fields[0], benchModes)
			}
			// One argument too many stops the run after the flags are parsed and before
			// anything starts, and it must be the only one: a bracket would be another.
			var out, errOut bytes.Buffer
			code := run(append(fields, "docs-check"), &out, &errOut)
			if want := "unexpected arguments [docs-check]\n"; code != exitUsage || !strings.Contains(errOut.String(), want) {
				t.Errorf("%s: %q: exit %d, %s; want only its flags parsed", file, line, code, errOut.String())
			}
			for i, f := range fields {
				if f != "--faults" || i+1 == len(fields) {
					continue
				}
				for _, kind := range strings.Split(fields[i+1], ",") {
					if !slices.Contains(soak.FaultKinds(), kind) {
						t.Errorf("%s: %q: --faults names %q, not one of %v", file, line, kind, soak.FaultKinds())
					}
				}
			}
		}
	}
	if lines < 12 {
		t.Errorf("found %d zksched-bench lines in the docs, want the 12 or more they print", lines)
	}
}
