// Package signal holds Test, the one shape of a test signal in zksched (after River's
// testsignal.TestSignal): a typed point in product code that a test may wait on. Outside tests
// a Test is never Init'ed, and then Signal does nothing. It does not import testing, so the
// product packages that hold a Test link no test code; the waits take the part of testing.TB
// they use (TB).
package signal

import "time"

// WaitTimeout is how long Wait waits for a value before it fails the test.
const WaitTimeout = 15 * time.Second

// TB is what a wait needs of a test: testing.TB has it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Test is a signal a part sends at a point a test may wait for. Its zero value is ready to
// use and does nothing: Signal on a Test that was never Init'ed returns at once, without
// allocating. Once Init'ed it keeps the last value a test has not taken yet: Signal never
// blocks, and replaces a value still waiting, so a test that waits finds the mark of what
// happened since it last looked (or before), with the latest value, and looks at what it
// waits for again.
type Test[T any] struct {
	c chan T
}

// Init makes s keep what is signalled for a test to take. Call it before the code that
// signals starts, as it is not synchronised with Signal.
func (s *Test[T]) Init() { s.c = make(chan T, 1) }

// Signal sends v to a test that waits on s, without blocking, in place of a value not taken
// yet; it does nothing if s was never Init'ed.
func (s *Test[T]) Signal(v T) {
	if s.c == nil {
		return
	}
	for {
		select {
		case s.c <- v:
			return
		default:
		}
		select {
		case <-s.c:
		default:
		}
	}
}

// SignalWith signals the value f returns. It calls f only if s was Init'ed: a value that
// costs something to make (a copy of a loop's state) costs nothing outside tests.
func (s *Test[T]) SignalWith(f func() T) {
	if s.c == nil {
		return
	}
	s.Signal(f())
}

// C is the channel of s's values, for a test's select. s must have been Init'ed.
func (s *Test[T]) C() <-chan T {
	if s.c == nil {
		panic("signal: C of a Test that was never Init'ed")
	}
	return s.c
}

// Clear drops a value not taken yet, so that the next Wait waits for one signalled after it.
func (s *Test[T]) Clear() {
	select {
	case <-s.C():
	default:
	}
}

// Wait returns the next value of s (a value not taken yet at once), and fails the test if
// none comes within WaitTimeout; what names it in the failure.
func (s *Test[T]) Wait(tb TB, what string) T {
	tb.Helper()
	select {
	case v := <-s.C():
		return v
	case <-time.After(WaitTimeout):
		tb.Fatalf("timed out after %v waiting for %s", WaitTimeout, what)
	}
	var zero T
	return zero
}
