package registry

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootClock reads CLOCK_BOOTTIME: the time since boot, suspend included. A variable so a test
// can stand for a suspend.
var bootClock = func() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("registry: CLOCK_BOOTTIME: " + err.Error())
	}
	return time.Duration(ts.Nano())
}

var (
	wallAtStart = time.Now().Round(0) // Round(0) drops the monotonic reading
	bootAtStart = bootClock()
)

// Now is the clock of the node's deadline: LastContact is read from it, and the guard measures
// the time since with it. Unlike the monotonic clock of time.Now, it goes on while the machine
// is suspended: a node that slept past its session timeout must count that time, as the
// ZooKeeper servers did. The value carries no monotonic reading, so Sub between two values of
// Now is the time CLOCK_BOOTTIME counted between them; as a wall time it is the wall clock at
// the process's start plus that, close enough to read in a log.
func Now() time.Time { return wallAtStart.Add(bootClock() - bootAtStart) }
