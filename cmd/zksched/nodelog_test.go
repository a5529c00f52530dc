package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/conf"
)

// closeRecorder is a writer that remembers what was written and whether it was closed.
type closeRecorder struct {
	mu     sync.Mutex
	b      strings.Builder
	closed bool
}

func (c *closeRecorder) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

func (c *closeRecorder) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

// A node's log is flushed before run prints the error that stopped it to the same stderr:
// the flush must leave stderr open, or that error is lost.
func TestNodeLogFlushLeavesItsOutputOpen(t *testing.T) {
	t.Parallel()
	w := &closeRecorder{}
	log, out := newNodeLog(conf.Defaults().Log, w)
	log.Info().Msg("before the flush")
	out.Flush(2 * time.Second)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		t.Error("Flush closed the node's output")
	}
	if !strings.Contains(w.b.String(), "before the flush") {
		t.Errorf("output = %q, want the message logged before the flush", w.b.String())
	}
}
