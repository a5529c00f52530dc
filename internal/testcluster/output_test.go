package testcluster

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testenv"
)

// A process whose piped output is blocked stops at its next write once the pipe is full, and
// goes on when the output is read again, with nothing lost.
func TestBlockOutput(t *testing.T) {
	t.Parallel()
	c := &Cluster{t: t, Bin: "/bin/sh", Dir: t.TempDir(), PipeOutput: true}
	t.Cleanup(c.stopAll)
	// 400 KiB of output, far more than a pipe holds, then a last line.
	p := c.Start("writer", nil, "-c", `i=0; while [ $i -lt 4000 ]; do printf '%0100d\n' $i; i=$((i+1)); done; echo done`)
	if !p.BlockOutput() {
		t.Fatal("BlockOutput = false for a piped process")
	}
	if p.BlockOutput() {
		t.Error("BlockOutput = true for an output already blocked")
	}
	waitFor(t, "the writer to block on its pipe", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Cmd.Process.Pid) + "/wchan")
		// The kernel's name for the wait differs between versions: pipe_write, pipe_wait,
		// anon_pipe_write.
		return strings.Contains(string(b), "pipe_w")
	})
	select {
	case <-p.Exited():
		t.Fatal("the writer exited while its output was blocked")
	default:
	}
	p.UnblockOutput()
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the writer did not exit once its output was read again")
	}
	waitFor(t, "the whole output in the log", func() bool { return strings.HasSuffix(p.Log(), "done\n") })
	if n := strings.Count(p.Log(), "\n"); n != 4001 {
		t.Errorf("the log has %d lines, want 4001", n)
	}
}

// waitFor checks cond every 20 ms for up to 30 s: the kernel's wait channel and the log file
// give no signal.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, 20*time.Millisecond, what, cond)
}
