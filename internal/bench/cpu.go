package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUFigures is what a run cost in CPU time: the whole machine's (the database, ZooKeeper
// and every other process on it, from /proc/stat) and this process's (the load generator
// and the in-process nodes). On a machine with nothing else running, the machine's figure
// per workflow is the cost the throughput is the inverse of, and it is far steadier from
// run to run than the throughput is: it is the figure to compare two builds by.
type CPUFigures struct {
	Cores                  int     `json:"cores"`
	MachineSeconds         float64 `json:"machine_cpu_seconds"`
	ProcessSeconds         float64 `json:"process_cpu_seconds"`
	MachineUsPerWorkflow   float64 `json:"machine_cpu_us_per_workflow"`
	ProcessUsPerWorkflow   float64 `json:"process_cpu_us_per_workflow"`
	MachineBusyFractionPct float64 `json:"machine_busy_pct"`
}

// cpuSample is a point to measure CPU time from.
type cpuSample struct {
	at      time.Time
	machine time.Duration // busy time of all cores since boot; 0 where /proc/stat is missing
	process time.Duration // this process's user + system time
	cores   int
}

// userHZ is the unit of /proc/stat's counters, USER_HZ, which Linux fixes at 100 on every
// architecture Go runs on.
const userHZ = 100

func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.process = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	f, err := os.Open("/proc/stat")
	if err != nil {
		return s
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		switch {
		case len(fields) > 8 && fields[0] == "cpu":
			// user nice system idle iowait irq softirq steal: busy is all but idle, iowait
			// and steal (time another guest had the core).
			var busy int64
			for _, i := range []int{1, 2, 3, 6, 7} {
				n, err := strconv.ParseInt(fields[i], 10, 64)
				if err != nil {
					return s
				}
				busy += n
			}
			s.machine = time.Duration(busy) * time.Second / userHZ
		case strings.HasPrefix(fields[0], "cpu"):
			s.cores++
		}
	}
	return s
}

// since is the CPU time spent from s to now, and per workflow over n workflows.
func (s cpuSample) since(n int) *CPUFigures {
	now := sampleCPU()
	if s.machine == 0 || now.machine == 0 || n == 0 {
		return nil
	}
	wall := now.at.Sub(s.at)
	f := &CPUFigures{
		Cores:          now.cores,
		MachineSeconds: (now.machine - s.machine).Seconds(),
		ProcessSeconds: (now.process - s.process).Seconds(),
	}
	f.MachineUsPerWorkflow = f.MachineSeconds * 1e6 / float64(n)
	f.ProcessUsPerWorkflow = f.ProcessSeconds * 1e6 / float64(n)
	if wall > 0 && now.cores > 0 {
		f.MachineBusyFractionPct = 100 * f.MachineSeconds / (wall.Seconds() * float64(now.cores))
	}
	return f
}

// String is the figures on one line.
func (f *CPUFigures) String() string {
	return fmt.Sprintf("CPU: machine %.0f µs a workflow (%.1fs, %.0f%% of %d cores busy), of which this process %.0f µs",
		f.MachineUsPerWorkflow, f.MachineSeconds, f.MachineBusyFractionPct, f.Cores, f.ProcessUsPerWorkflow)
}
