package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
)

// TestDocsHTTPAPI runs docs/http-api.md's curl commands as they are printed, in bash, with
// the master's URL for http://127.0.0.1:5678, against a master that, as the quickstart's,
// has no token and generates one into ~/.local/state/zksched: a definition stored, an
// instance of it run, its failed task found and rerun, the instance stopped.
func TestDocsHTTPAPI(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/http-api.md", "The HTTP API", "sh", 1)
	e := setupE2E(t, nil, "")
	master := e.Master("master")
	e.Worker("worker")
	waitReady(t, master.Port)
	script := strings.ReplaceAll(block, "http://127.0.0.1:5678", fmt.Sprintf("http://127.0.0.1:%d", master.Port))
	out, _ := e.docScript(t, script, "HOME="+quickstartHome(t, e))
	for _, want := range []string{`"name": "cli-tour"`, `"name": "count"`, `"state": "failed"`, `"requeued": [`, `"state": "stopped"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the curl commands' output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"error"`) {
		t.Errorf("a curl command got an error:\n%s", out)
	}
}

// quickstartHome returns a home folder whose ~/.local/state/zksched is e's state folder,
// where its masters without a token generate theirs (api-token), as the quickstart's do in
// the home of the user who runs it.
func quickstartHome(t *testing.T, e *e2e) string {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".local", "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.StateDir(), filepath.Join(home, ".local", "state", "zksched")); err != nil {
		t.Fatal(err)
	}
	return home
}

// TestDocsReadingTheCluster runs docs/cli.md's zkCli.sh commands as they are printed, in bash,
// with the test's ZooKeeper for 127.0.0.1:2181 and its registry root for /zksched, against a
// master and a worker.
func TestDocsReadingTheCluster(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/cli.md", "Reading the cluster", "sh", 1)
	e := setupE2E(t, nil, "")
	e.Master("master").WaitLog(t, 30*time.Second, `"message":"registered"`)
	worker := e.Worker("worker")
	id := worker.ID(t, 30*time.Second)
	worker.WaitLog(t, 30*time.Second, `"message":"registered"`)
	root := envValue(e.Env, "ZKSCHED_REGISTRY_ROOT")
	script := strings.NewReplacer("127.0.0.1:2181", strings.Join(testenv.ZKServers(), ","), " /zksched", " "+root).Replace(block)
	out, stderr := e.docScript(t, script)
	for _, want := range []string{root + "/nodes/workers/" + id + "\n", `"role":"worker"`, "ephemeralOwner = 0x",
		root + "/failover-finish-nodes/worker\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the zkCli.sh commands' output lacks %q:\n%s\nstderr:\n%s", want, out, stderr)
		}
	}
}

