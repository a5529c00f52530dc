package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// SharedZKLog returns the lines of the shared ZooKeeper's log (the one bin/services.sh runs,
// its log under ZKSCHED_RUN_DIR or the repository's .run) that contain any of substrs, the
// last 100 of them, or why there are none: a test that waited in vain for the server reports
// what the server was doing meanwhile (a session it expired, a write-ahead log fsync that
// stalled).
func SharedZKLog(substrs ...string) string {
	dir := os.Getenv("ZKSCHED_RUN_DIR")
	if dir == "" {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			return "(the shared ZooKeeper's log: cannot find the repository)"
		}
		dir = filepath.Join(filepath.Dir(file), "..", "..", ".run")
	}
	name := filepath.Join(dir, "zookeeper", "zookeeper.log")
	data, err := os.ReadFile(name)
	if err != nil {
		return "(the shared ZooKeeper's log: " + err.Error() + ")"
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		for _, s := range substrs {
			if strings.Contains(line, s) {
				out = append(out, line)
				break
			}
		}
	}
	if len(out) > 100 {
		out = out[len(out)-100:]
	}
	if len(out) == 0 {
		return "(nothing in " + name + ")"
	}
	return strings.Join(out, "\n")
}
