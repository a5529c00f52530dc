package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/dao"
)

// logSink collects an attempt's output and stores it in task_log in chunks, on a short
// interval or when a chunk is full, each write under the attempt's token. It keeps at most
// limit bytes per attempt and then notes the truncation once. Writes never block on the
// database: the task must not stall because PostgreSQL is slow. Its goroutine starts with the
// first write: a task that prints nothing (most of a burn-down's) costs no goroutine, ticker
// or wake-up.
type logSink struct {
	db       *dao.DB
	tok      dao.Token
	limit    int
	refused  func() // called once when a write is refused: the task is no longer ours
	interval time.Duration
	clock    clockwork.Clock

	mu        sync.Mutex
	buf       []byte
	kept      int
	truncated bool
	seq       int
	started   bool // the loop runs, or Close came first
	wake      chan struct{}
	done      chan struct{}
	closed    chan struct{}
}

const chunkSize = 32 << 10

func newLogSink(db *dao.DB, tok dao.Token, limit int, clock clockwork.Clock, refused func()) *logSink {
	return &logSink{db: db, tok: tok, limit: limit, refused: refused, interval: 250 * time.Millisecond, clock: clock,
		wake: make(chan struct{}, 1), done: make(chan struct{}), closed: make(chan struct{})}
}

// Write keeps p up to the limit. It never fails: a task's output is not worth stopping it for.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	room := s.limit - s.kept
	switch {
	case room >= len(p):
		s.buf = append(s.buf, p...)
		s.kept += len(p)
	case !s.truncated:
		s.buf = append(s.buf, p[:max(room, 0)]...)
		s.buf = append(s.buf, fmt.Sprintf("\n[zksched: log truncated at %d bytes]\n", s.limit)...)
		s.kept, s.truncated = s.limit, true
	}
	full := len(s.buf) >= chunkSize
	if !s.started {
		s.started = true
		go s.loop()
	}
	s.mu.Unlock()
	if full {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

func (s *logSink) loop() {
	defer close(s.closed)
	t := s.clock.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-t.Chan():
		case <-s.wake:
		case <-s.done:
			s.flush()
			return
		}
		s.flush()
	}
}

func (s *logSink) flush() {
	s.mu.Lock()
	data := s.buf
	s.buf = nil
	s.mu.Unlock()
	for len(data) > 0 {
		n := min(len(data), chunkSize)
		for n < len(data) && n > 0 && !utf8.RuneStart(data[n]) {
			n-- // never split a character between chunks
		}
		if n == 0 {
			n = min(len(data), chunkSize)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := s.db.TaskLogAppendIfRunning(ctx, s.tok, s.seq, textOf(data[:n]))
		cancel()
		if errors.Is(err, dao.ErrTokenRefused) {
			s.refused()
			return
		}
		// On any other error the chunk is lost: logs are best effort, results are not.
		s.seq++
		data = data[n:]
	}
}

// textOf makes output storable as PostgreSQL text, which takes neither NUL nor invalid UTF-8.
func textOf(b []byte) string {
	return strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00", "\uFFFD")
}

// Close stores what is left (the loop's last flush; without a write there is no loop and
// nothing to store). Call it before the attempt's result is written: once the task has left
// the running state, its log writes are refused.
func (s *logSink) Close() {
	s.mu.Lock()
	started := s.started
	s.started = true // no loop from here on
	s.mu.Unlock()
	if started {
		close(s.done)
		<-s.closed
	}
}
