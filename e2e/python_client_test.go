package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zksched/zksched/internal/testenv"
)

// pythonVenv makes a virtual environment in home and installs clients/python into it with
// block, docs/clients.md's install commands, as they are printed, from the repository's root, with no
// package index (PIP_NO_INDEX), as on a machine without PyPI; it returns the environment's
// python. python3 missing fails the test: the client is part of what the suite checks.
func pythonVenv(t *testing.T, home, block string) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3: %v (the Python client's tests need it)", err)
	}
	cmd := exec.Command("bash", "-euxo", "pipefail", "-c", block)
	cmd.Env = append(os.Environ(), "HOME="+home, "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=1")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the install commands: %v\n%s\n%s", err, block, out)
	}
	return filepath.Join(home, "zksched-venv", "bin", "python")
}

// TestPythonClientInstallsOffline: clients/python installs into a fresh virtual environment
// with no package index, as a wheel with its py.typed marker, and imports as zksched.
func TestPythonClientInstallsOffline(t *testing.T) {
	t.Parallel()
	python := pythonVenv(t, t.TempDir(), testenv.DocBlock(t, "docs/clients.md", "Install", "sh", 1))
	cmd := exec.Command(python, "-c", `import importlib.resources as r, zksched, sys
assert "site-packages" in zksched.__file__, zksched.__file__
assert (r.files("zksched") / "py.typed").is_file()
print(zksched.__version__, zksched.Client.__name__)`)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "0.1.0 Client" {
		t.Fatalf("import zksched from the environment: %v\n%s", err, out)
	}
}

// TestPythonClient installs the Python client as docs/clients.md says, runs the page's example
// as it is printed against a real master and worker (the master's URL for the quickstart's,
// the token found as the CLI finds it) and the client README's, then the client's own tests
// (clients/python/tests) with the installed package, given the master's URL and its token.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	master := e.Master("master")
	e.Worker("worker")
	waitReady(t, master.Port)
	home := quickstartHome(t, e)
	python := pythonVenv(t, home, testenv.DocBlock(t, "docs/clients.md", "Install", "sh", 1))
	url := fmt.Sprintf("http://127.0.0.1:%d", master.Port)

	out := runPythonExample(t, python, home, url, testenv.DocBlock(t, "docs/clients.md", "An example", "python", 1))
	for _, want := range []string{"task approve waiting", "task approve succeeded", "succeeded hello python"} {
		if !strings.Contains(out, want) {
			t.Errorf("docs/clients.md's example's output lacks %q:\n%s", want, out)
		}
	}
	out = runPythonExample(t, python, home, url, testenv.DocBlock(t, "clients/python/README.md", "zksched for Python", "python", 1))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "workflow ") || !strings.HasSuffix(last, " succeeded") ||
		!strings.Contains(out, "task commentary succeeded") {
		t.Errorf("the client's README's example did not print the demo's tasks and its success:\n%s", out)
	}

	cmd := exec.Command(python, "-m", "unittest", "discover", "-v", "-s", filepath.Join(repoRoot(), "clients", "python", "tests"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "ZKSCHED_TEST_SERVER="+url, "ZKSCHED_TEST_TOKEN="+e.Token(), "PYTHONDONTWRITEBYTECODE=1")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Python client's tests: %v\n%s", err, b)
	}
	t.Logf("the Python client's tests:\n%s", b)
}

// runPythonExample runs a documentation's Python block as it is printed, with url for the
// quickstart's http://127.0.0.1:5678, from the repository's root, in home (whose state folder
// holds the master's token), and returns its output.
func runPythonExample(t *testing.T, python, home, url, block string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "example.py")
	if err := os.WriteFile(script, []byte(strings.ReplaceAll(block, "http://127.0.0.1:5678", url)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, script)
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "HOME="+home, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the example: %v\n%s\n%s", err, block, out)
	}
	return string(out)
}
