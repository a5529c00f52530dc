package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/registry"
)

// topology is a test's own three simulated hosts, started by bin/cluster.sh with a name and
// a network of the test's, and taken down when it ends.
type topology struct {
	name, net string
	runDir    string   // ZKSCHED_RUN_DIR: the hosts' processes carry it in their command lines
	env       []string // the cluster.sh variables: its name, network, state folder, binary
	zk        []string // ZKSCHED_* from `cluster.sh env`
}

// topologyNet is the test topology's network: not the one a developer's `bin/cluster.sh up`
// uses, so both can run on one machine.
const topologyNet = "10.79.0"

// startTopology brings the three hosts up with bin/cluster.sh up. It needs root (network
// namespaces): outside CI a test without root is skipped, in CI it fails.
func startTopology(t *testing.T) *topology {
	t.Helper()
	tp := newTopology(t, "zkt", topologyNet)
	tp.up(t)
	return tp
}

// newTopology readies a topology named name on the network net (a /24 prefix) and takes it
// down when the test ends; up starts it.
func newTopology(t *testing.T, name, net string) *topology {
	t.Helper()
	requireRoot(t)
	run := topologyRunDir(t)
	tp := &topology{name: name, net: net, runDir: run, env: []string{"ZKSCHED_CLUSTER_NAME=" + name, "ZKSCHED_CLUSTER_NET=" + net,
		"ZKSCHED_RUN_DIR=" + run, "ZKSCHED_BIN=" + testcluster.Binary(t)}}
	tp.env = append(tp.env, testcluster.SupervisorEnv(t)...)
	t.Cleanup(func() {
		counts, odd := tp.nodeExits(t)
		if len(counts) > 0 {
			t.Logf("the nodes' exits, by exit status: %v", counts)
		}
		for _, o := range odd {
			t.Errorf("a node exited neither killed (137) nor fenced (75):\n%s", o)
		}
		if t.Failed() {
			tp.showLogs(t)
			tp.showStacks(t)
		}
		tp.down(t)
	})
	return tp
}

// supervisorLine is what a node's supervisor (bin/cluster.sh) logs when the node exits.
var supervisorLine = regexp.MustCompile(`^cluster: (master|worker) exited with (\d+);`)

// nodeExits reads the supervisors' lines in each host's master and worker logs: the exits by
// status, and for each exit that is neither a kill -9 (137) nor a fenced node's (75) the
// lines that led to it. Under its supervisor a node that crashed would come back unseen.
func (tp *topology) nodeExits(t *testing.T) (counts map[string]int, odd []string) {
	t.Helper()
	counts = map[string]int{}
	for h := 1; h <= 3; h++ {
		for _, what := range []string{"master", "worker"} {
			data, err := os.ReadFile(filepath.Join(tp.runDir, "cluster", fmt.Sprintf("h%d", h), what+".log"))
			if err != nil {
				continue
			}
			var last []string
			for line := range strings.Lines(string(data)) {
				if m := supervisorLine.FindStringSubmatch(line); m != nil {
					counts[m[2]]++
					if m[2] != "137" && m[2] != "75" {
						odd = append(odd, fmt.Sprintf("host %d's %s: %s", h, what, strings.Join(append(last, line), "")))
					}
				}
				last = append(last, line)[max(0, len(last)+1-4):]
			}
		}
	}
	return counts, odd
}

// showLogs logs, for a failed test, the lines of each host's master and worker logs that
// tell why a node stopped or struggled (warnings, errors, the supervisor's restarts), the
// last 25 of each: the hosts' state folder is gone once the test ends.
func (tp *topology) showLogs(t *testing.T) {
	t.Helper()
	for h := 1; h <= 3; h++ {
		for _, what := range []string{"master", "worker"} {
			path := filepath.Join(tp.runDir, "cluster", fmt.Sprintf("h%d", h), what+".log")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Logf("host %d's %s log: %v", h, what, err)
				continue
			}
			var lines []string
			for line := range strings.Lines(string(data)) {
				if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) ||
					strings.Contains(line, `"level":"fatal"`) || strings.HasPrefix(line, "cluster: ") {
					lines = append(lines, line)
				}
			}
			lines = lines[max(0, len(lines)-25):]
			t.Logf("host %d's %s log (%s), its last %d warnings, errors and restarts:\n%s", h, what, path, len(lines), strings.Join(lines, ""))
		}
	}
}

