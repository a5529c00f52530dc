// Package alarm holds Alarm, a timer of a part's event loop that is armed or not, on the
// injected clock: the master's new-instance claim and its sweep, the worker's gather and
// relook.
package alarm

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Alarm is a timer of a part's loop that is armed or not: its channel is nil while it is not,
// so a select on it waits for nothing. A new arming replaces the last one. Its zero value is
// not ready to use: make one with New.
type Alarm struct {
	clock clockwork.Clock
	t     clockwork.Timer
}

// New returns a disarmed Alarm on clock.
func New(clock clockwork.Clock) *Alarm { return &Alarm{clock: clock} }

// Set arms the alarm to fire d from now.
func (a *Alarm) Set(d time.Duration) {
	a.Stop()
	a.t = a.clock.NewTimer(d)
}

// Stop disarms the alarm.
func (a *Alarm) Stop() {
	if a.t != nil {
		a.t.Stop()
		a.t = nil
	}
}

// Fired disarms the alarm once its channel has delivered.
func (a *Alarm) Fired() { a.t = nil }

// Armed reports whether the alarm is set and has not fired or been stopped since.
func (a *Alarm) Armed() bool { return a.t != nil }

// C is the alarm's channel, nil while it is not armed.
func (a *Alarm) C() <-chan time.Time {
	if a.t == nil {
		return nil
	}
	return a.t.Chan()
}
