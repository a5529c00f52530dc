package worker

import (
	"cmp"
	"io"
	"slices"
	"sync"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/worker/executor"
)

// minSecretLen is the shortest secret value masked. A shorter one would hide nothing: it is
// guessable, and masking it would turn every occurrence of a common string (a two-letter
// password, "admin") in every stored log into ***, which both spoils the logs and shows
// where the value occurs, which is the secret itself. The worker warns at start about a
// secret it leaves unmasked.
const minSecretLen = 6

// mask is what secrets are replaced with.
const mask = "***"

// masker replaces the values of the worker's secrets ([Config.Secrets]) with *** in what the
// worker stores of a task: its log, its output, its error and an agent's checkpoints. It is a
// guard against a secret a task prints by accident (a DSN in a stack trace, a key echoed
// while debugging); a task set on leaking a value it can read would encode it first, which is
// why tasks are not given the worker's secrets in the first place (executor.TaskEnv).
type masker struct {
	// secrets are the values masked, longest first: of two that match at one place, the
	// longer wins (the DSN rather than its password).
	secrets []string
	// first marks the bytes a secret starts with, to pass over every other byte at once.
	first [256]bool
}

// newMasker returns a masker of the values at least minSecretLen bytes long; the rest are
// left out (see minSecretLen).
func newMasker(values []string) *masker {
	m := &masker{}
	for _, v := range values {
		if len(v) >= minSecretLen && !slices.Contains(m.secrets, v) {
			m.secrets = append(m.secrets, v)
			m.first[v[0]] = true
		}
	}
	slices.SortStableFunc(m.secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return m
}

// String returns s with every secret replaced.
func (m *masker) String(s string) string {
	if len(m.secrets) == 0 {
		return s
	}
	out, _ := m.mask(nil, []byte(s), true)
	return string(out)
}

// result masks what an attempt's result stores of the task: its output and error.
func (m *masker) result(r *dao.AttemptResult) {
	r.Error = m.String(r.Error)
	if r.Output != nil {
		out := m.String(*r.Output)
		r.Output = &out
	}
}

// mask appends src to dst with every secret replaced and returns how many bytes of src it
// took. With final unset it stops where a secret may begin but src ends too soon to tell;
// the rest waits for more bytes. At most len(longest secret)-1 bytes are held back so.
func (m *masker) mask(dst, src []byte, final bool) ([]byte, int) {
	start := 0 // src[start:i] is to be copied as it is
	for i := 0; i < len(src); {
		if !m.first[src[i]] {
			i++
			continue
		}
		matched := 0
		for _, s := range m.secrets {
			rest := src[i:]
			if len(rest) >= len(s) {
				if string(rest[:len(s)]) == s {
					matched = len(s)
					break
				}
			} else if !final && string(rest) == s[:len(rest)] {
				// A longer secret than any that matches here may still: wait for it.
				return append(dst, src[start:i]...), i
			}
		}
		if matched == 0 {
			i++
			continue
		}
		dst = append(append(dst, src[start:i]...), mask...)
		i += matched
		start = i
	}
	return append(dst, src[start:]...), len(src)
}

// maskWriter masks a stream of writes on their way to w: a secret split across two writes
// (a pipe read in two, a log chunk boundary) is masked whole. Close writes what it holds
// back. It is safe for concurrent use, but the writes of two streams at once (a task's
// stdout and stderr) interleave in it, which could hide a secret split between them from it:
// the shell executor takes a writer per stream (Stream).
type maskWriter struct {
	m  *masker
	w  io.Writer
	mu sync.Mutex
	// held is what may be the beginning of a secret.
	held []byte
	out  []byte
}

var _ executor.StreamLog = (*maskWriter)(nil)

func (m *masker) writer(w io.Writer) *maskWriter { return &maskWriter{m: m, w: w} }

// Write implements io.Writer. It never fails, as the log sink it writes to does not.
func (mw *maskWriter) Write(p []byte) (int, error) {
	if len(mw.m.secrets) == 0 {
		return mw.w.Write(p)
	}
	mw.mu.Lock()
	defer mw.mu.Unlock()
	mw.held = append(mw.held, p...)
	var n int
	mw.out, n = mw.m.mask(mw.out[:0], mw.held, false)
	mw.held = mw.held[:copy(mw.held, mw.held[n:])]
	if len(mw.out) > 0 {
		_, _ = mw.w.Write(mw.out)
	}
	return len(p), nil
}

// Close writes what is held back, masked.
func (mw *maskWriter) Close() error {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	if len(mw.held) == 0 {
		return nil
	}
	mw.out, _ = mw.m.mask(mw.out[:0], mw.held, true)
	mw.held = mw.held[:0]
	_, err := mw.w.Write(mw.out)
	return err
}

// Stream implements executor.StreamLog: a writer of its own for one output stream, to the
// same log.
func (mw *maskWriter) Stream() io.WriteCloser { return mw.m.writer(mw.w) }
