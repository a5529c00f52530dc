package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/zksched/zksched/internal/testenv"
)

// TestDocsCommandTable: docs/cli.md's table of commands has a row for every command the
// binary has, and none for a command it lacks.
func TestDocsCommandTable(t *testing.T) {
	t.Parallel()
	section := testenv.DocSection(t, "docs/cli.md", "The commands")
	row := regexp.MustCompile("(?m)^\\| `([a-z]+)")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	// master and worker share a row.
	if strings.Contains(section, "| `master`, `worker` |") {
		documented = append(documented, "worker")
	}
	var have []string
	for _, c := range commands() {
		have = append(have, c.name)
		if !slices.Contains(documented, c.name) {
			t.Errorf("docs/cli.md's command table has no row for %s", c.name)
		}
	}
	for _, d := range documented {
		if !slices.Contains(have, d) {
			t.Errorf("docs/cli.md's command table has a row for %s, which zksched lacks", d)
		}
	}
}
