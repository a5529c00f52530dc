package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/zksched/zksched/internal/testenv"
)

// build runs bin/release.sh for amd64 into dir and returns SHA256SUMS as written there.
func build(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "release.sh"))
	cmd.Env = append(os.Environ(), "ZKSCHED_DIST="+dir, "ZKSCHED_RELEASE_ARCHES=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bin/release.sh: %v\n%s", err, out)
	}
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	return string(sums)
}

// TestReleaseIsReproducible builds the release twice, into two folders, and compares every
// file's sha256: the binary, the .deb and the SBOM. amd64 only, to keep it short: arm64 is
// the same build with another GOARCH.
func TestReleaseIsReproducible(t *testing.T) {
	t.Parallel()
	first, second := build(t, t.TempDir()), build(t, t.TempDir())
	if first != second {
		t.Fatalf("two builds of one commit differ:\n%s\n---\n%s", first, second)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(first), "\n") {
		names = append(names, line[strings.LastIndex(line, " ")+1:])
	}
	sort.Strings(names)
	if len(names) != 3 || !strings.HasSuffix(names[0], "_amd64.deb") || !strings.HasSuffix(names[1], "_linux_amd64") ||
		!strings.HasSuffix(names[2], "_linux_amd64.cdx.json") {
		t.Fatalf("SHA256SUMS lists %v, want the SBOM, the .deb and the binary", names)
	}
}
