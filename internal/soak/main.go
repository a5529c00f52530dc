package soak

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/zksched/zksched/internal/testcluster"
)

// Main runs a soak outside a test, for `zksched-bench soak`, with binary as the nodes. It
// prints progress and, once the soak is over, its report to out, and the end of every node's
// log when the soak found anomalies. It returns an error when the soak could not run or
// found anomalies; the result, when there is one, either way.
func Main(cfg Config, binary string, out io.Writer) (res *Result, err error) {
	testcluster.UseBinary(binary)
	h := &harness{out: out}
	if cfg.Logf == nil {
		cfg.Logf = h.Logf
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fatal); !ok {
				h.Logf("soak: panic: %v\n%s", r, debug.Stack())
			}
			err = errors.New("soak: could not run; see above")
		}
		if res != nil && len(res.Anomalies) > 0 {
			h.Fail() // the cleanups print the end of each node's log
		}
		h.cleanup()
	}()
	res = Run(h, cfg)
	fmt.Fprint(out, res)
	if len(res.Anomalies) > 0 {
		fmt.Fprintln(out, res.Detail)
		return res, fmt.Errorf("soak: seed %d: %d anomal(ies)", res.Seed, len(res.Anomalies))
	}
	return res, nil
}

// harness stands in for a *testing.T outside a test: the helpers Run uses (testenv,
// testcluster, history, llmtest) take a testing.TB for its logging, failing and cleanups,
// and the soak must not depend on the test runner to be useful to an operator. The embedded
// TB is nil: those helpers call only the methods defined here. A Fatal ends the run by a
// panic that Main recovers, so it must come from Run's own goroutine, as in a test.
type harness struct {
	testing.TB
	out io.Writer

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

// fatal is the panic of a Fatal.
type fatal struct{}

func (h *harness) Helper()      {}
func (h *harness) Name() string { return "soak" }

func (h *harness) Logf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(h.out, format+"\n", args...)
}

func (h *harness) Log(args ...any) { h.Logf("%s", fmt.Sprint(args...)) }

func (h *harness) Fail() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = true
}

func (h *harness) Failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

func (h *harness) Errorf(format string, args ...any) { h.Logf(format, args...); h.Fail() }
func (h *harness) Error(args ...any)                 { h.Log(args...); h.Fail() }
func (h *harness) Fatalf(format string, args ...any) { h.Errorf(format, args...); panic(fatal{}) }
func (h *harness) Fatal(args ...any)                 { h.Error(args...); panic(fatal{}) }
func (h *harness) FailNow()                          { h.Fail(); panic(fatal{}) }

func (h *harness) Cleanup(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cleanups = append(h.cleanups, f)
}

func (h *harness) TempDir() string {
	dir, err := os.MkdirTemp("", "zksched-soak-")
	if err != nil {
		h.Fatalf("soak: %v", err)
	}
	h.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// cleanup runs the cleanups, the last registered first, as a test does.
func (h *harness) cleanup() {
	for {
		h.mu.Lock()
		n := len(h.cleanups)
		if n == 0 {
			h.mu.Unlock()
			return
		}
		f := h.cleanups[n-1]
		h.cleanups = h.cleanups[:n-1]
		h.mu.Unlock()
		f()
	}
}
