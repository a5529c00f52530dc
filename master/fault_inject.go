//go:build faultinject

package master

import (
	"fmt"
	"os"
	"syscall"
)

// injectFault kills the process with SIGKILL at the named point when ZKSCHED_TEST_FAULT names
// it. It is compiled only into test binaries (build tag faultinject), so the end-to-end tests
// can crash a master in the middle of a fire.
func injectFault(point string) {
	if os.Getenv("ZKSCHED_TEST_FAULT") == point {
		fmt.Fprintf(os.Stderr, "zksched: fault injection: SIGKILL at %s\n", point)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}
