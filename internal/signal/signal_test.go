package signal

import "testing"

// TestZeroDoesNothing: a Test never Init'ed takes any number of signals without blocking and
// without allocating.
func TestZeroDoesNothing(t *testing.T) {
	var s Test[int]
	if n := testing.AllocsPerRun(100, func() { s.Signal(1) }); n != 0 {
		t.Errorf("Signal on a zero Test allocates %v times, want 0", n)
	}
}

// TestKeepsOneUntilTaken: an Init'ed Test keeps the first value not taken and drops the ones
// after it, so Signal never blocks; Clear drops the kept one.
func TestKeepsOneUntilTaken(t *testing.T) {
	t.Parallel()
	var s Test[int]
	s.Init()
	s.Signal(1)
	s.Signal(2)
	if got := s.Wait(t, "the first value"); got != 1 {
		t.Errorf("Wait = %d, want 1", got)
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
