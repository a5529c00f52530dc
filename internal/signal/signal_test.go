package signal

import "testing"

// TestZeroDoesNothing: a Test never Init'ed takes any number of signals without blocking and
// without allocating, and SignalWith does not make the value.
func TestZeroDoesNothing(t *testing.T) {
	var s Test[int]
	if n := testing.AllocsPerRun(100, func() { s.Signal(1) }); n != 0 {
		t.Errorf("Signal on a zero Test allocates %v times, want 0", n)
	}
	s.SignalWith(func() int {
		t.Error("SignalWith on a zero Test made its value")
		return 0
	})
}

// TestKeepsTheLastUntilTaken: an Init'ed Test keeps the last value not taken in place of the
// ones before it, so Signal never blocks; Clear drops the kept one.
func TestKeepsTheLastUntilTaken(t *testing.T) {
	t.Parallel()
	var s Test[int]
	s.Init()
	s.Signal(1)
	s.Signal(2)
	if got := s.Wait(t, "the last value"); got != 2 {
		t.Errorf("Wait = %d, want 2", got)
	}
	select {
	case v := <-s.C():
		t.Errorf("a second value %d was kept", v)
	default:
	}
	s.Signal(3)
	s.Clear()
	select {
	case v := <-s.C():
		t.Errorf("value %d left after Clear", v)
	default:
	}
	go s.Signal(4)
	if got := s.Wait(t, "a value signalled later"); got != 4 {
		t.Errorf("Wait = %d, want 4", got)
	}
}

// TestSignalWith: an Init'ed Test signals the value SignalWith makes.
func TestSignalWith(t *testing.T) {
	t.Parallel()
	var s Test[string]
	s.Init()
	s.SignalWith(func() string { return "made" })
	if got := s.Wait(t, "the made value"); got != "made" {
		t.Errorf("Wait = %q, want made", got)
	}
}
