package testenv

import (
	"testing"
	"time"
)

// WaitFor checks cond every interval until it holds, and fails the test if it does not
// within d. It is for a condition that gives no signal of its own, such as a real process's
// answer over HTTP or a row another process writes: where there is a signal (a channel, a
// ZooKeeper watch, a Changed channel), wait on it instead. The interval is the caller's
// because a check can cost something: a query, a log file read whole, a wrong token counted
// against a rate limit.
func WaitFor(t testing.TB, d, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}
