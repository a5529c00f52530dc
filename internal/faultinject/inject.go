//go:build faultinject

package faultinject

import (
	"fmt"
	"os"
	"syscall"
)

// Point kills the process with SIGKILL when ZKSCHED_TEST_FAULT names point, so a fault test
// can crash a node exactly there.
func Point(point string) {
	if os.Getenv("ZKSCHED_TEST_FAULT") == point {
		fmt.Fprintf(os.Stderr, "zksched: fault injection: SIGKILL at %s\n", point)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

// Supervisor returns the program ZKSCHED_TEST_SUPERVISOR names, else self.
func Supervisor(self string) string {
	if p := os.Getenv("ZKSCHED_TEST_SUPERVISOR"); p != "" {
		return p
	}
	return self
}
