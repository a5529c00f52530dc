package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestBenchFailover runs the failover benchmark end to end on a small load: a worker process
// is killed with kill -9, its tasks run again on the other worker within the failover's own
// time, nothing is lost, committed twice or run twice at once, and the run leaves nothing
// behind.
func TestBenchFailover(t *testing.T) {
	t.Parallel()
	// A session timeout longer than the fault tests' 2 s: the surviving worker runs the killed
	// one's tasks too, every one with a -race supervisor, and must not lose its own session on
	// a loaded machine.
	const sessionTimeout, failoverDelay = 4 * time.Second, 2 * time.Second
	s, stdout := benchSummary(t, "failover", "--rate", "10", "--duration", "6s", "--sleep", "500ms",
		"--kill-after", "3s", "--session-timeout", sessionTimeout.String(), "--failover-delay", failoverDelay.String())
	f := s.FailoverFigures
	if f == nil {
		t.Fatalf("summary = %s, want a failover summary", stdout)
	}
	if s.Workflows != 60 || s.Tasks != s.Workflows {
		t.Errorf("workflows %d, tasks %d; want 60 of each (10/s for 6 s)", s.Workflows, s.Tasks)
	}
	if f.TasksFailedOver == 0 || f.TasksRequeued != f.TasksFailedOver {
		t.Errorf("tasks failed over %d, requeued by the failover %d; want the same positive number", f.TasksFailedOver, f.TasksRequeued)
	}
	// The leader requeues no sooner than failover.delay after it sees the session expire; the
	// bound leaves the loaded test machine a few seconds more.
	bound := float64((sessionTimeout + failoverDelay + 4*time.Second).Milliseconds())
	if f.FailoverMsMin < float64(failoverDelay.Milliseconds()) || f.FailoverMsMax > bound || s.P50ms < f.FailoverMsMin || s.P50ms > f.FailoverMsMax {
		t.Errorf("kill → running elsewhere: min %.0f ms, p50 %.0f ms, max %.0f ms; want all within %v..%.0f ms",
			f.FailoverMsMin, s.P50ms, f.FailoverMsMax, failoverDelay, bound)
	}
	if f.LostMs <= 0 || f.FencedMs < f.LostMs {
		t.Errorf("kill → session expiry seen %.0f ms, → fenced %.0f ms; want 0 < expiry <= fenced", f.LostMs, f.FencedMs)
	}
	if f.Lost != 0 || f.CommittedTwice != 0 || f.Overlaps != 0 || len(f.Problems) != 0 {
		t.Errorf("lost %d, committed twice %d, overlaps %d, problems %q; want none", f.Lost, f.CommittedTwice, f.Overlaps, f.Problems)
	}
	t.Logf("figure: kill -9 of a worker under load → its %d tasks running elsewhere: p50 %.0f ms, max %.0f ms (fenced at %.0f ms)",
		f.TasksFailedOver, s.P50ms, f.FailoverMsMax, f.FencedMs)

	leftNothingBehind(t, f.Schema, f.ZKRoot)
}

// TestBenchFailoverNeedsTwoWorkers: with one worker nothing could take over its tasks, so the
// run is refused before it starts a node.
func TestBenchFailoverNeedsTwoWorkers(t *testing.T) {
	t.Parallel()
	_, stderr, code := benchProcesses(t, "failover", "--workers", "1")
	if code == 0 || !strings.Contains(stderr, "--workers 1: want at least 2") {
		t.Errorf("exit code %d, stderr %q; want a failure naming --workers", code, stderr)
	}
}