// showStacks, for a failed test, makes each master and worker of the hosts print its
// goroutines (SIGQUIT, which ends it) and logs where in zksched they were, grouped: a node
// that stopped making progress without an error shows what it waits on. The logs, dumps
// included, are copied to a folder that outlives the test, which it names.
func (tp *topology) showStacks(t *testing.T) {
	t.Helper()
	logs := map[string]int64{} // node log → its size before the dump
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) < 2 || !strings.Contains(string(b), tp.runDir) || (args[1] != "master" && args[1] != "worker") {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(f, "/")[2])
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil {
			continue
		}
		log := filepath.Join(cwd, args[1]+".log")
		if fi, err := os.Stat(log); err == nil {
			logs[log] = fi.Size()
			_ = syscall.Kill(pid, syscall.SIGQUIT)
		}
	}
	time.Sleep(2 * time.Second) // the dumps being written: no event to wait on
	frame := regexp.MustCompile(`^github\.com/zksched/zksched/(\S+)\(`)
	for log, from := range logs {
		data, err := os.ReadFile(log)
		if err != nil || int64(len(data)) < from {
			continue
		}
		counts := map[string]int{}
		var state string
		found := false
		for line := range strings.Lines(string(data[from:])) {
			switch {
			case strings.HasPrefix(line, "goroutine "):
				state, found = strings.TrimSuffix(strings.TrimSpace(line[strings.IndexByte(line, '['):]), ":"), false
			case !found && frame.MatchString(line):
				counts[frame.FindStringSubmatch(line)[1]+" "+state]++
				found = true
			}
		}
		var lines []string
		for k, n := range counts {
			lines = append(lines, fmt.Sprintf("%4d  %s", n, k))
		}
		slices.Sort(lines)
		t.Logf("%s: its goroutines at the end, by innermost zksched function and state:\n%s", log, strings.Join(lines, "\n"))
	}
	kept, err := os.MkdirTemp("", "zksched-failed-"+tp.name+"-")
	if err == nil {
		err = exec.Command("cp", "-a", filepath.Join(tp.runDir, "cluster"), kept).Run()
	}
	t.Logf("the hosts' logs are kept in %s (%v)", kept, err)
}

// requireRoot skips a topology test without root outside CI, and fails it in CI.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root and must run the topology tests")
		}
		t.Skip("the topology needs root (network namespaces)")
	}
}

// up runs bin/cluster.sh up and reads the variables of `cluster.sh env`.
func (tp *topology) up(t *testing.T) {
	t.Helper()
	start := time.Now()
	tp.run(t, 10*time.Minute, "up")
	t.Logf("bin/cluster.sh up: %v", time.Since(start).Round(100*time.Millisecond))
	for line := range strings.Lines(tp.run(t, time.Minute, "env")) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok {
			tp.zk = append(tp.zk, k+"="+strings.Trim(v, "'"))
		}
	}
}

// envValue is a variable of `cluster.sh env`.
func (tp *topology) envValue(key string) string { return envValue(tp.zk, key) }

