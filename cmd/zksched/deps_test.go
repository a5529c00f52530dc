package main

import (
	"bytes"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLinksNoTestCode: the shipped binary links neither the testing package nor the
// repository's test support (internal/, but for the product's own internal packages: the
// faultinject hook that is a no-op without its build tag, the retry policy, the alarm timer
// of the master's and the worker's loops, the test signals that do nothing until a test Inits
// them, the patched ZooKeeper client and the build's identity (buildinfo); and the …test
// packages). Tools that need them are
// binaries of their own, such as cmd/zksched-bench.
func TestLinksNoTestCode(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/zksched/zksched/"
	for _, pkg := range strings.Fields(string(out)) {
		own, inModule := strings.CutPrefix(pkg, module)
		switch {
		case pkg == "testing", strings.HasPrefix(pkg, "testing/"), pkg == "internal/testenv":
		case inModule && strings.HasPrefix(own, "internal/") && own != "internal/faultinject" &&
			own != "internal/retry" && own != "internal/alarm" && own != "internal/signal" &&
			own != "internal/buildinfo" && !strings.HasPrefix(own, "internal/third_party/"):
		case inModule && strings.HasSuffix(path.Base(own), "test"):
		default:
			continue
		}
		t.Errorf("zksched links %s: test code has no place in the product", pkg)
	}
}

// TestBenchPointsAtItsBinary: the benchmarks left zksched; their old command line says where
// they went.
func TestBenchPointsAtItsBinary(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := run([]string{"bench", "burn-down"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "zksched-bench MODE") {
		t.Errorf("zksched bench burn-down: exit %d, stderr %q; want exit %d naming zksched-bench", code, errOut.String(), exitUsage)
	}
}

// repoRoot is the repository's top folder.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
