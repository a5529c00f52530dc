package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/bench"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
)

// benchProcesses runs `zksched-bench mode args…`, a mode that starts node processes, against
// the test's ZooKeeper root (the bench makes its own beside it) and the test database (it
// makes its own schema in it), and returns its stdout, stderr and exit code. Whatever the
// bench leaves under its root is deleted when the test ends, and fails the test.
func benchProcesses(t *testing.T, mode string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	zkEnv := testenv.ZooKeeper(t)
	t.Cleanup(func() {
		c := testenv.DialZK(t)
		children, _, err := c.Children("/")
		if err != nil {
			t.Errorf("list the ZooKeeper roots: %v", err)
			return
		}
		for _, name := range children {
			if strings.HasPrefix("/"+name, zkEnv.Root+"-bench-") {
				t.Errorf("the bench left its ZooKeeper root /%s behind", name)
				if err := testenv.DeleteTree(c, "/"+name); err != nil {
					t.Errorf("delete /%s: %v", name, err)
				}
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcluster.BenchBinary(t), append([]string{mode}, args...)...)
	// On timeout, SIGTERM: the bench then stops its nodes and removes what it made.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	cmd.Env = append(os.Environ(),
		"ZKSCHED_REGISTRY_SERVERS="+strings.Join(zkEnv.Servers, ","),
		"ZKSCHED_REGISTRY_ROOT="+zkEnv.Root,
		"ZKSCHED_DB_DSN="+testenv.BaseDSN(),
		// The binary is built with -race, whose runtime sleeps 1 s at every exit by default.
		"GORACE=atexit_sleep_ms=0 halt_on_error=1",
	)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run zksched-bench %s: %v\n%s", mode, err, errOut.String())
	}
	return out.String(), errOut.String(), code
}

// benchSummary runs `zksched-bench mode --json args…` as benchProcesses does, wants it to exit
// 0 with a JSON summary of mode, and returns the summary and the raw JSON.
func benchSummary(t *testing.T, mode string, args ...string) (bench.Summary, string) {
	t.Helper()
	stdout, stderr, code := benchProcesses(t, mode, append([]string{"--json"}, args...)...)
	t.Logf("progress:\n%s", stderr)
	if code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s", code, stdout)
	}
	var s bench.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("the summary is not JSON: %v\n%s", err, stdout)
	}
	if s.Mode != mode {
		t.Fatalf("summary = %s, want a %s summary", stdout, mode)
	}
	return s, stdout
}

// TestBenchMemory runs the memory benchmark end to end on a small queue: every task instance
// is created and all but the running ones stay queued, every node's memory is sampled, and
// the run leaves nothing behind. It asserts no size beyond sanity: the binary is built with
// -race, which multiplies the memory of every process.
func TestBenchMemory(t *testing.T) {
	t.Parallel()
	const n, workers, slots = 3000, 2, 8
	s, stdout := benchSummary(t, "memory", "-n", "3000", "--slots", "8", "--hold", "2s", "--duration", "60s")
	m := s.Memory
	if m == nil {
		t.Fatalf("summary = %s, want a memory summary", stdout)
	}
	if s.Tasks != n || s.Workers != workers || s.Slots != slots {
		t.Errorf("tasks %d, workers %d, slots %d; want %d, %d, %d", s.Tasks, s.Workers, s.Slots, n, workers, slots)
	}
	if m.TaskInstances < n || m.QueuedMax < n-workers*slots || m.QueuedMax > n {
		t.Errorf("task instances %d, queued at most %d; want %d task instances, %d..%d queued", m.TaskInstances, m.QueuedMax, n, n-workers*slots, n)
	}
	if m.HoldMs < 2000 || m.Samples < 10 {
		t.Errorf("held %.0f ms, %d samples; want at least 2000 ms and 10 samples (one every 200 ms)", m.HoldMs, m.Samples)
	}
	// Sane: more than 1 MB, and not the whole machine. The kernel's peak (HWM) is at least
	// about the largest sample: its RSS counters are approximate, so not always to the page.
	sane := func(mb float64) bool { return mb > 1 && mb < 4096 }
	peak := func(hwm, rss float64) bool { return sane(hwm) && hwm >= 0.9*rss }
	if !sane(m.MasterRSSMBMax) || !sane(m.WorkerRSSMBMax) || !peak(m.MasterHWMMB, m.MasterRSSMBMax) || !peak(m.WorkerHWMMB, m.WorkerRSSMBMax) {
		t.Errorf("master RSS max %.1f MB, HWM %.1f MB; worker RSS max %.1f MB, HWM %.1f MB; want 1..4096 MB, HWM about RSS max or more",
			m.MasterRSSMBMax, m.MasterHWMMB, m.WorkerRSSMBMax, m.WorkerHWMMB)
	}
	if len(m.Nodes) != 1+workers {
		t.Fatalf("%d nodes, want %d", len(m.Nodes), 1+workers)
	}
	for _, node := range m.Nodes {
		if !sane(node.RSSMBMax) || !peak(node.HWMMB, node.RSSMBMax) || node.HeapInuseMB <= 0 || node.HeapInuseMB > node.GoSysMB ||
			node.Goroutines <= 0 || node.PID <= 0 || node.ID == "" {
			t.Errorf("node %+v: want RSS max 1..4096 MB, HWM about RSS max or more, heap in use in 0..go sys, goroutines, a pid and an identity", node)
		}
	}
	t.Logf("figure (-race build): %d queued; master RSS max %.1f MB, worker RSS max %.1f MB", m.QueuedMax, m.MasterRSSMBMax, m.WorkerRSSMBMax)

	leftNothingBehind(t, m.Schema, m.ZKRoot)
}

