package alarm_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/internal/alarm"
)

// fires reports whether a's channel delivers, and disarms a when it does, as a loop does.
func fires(a *alarm.Alarm) bool {
	select {
	case <-a.C():
		a.Fired()
		return true
	default:
		return false
	}
}

func TestAlarm(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	a := alarm.New(clock)
	if a.Armed() || a.C() != nil {
		t.Fatalf("new alarm: armed %v, channel %v; want disarmed with a nil channel", a.Armed(), a.C())
	}

	a.Set(time.Second)
	if !a.Armed() || a.C() == nil {
		t.Fatalf("after Set: armed %v, channel %v; want armed with a channel", a.Armed(), a.C())
	}
	clock.Advance(999 * time.Millisecond)
	if fires(a) {
		t.Fatal("alarm fired before its second")
	}
	clock.Advance(time.Millisecond)
	if !fires(a) {
		t.Fatal("alarm did not fire at its second")
	}
	if a.Armed() || a.C() != nil {
		t.Fatalf("after Fired: armed %v, channel %v; want disarmed with a nil channel", a.Armed(), a.C())
	}

	a.Set(time.Second)
	a.Stop()
	if a.Armed() || a.C() != nil {
		t.Fatalf("after Stop: armed %v, channel %v; want disarmed with a nil channel", a.Armed(), a.C())
	}
	clock.Advance(2 * time.Second)
	if fires(a) {
		t.Fatal("stopped alarm fired")
	}
	a.Stop() // Stopping a disarmed alarm does nothing.

	// A new arming replaces the last one: the first deadline passes without a fire.
	a.Set(time.Second)
	old := a.C()
	clock.Advance(500 * time.Millisecond)
	a.Set(time.Second)
	clock.Advance(500 * time.Millisecond)
	select {
	case <-old:
		t.Fatal("the replaced arming fired")
	default:
	}
	if fires(a) {
		t.Fatal("alarm fired at the replaced arming's deadline")
	}
	clock.Advance(500 * time.Millisecond)
	if !fires(a) {
		t.Fatal("alarm did not fire a second after it was set again")
	}
}
