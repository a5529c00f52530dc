package registry

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNowCountsASuspend: a suspend moves CLOCK_BOOTTIME but not the monotonic clock Go's
// time.Now reads. The test stands for one by moving the boot clock alone; the time between two
// values of Now must include it, as the ZooKeeper servers' time did.
func TestNowCountsASuspend(t *testing.T) {
	real := bootClock
	var slept time.Duration
	bootClock = func() time.Duration { return real() + slept }
	defer func() { bootClock = real }()

	before, monoBefore := Now(), time.Now()
	slept = 30 * time.Second
	if got := Now().Sub(before); got < 30*time.Second || got > 31*time.Second {
		t.Errorf("Now moved %v over a 30 s suspend, want 30 s and a little", got)
	}
	if mono := time.Since(monoBefore); mono > time.Second {
		t.Fatalf("the monotonic clock moved %v; the test needs it still", mono)
	}
}

// TestBootClockIsTheKernels: the real boot clock is the one /proc/uptime shows (CLOCK_BOOTTIME),
// to its 10 ms resolution.
func TestBootClockIsTheKernels(t *testing.T) {
	b, err := os.ReadFile("/proc/uptime")
	after := bootClock()
	if err != nil {
		t.Fatal(err)
	}
	secs, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	uptime := time.Duration(secs * float64(time.Second))
	if d := after - uptime; d < 0 || d > 50*time.Millisecond {
		t.Fatalf("boot clock %v, /proc/uptime %v: they differ by %v", after, uptime, d)
	}
}
