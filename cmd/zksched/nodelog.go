package main

import (
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/rs/zerolog/diode"

	"github.com/zksched/zksched/conf"
)

// nodeLogBuffer is how many log messages a node holds while its log output is slow.
const nodeLogBuffer = 10000

// nodeLog is a master's or worker's log output: writes never block the node. A writer that
// blocks (a stalled pipe, a hung journald) would otherwise hold up whatever logged, the
// watchdog's stop and the fenced exit included, while the node stayed registered. Messages
// are handed to one goroutine that writes them out; past nodeLogBuffer waiting, the oldest
// are dropped and counted, and a message says how many once the output moves again.
type nodeLog struct {
	out     diode.Writer
	dropped atomic.Int64
}

// newNodeLog returns the node's logger and its output over w.
func newNodeLog(cfg conf.Log, w io.Writer) (zerolog.Logger, *nodeLog) {
	l := &nodeLog{}
	var log zerolog.Logger
	// The diode closes a writer that is an io.Closer when it is flushed; w is the process's
	// stderr, which must stay open for the error the command returns after the node stopped.
	l.out = diode.NewWriter(struct{ io.Writer }{w}, nodeLogBuffer, 0, func(missed int) {
		l.dropped.Add(int64(missed))
		// Called on the writing goroutine, once it is writing again.
		log.Warn().Int("dropped", missed).Int64("dropped_total", l.dropped.Load()).
			Msg("log output was blocked; messages were dropped")
	})
	log = newLogger(cfg, l.out)
	return log, l
}

// Dropped is the number of messages dropped so far.
func (l *nodeLog) Dropped() int64 { return l.dropped.Load() }

// Flush writes out what is waiting, for at most d: a blocked output cannot hold the exit.
func (l *nodeLog) Flush(d time.Duration) {
	done := make(chan struct{})
	go func() { l.out.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// fencedExit ends a fenced node at once: no graceful stop, no deferred cleanup (closing the
// database waits for queries in flight, which a cut link can hold for minutes). A worker's task
// supervisors kill everything their tasks started when this process is gone.
func fencedExit(log zerolog.Logger, out *nodeLog, err error) {
	log.Error().Err(err).Msg("this node was fenced: the leader failed it over; exiting at once")
	out.Flush(100 * time.Millisecond)
	os.Exit(exitFenced)
}