// waitReady waits up to 60 s for the node serving on port to answer /readyz with 200: it is
// registered and takes work.
func waitReady(t *testing.T, port int) {
	t.Helper()
	waitUntil(t, 60*time.Second, fmt.Sprintf("the node on port %d to be ready", port), func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// TestDocsRunningNodes runs docs/operations.md's start commands as they are printed, each
// in a mount namespace of its own where /etc is an overlay holding /etc/zksched/zksched.yaml
// (etcOverlay: the machine's /etc is not written): the master and the worker start from that
// file, register, and exit 0 on SIGTERM.
func TestDocsRunningNodes(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/operations.md", "Running nodes", "sh", 1)
	lines := strings.Split(strings.TrimSpace(block), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "bin/start-master.sh ") || !strings.HasPrefix(lines[1], "bin/start-worker.sh ") {
		t.Fatalf("the docs' commands are %q: want bin/start-master.sh and bin/start-worker.sh, which this test runs", lines)
	}
	e := setupE2E(t, nil, "")
	masterPort, workerPort := testcluster.FreePort(t), testcluster.FreePort(t)
	config := e.file(t, "zksched.yaml", fmt.Sprintf(`registry:
  servers: %s
  root: %s
  session-timeout: 2s
db:
  dsn: %q
node:
  host: 127.0.0.1
  state-dir: %s
master:
  port: %d
worker:
  port: %d
  allow-root-tasks: true
`, must(json.Marshal(testenv.ZKServers())), envValue(e.Env, "ZKSCHED_REGISTRY_ROOT"), envValue(e.Env, "ZKSCHED_DB_DSN"),
		t.TempDir(), masterPort, workerPort))
	var procs []*exec.Cmd
	var outs []*syncBuffer
	for _, line := range lines {
		cmd, _ := etcOverlay(t, "mkdir -p /etc/zksched && cp "+config+" /etc/zksched/zksched.yaml\nexec "+line)
		// The binary under test for bin/zksched, and the test clusters' task supervisor; the
		// settings come from the file alone.
		cmd.Env = append(os.Environ(), "ZKSCHED_BIN="+e.Bin, "GORACE=atexit_sleep_ms=0 halt_on_error=1")
		cmd.Env = append(cmd.Env, testcluster.SupervisorEnv(t)...)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		procs, outs = append(procs, cmd), append(outs, out)
	}
	defer func() {
		if t.Failed() {
			for i, line := range lines {
				t.Logf("==== output of %s ====\n%s", line, outs[i].String())
			}
		}
	}()
	waitReady(t, masterPort)
	waitReady(t, workerPort)
	out, code := e.Run("zk", "nodes", "--json")
	var nodes struct {
		Masters []struct{ ID string } `json:"masters"`
		Workers []struct{ ID string } `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &nodes); code != 0 || err != nil {
		t.Fatalf("zksched zk nodes --json: exit %d, %v\n%s", code, err, out)
	}
	if len(nodes.Masters) != 1 || !strings.HasSuffix(strings.Split(nodes.Masters[0].ID, "_")[0], fmt.Sprintf(":%d", masterPort)) ||
		len(nodes.Workers) != 1 || !strings.HasSuffix(strings.Split(nodes.Workers[0].ID, "_")[0], fmt.Sprintf(":%d", workerPort)) {
		t.Errorf("registered: %s\nwant the master on port %d and the worker on port %d", out, masterPort, workerPort)
	}
	for i, cmd := range procs {
		// unshare and bash exec what they run: the process is the node itself.
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s after SIGTERM: %v, want exit 0", lines[i], err)
		}
	}
}

// TestDocsLongRuns goes through the command blocks of docs/testing.md, docs/performance.md
// and docs/multi-host.md that run for minutes to hours, line by line, as printed. It runs
// what is short: the eval of bin/services.sh env (with a run folder of its own) and the
// zksched-bench dag and foreach lines. Of the go test lines it checks, with this package's
// test binary, that -run names tests and that the flags and the environment variables are
// accepted, without running the soaks; of the benchmark line, that its packages have
// benchmarks. TestDocsBenchCommands (cmd/zksched-bench) checks the other zksched-bench lines.
func TestDocsLongRuns(t *testing.T) {
	t.Parallel()
	blocks := []struct{ file, block string }{
		{"docs/testing.md", testenv.DocBlock(t, "docs/testing.md", "The fault soak", "sh", 1)},
		{"docs/performance.md", testenv.DocBlock(t, "docs/performance.md", "Running the benchmarks", "sh", 1)},
		{"docs/multi-host.md", testenv.DocBlock(t, "docs/multi-host.md", "Under a mixed load and random faults", "sh", 1)},
	}
	sources := ""
	for _, f := range must(filepath.Glob(filepath.Join(repoRoot(), "e2e", "*_test.go"))) {
		sources += string(must(os.ReadFile(f)))
	}
	for _, b := range blocks {
		for line := range strings.Lines(b.block) {
			command, _, _ := strings.Cut(line, "#")
			command = strings.TrimSpace(command)
			fields := strings.Fields(command)
			switch {
			case command == `eval "$(bin/services.sh env | sed 's/^/export /')"`:
				checkServicesEnv(t, command)
			case command == "go build -o bin/zksched-bench ./cmd/zksched-bench":
				// The same package, built by the harness (with -race) for the runs below.
				testcluster.BenchBinary(t)
			case strings.HasPrefix(command, "bin/zksched-bench dag ") || strings.HasPrefix(command, "bin/zksched-bench foreach "):
				start := time.Now()
				_, stderr, code := benchProcesses(t, fields[1], fields[2:]...)
				t.Logf("%s: %v", command, time.Since(start).Round(time.Second))
				if code != 0 {
					t.Errorf("%s: %s: exit %d\n%s", b.file, command, code, stderr)
				}
			case strings.HasPrefix(command, "bin/zksched-bench "):
				// TestDocsBenchCommands.
			case strings.Contains(command, " -bench "):
				checkBenchmarkLine(t, b.file, fields)
			case strings.Contains(command, "go test "):
				checkSoakLine(t, b.file, command, sources)
			case command != "":
				t.Errorf("%s: %q: no test runs or checks this line", b.file, line)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// checkServicesEnv runs the eval of bin/services.sh env as printed, with a run folder whose
// password file the test wrote, and checks that it exports the servers' addresses.
func checkServicesEnv(t *testing.T, command string) {
	t.Helper()
	run := t.TempDir()
	if err := os.WriteFile(filepath.Join(run, "zksched-db-password"), []byte("pw-of-the-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", command+"\necho \"$ZKSCHED_REGISTRY_SERVERS $ZKSCHED_DB_DSN\"")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "ZKSCHED_RUN_DIR="+run)
	out, err := cmd.CombinedOutput()
	if want := "127.0.0.1:2181 postgres://zksched:pw-of-the-test@127.0.0.1:"; err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("%s: %v\n%s\nwant %q", command, err, out, want)
	}
}

// checkBenchmarkLine checks `go test -run '^$' -bench . -benchtime Nx PKG…`: each package has
// benchmarks for -bench to run.
func checkBenchmarkLine(t *testing.T, file string, fields []string) {
	t.Helper()
	for _, f := range fields {
		if !strings.HasPrefix(f, "./") {
			continue
		}
		found := false
		for _, src := range must(filepath.Glob(filepath.Join(repoRoot(), f, "*_test.go"))) {
			found = found || strings.Contains(string(must(os.ReadFile(src))), "\nfunc Benchmark")
		}
		if !found {
			t.Errorf("%s: %s has no benchmark for `go test -bench` to run", file, f)
		}
	}
}

// checkSoakLine checks `[VAR=value…] go test -race -count=1 ./e2e -run TestX -v [-flag=value…]`
// with this test binary: -run lists tests, the flags and values parse (with -test.run '^$',
// so nothing runs), and each variable is read by a test of this package and its value parses
// as the kind its name says.
func checkSoakLine(t *testing.T, file, command, sources string) {
	t.Helper()
	fields := strings.Fields(command)
	var env, flags []string
	for len(fields) > 0 && strings.Contains(fields[0], "=") {
		env = append(env, fields[0])
		fields = fields[1:]
	}
	if len(fields) < 2 || fields[0] != "go" || fields[1] != "test" {
		t.Errorf("%s: %q: want [VAR=value…] go test …", file, command)
		return
	}
	run := ""
	for i := 2; i < len(fields); i++ {
		switch f := fields[i]; {
		case f == "-race", f == "-count=1", f == "-v", f == "./e2e":
		case f == "-run" && i+1 < len(fields):
			run = fields[i+1]
			i++
		default:
			flags = append(flags, f)
		}
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.Contains(sources, `os.Getenv("`+name+`")`) {
			t.Errorf("%s: %q: no test of ./e2e reads %s", file, command, name)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "_DURATION"):
			_, err = time.ParseDuration(value)
		case strings.HasSuffix(name, "_SEED"):
			_, err = strconv.ParseInt(value, 10, 64)
		}
		if err != nil {
			t.Errorf("%s: %q: %s: %v", file, command, kv, err)
		}
	}
	list := exec.Command(os.Args[0], "-test.list", run)
	if out, err := list.Output(); err != nil || !strings.HasPrefix(string(out), "Test") {
		t.Errorf("%s: %q: -run %s names no test of ./e2e: %v %s", file, command, run, err, out)
	}
	parse := exec.Command(os.Args[0], append([]string{"-test.run", "^$"}, flags...)...)
	parse.Env = append(os.Environ(), env...)
	if out, err := parse.CombinedOutput(); err != nil {
		t.Errorf("%s: %q: the flags %v: %v\n%s", file, command, flags, err, out)
	}
}

// etcOverlay returns a command that runs script with bash -euxo pipefail, from the
// repository's root, in a mount namespace of its own whose /etc is an overlay on the
// machine's: what it writes under /etc goes to upper, a folder of the test's, and the
// machine's /etc is never written. A script ending in exec leaves the process it runs as the
// command's own.
func etcOverlay(t *testing.T, script string) (cmd *exec.Cmd, upper string) {
	t.Helper()
	dir := t.TempDir()
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	unshare := []string{"--mount"}
	if os.Geteuid() != 0 {
		unshare = append(unshare, "--map-root-user")
	}
	mount := fmt.Sprintf("mount -t overlay overlay -o lowerdir=/etc,upperdir=%s,workdir=%s /etc\n", upper, work)
	cmd = exec.Command("unshare", append(unshare, "bash", "-euxo", "pipefail", "-c", mount+script)...)
	cmd.Dir = repoRoot()
	return cmd, upper
}