// run runs bin/cluster.sh with args and returns its standard output; it fails the test when
// the script fails.
func (tp *topology) run(t *testing.T, d time.Duration, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(), "bin", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), tp.env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	timer := time.AfterFunc(d, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bin/cluster.sh %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// runErr runs bin/cluster.sh with args and returns its output and error, for a command that
// may fail.
func (tp *topology) runErr(d time.Duration, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot(), "bin", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), tp.env...)
	timer := time.AfterFunc(d, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// zksched runs the binary against the topology, as a user would after `cluster.sh env`.
func (tp *topology) zksched(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testcluster.Binary(t), args...)
	cmd.Env = append(os.Environ(), tp.zk...)
	cmd.Dir = repoRoot()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// down takes the topology down and checks that nothing is left.
func (tp *topology) down(t *testing.T) {
	t.Helper()
	tp.run(t, 2*time.Minute, "down")
	nothingLeft(t, tp.name, tp.runDir)
}

// topologyRunDir is a state folder for a topology that the postgres user can enter, so that
// cluster.sh keeps the state there (not in /var/tmp) and every process of the hosts names it
// in its command line (its config files are in it). Removed when the test ends.
func topologyRunDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "zksched-topology-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// nothingLeft checks that no namespace or link of the topology named name is left, nor any
// process whose command line names its state folder runDir.
func nothingLeft(t *testing.T, name, runDir string) {
	t.Helper()
	netns, _ := exec.Command("ip", "netns", "list").Output()
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, want := range []struct{ what, out string }{{"namespace", string(netns)}, {"link", string(links)}} {
		if strings.Contains(want.out, name+"-h") || strings.Contains(want.out, name+"br0") {
			t.Errorf("a %s of the topology is left after down:\n%s", want.what, want.out)
		}
	}
	procs, _ := exec.Command("pgrep", "-af", regexp.QuoteMeta(runDir)+"/").Output()
	if len(procs) > 0 {
		t.Errorf("processes of the topology are left after down:\n%s", procs)
	}
}

// TestTopology: bin/cluster.sh up starts three hosts, each with a ZooKeeper server, a
// PostgreSQL node under Patroni, HAProxy, a master and a worker; the demo runs on them
// through the variables `cluster.sh env` prints, the cluster view shows the ensemble and the
// PostgreSQL primary with its synchronous standby, and down leaves nothing behind.
func TestTopology(t *testing.T) {
	tp := startTopology(t)
	out, code := tp.zksched(t, "submit", "--wait", "examples/demo.yaml")
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("the demo on the topology: exit %d\n%s", code, out)
	}
	var cl struct {
		Masters   []json.RawMessage `json:"masters"`
		Workers   []json.RawMessage `json:"workers"`
		ZooKeeper []registry.Member `json:"zookeeper"`
		Postgres  []registry.Member `json:"postgres"`
	}
	out, code = tp.zksched(t, "zk", "nodes", "--json")
	if code != 0 {
		t.Fatalf("zk nodes: exit %d\n%s", code, out)
	}
	if err := json.Unmarshal([]byte(out), &cl); err != nil {
		t.Fatalf("zk nodes --json: %v\n%s", err, out)
	}
	modes, roles := map[string]int{}, map[string]int{}
	for _, m := range cl.ZooKeeper {
		modes[m.Mode]++
	}
	for _, m := range cl.Postgres {
		roles[m.Role+" "+m.Note]++
	}
	if len(cl.Masters) != 3 || len(cl.Workers) != 3 {
		t.Errorf("%d masters and %d workers registered, want 3 and 3", len(cl.Masters), len(cl.Workers))
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Errorf("zookeeper modes %v, want a leader and two followers", modes)
	}
	if roles["primary "] != 1 || roles["standby synchronous"] != 1 || len(cl.Postgres) != 3 {
		t.Errorf("postgres roles %v, want a primary, a synchronous standby and another standby", roles)
	}
	for _, m := range append(cl.ZooKeeper, cl.Postgres...) {
		if !strings.HasPrefix(m.Address, topologyNet+".") {
			t.Errorf("%s is not on the topology's network %s.0/24", m.Address, topologyNet)
		}
	}
}

// TestDocsSeveralHosts runs the docs' tour of bin/cluster.sh as it is printed, in bash,
// on a network and with names of its own, and the test binary for bin/zksched.
func TestDocsSeveralHosts(t *testing.T) {
	requireRoot(t)
	block := testenv.DocBlock(t, "docs/multi-host.md", "Running on several hosts", "sh", 1)
	const name, net = "zkr", "10.80.0"
	runDir := topologyRunDir(t)
	bin := testcluster.Binary(t)
	script := strings.ReplaceAll(block, "bin/zksched ", bin+" ")
	cmd := exec.Command("bash", "-euxo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "ZKSCHED_CLUSTER_NAME="+name, "ZKSCHED_CLUSTER_NET="+net,
		"ZKSCHED_RUN_DIR="+runDir, "ZKSCHED_BIN="+bin)
	cmd.Dir = repoRoot()
	t.Cleanup(func() {
		down := exec.Command(filepath.Join(repoRoot(), "bin", "cluster.sh"), "down")
		down.Env = cmd.Env
		if out, err := down.CombinedOutput(); err != nil {
			t.Errorf("bin/cluster.sh down: %v\n%s", err, out)
		}
	})
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the docs' tour: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	// submit --wait prints the instance's id on stdout and its progress on stderr.
	out := stdout.String() + stderr.String()
	for _, want := range []string{"workflow instance 1 succeeded", "masters (3)", "workers (3)", "zookeeper (3)",
		"  leader", "postgres (3)", "  primary", "standby (synchronous)", "host 3 (" + net + ".3"} {
		if !strings.Contains(out, want) {
			t.Errorf("the tour's output lacks %q:\n%s", want, out)
		}
	}
	nothingLeft(t, name, runDir)
}
