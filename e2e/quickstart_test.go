package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testenv"
)

// TestQuickstart runs the README's first command, bin/quickstart.sh, as printed, on a fresh
// clone of the repository, then bin/quickstart.sh stop. It runs in a network namespace of its
// own, whose loopback is its alone, so its ZooKeeper, PostgreSQL and nodes take the ports the
// script names (2181, 5432, 5678–5680) beside the suite's; its data is under the clone's
// .run/, and the namespace is removed with whatever is left in it.
//
// It does not run in parallel: its build, JVM and database start take both cores for most of
// a minute, which the timing of the suite's parallel fault tests and benchmarks must not
// share; they wait until it has ended.
func TestQuickstart(t *testing.T) {
	block := testenv.DocBlock(t, "README.md", "zksched", "sh", 1)
	first, _, _ := strings.Cut(block, "\n")
	command := strings.TrimSpace(strings.SplitN(first, "#", 2)[0])
	if command != "bin/quickstart.sh" {
		t.Fatalf("the README's first command is %q; this test runs bin/quickstart.sh", command)
	}
	if os.Geteuid() != 0 {
		t.Fatal("TestQuickstart needs root for a network namespace (CI runs as root)")
	}
	dir := t.TempDir()
	// The quickstart's task user must reach the examples in the clone.
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	clone := filepath.Join(dir, "zksched")
	if out, err := exec.Command("git", "clone", "-q", repoRoot(), clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	// The clone holds what is committed; the files a test changes are the working tree's.
	if out, err := exec.Command("bash", "-c", fmt.Sprintf(
		`cd %q && git ls-files -m -o --exclude-standard -z | xargs -0 -r cp --parents -t %q`, repoRoot(), clone)).CombinedOutput(); err != nil {
		t.Fatalf("copy the working tree's changes: %v\n%s", err, out)
	}
	ns := fmt.Sprintf("zkqs-%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if pids, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
			for _, pid := range strings.Fields(string(pids)) {
				_ = exec.Command("kill", "-9", pid).Run()
			}
		}
		_ = exec.Command("ip", "netns", "del", ns).Run()
	})
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("loopback up: %v\n%s", err, out)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	gocache, _ := exec.Command("go", "env", "GOCACHE").Output()
	gomod, _ := exec.Command("go", "env", "GOMODCACHE").Output()
	// The user's environment, as a user would run it, but for the suite's own ZKSCHED_*
	// settings; HOME is the test's (the master writes its token under it), and Go's caches
	// stay where they were so that the build reuses them.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZKSCHED_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "GOCACHE="+strings.TrimSpace(string(gocache)), "GOMODCACHE="+strings.TrimSpace(string(gomod)))
	run := func(timeout time.Duration, script string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "bash", "-c", script)
		cmd.Dir, cmd.Env = clone, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(5*time.Minute, command)
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	for _, want := range []string{"== submitting examples/demo.yaml and waiting for it", "succeeded",
		"== the registry in ZooKeeper (zksched zk tree)", "web UI          http://127.0.0.1:5678/",
		"admin token     " + filepath.Join(home, ".local/state/zksched/api-token"), "stop it all     bin/quickstart.sh stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s printed no %q:\n%s", command, want, out)
		}
	}
	// What it prints is there to be used: the UI answers, the registry reads.
	if got, err := run(30*time.Second, `curl -fsS -o /dev/null -w '%{http_code}' http://127.0.0.1:5678/healthz && bin/zksched zk nodes`); err != nil ||
		!strings.HasPrefix(got, "200") || !strings.Contains(got, "worker") {
		t.Errorf("after the quickstart: %v\n%s", err, got)
	}
	if out, err := run(2*time.Minute, command+" stop"); err != nil {
		t.Fatalf("%s stop: %v\n%s", command, err, out)
	}
	// What stop stopped may take a moment to be reaped.
	var left string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		pids, _ := exec.Command("ip", "netns", "pids", ns).Output()
		if left = strings.TrimSpace(string(pids)); left == "" {
			break
		}
	}
	if left != "" {
		ps, _ := exec.Command("ps", "-o", "pid,stat,args", "-p", strings.Join(strings.Fields(left), ",")).CombinedOutput()
		t.Errorf("processes left after %s stop (pids %s):\n%s", command, left, ps)
	}
}