// leftNothingBehind checks that a bench run removed its schema and its ZooKeeper root.
func leftNothingBehind(t *testing.T, schema, root string) {
	t.Helper()
	db, err := sql.Open("postgres", testenv.BaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var schemas int
	if err := db.QueryRow(`SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1`, schema).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if schema == "" || schemas != 0 {
		t.Errorf("the bench's schema %q is still there", schema)
	}
	if ok, _, err := testenv.DialZK(t).Exists(root); err != nil || ok || root == "" {
		t.Errorf("the bench's ZooKeeper root %q: exists %v (%v), want it deleted", root, ok, err)
	}
}

// TestBenchSignal runs the signal benchmark end to end on a small load: every instance comes
// to wait, the nodes hold no goroutine per waiting task, every signal moves its instance on to
// the end, and the run leaves nothing behind. It asserts no speed.
func TestBenchSignal(t *testing.T) {
	t.Parallel()
	const n, signals = 1000, 200
	s, stdout := benchSummary(t, "signal", "-n", "1000", "--slots", "8", "--hold", "1s", "--rate", "100", "--duration", "2s")
	g := s.Signal
	if g == nil {
		t.Fatalf("summary = %s, want a signal summary", stdout)
	}
	if g.Waiting != n || g.Signals != signals || s.Tasks != signals {
		t.Errorf("%d waiting, %d signals (summary: %d tasks); want %d and %d", g.Waiting, g.Signals, s.Tasks, n, signals)
	}
	if len(g.Idle) != 3 || len(g.Held) != 3 {
		t.Fatalf("idle %+v, held %+v: want the three nodes in each", g.Idle, g.Held)
	}
	for i, h := range g.Held {
		// A goroutine per waiting task would be a thousand more; a few come and go with
		// connections and timers.
		if idle := g.Idle[i]; h.Goroutines <= 0 || h.Goroutines > idle.Goroutines+20 {
			t.Errorf("%s: %d goroutines with %d tasks waiting, %d idle", h.Name, h.Goroutines, n, idle.Goroutines)
		}
	}
	if g.Queued.P50 <= 0 || g.Start.P50 < g.Queued.P50 || g.Finish.P50 < g.Start.P50 || g.Finish.Max < g.Finish.P99 {
		t.Errorf("latency: created %+v, started %+v, finished %+v; want 0 < created ≤ started ≤ finished", g.Queued, g.Start, g.Finish)
	}
	t.Logf("figures (-race build): signal → next started p50 %.1f ms p99 %.1f ms; master RSS max %.1f MB, worker %.1f MB",
		g.Start.P50, g.Start.P99, g.MasterRSSMBMax, g.WorkerRSSMBMax)
	leftNothingBehind(t, g.Schema, g.ZKRoot)
}

// TestBenchSensor runs the sensor benchmark end to end on a small load: every sensor checks
// once and waits, the nodes hold no goroutine per waiting sensor, each checks again over the
// hold with its lateness measured, and the run leaves nothing behind. It asserts no speed.
func TestBenchSensor(t *testing.T) {
	t.Parallel()
	const n, slots = 300, 8
	s, stdout := benchSummary(t, "sensor", "-n", "300", "--workers", "1", "--slots", "8", "--interval", "2s", "--hold", "5s")
	g := s.Sensor
	if g == nil {
		t.Fatalf("summary = %s, want a sensor summary", stdout)
	}
	if g.Sensors != n || g.Checks < n {
		t.Errorf("%d sensors, %d later checks; want %d, each checking again at least once", g.Sensors, g.Checks, n)
	}
	if len(g.Idle) != 2 || len(g.Held) != 2 {
		t.Fatalf("idle %+v, held %+v: want the two nodes in each", g.Idle, g.Held)
	}
	for i, h := range g.Held {
		// A goroutine per waiting sensor would be 300 more; the checks running on the 8 slots
		// at the end of the hold take a few each, and a few come and go with connections.
		if idle := g.Idle[i]; h.Goroutines <= 0 || h.Goroutines > idle.Goroutines+20+4*slots {
			t.Errorf("%s: %d goroutines with %d sensors waiting, %d idle", h.Name, h.Goroutines, n, idle.Goroutines)
		}
	}
	if g.Lateness.Max < g.Lateness.P99 || g.Lateness.P99 < g.Lateness.P50 {
		t.Errorf("lateness %+v: want p50 ≤ p99 ≤ max", g.Lateness)
	}
	t.Logf("figures (-race build): check lateness p50 %.1f ms p99 %.1f ms; master RSS max %.1f MB, worker %.1f MB",
		g.Lateness.P50, g.Lateness.P99, g.MasterRSSMBMax, g.WorkerRSSMBMax)
	leftNothingBehind(t, g.Schema, g.ZKRoot)
}

// TestBenchViewers runs the viewers benchmark end to end on a small instance: the master
// creates every task, each read is answered (200, or 503 from a master busy with the other
// reads), the master's memory is sampled, and the run leaves nothing behind. It asserts no
// size beyond sanity: the binary is built with -race.
func TestBenchViewers(t *testing.T) {
	t.Parallel()
	s, stdout := benchSummary(t, "viewers", "-n", "3000", "--requests", "20")
	v := s.Viewers
	if v == nil {
		t.Fatalf("summary = %s, want a viewers summary", stdout)
	}
	if v.Tasks != 3000 || v.Requests != 20 || v.APIBytes <= 0 || v.UIBytes <= 0 {
		t.Errorf("tasks %d, requests %d, one read %d / %d bytes; want 3000, 20 and answers", v.Tasks, v.Requests, v.APIBytes, v.UIBytes)
	}
	if v.Statuses[200] == 0 || v.Statuses[200]+v.Statuses[503] != 40 {
		t.Errorf("statuses %v: want 40 answers, 200 or 503, some 200", v.Statuses)
	}
	if v.MasterRSSMBBefore <= 1 || v.MasterRSSMBMax < v.MasterRSSMBBefore || v.MasterHWMMB <= 1 || v.MasterHWMMB > 4096 {
		t.Errorf("master RSS before %.1f MB, max %.1f MB, peak %.1f MB: want 1..4096 MB, max at least before", v.MasterRSSMBBefore, v.MasterRSSMBMax, v.MasterHWMMB)
	}
	t.Logf("figures (-race build): API %d bytes in %.0f ms, UI %d bytes in %.0f ms; 20 of each at once %v; master RSS %.1f → %.1f MB",
		v.APIBytes, v.APIMs, v.UIBytes, v.UIMs, v.Statuses, v.MasterRSSMBBefore, v.MasterHWMMB)
	leftNothingBehind(t, v.Schema, v.ZKRoot)
}
