//go:build !faultinject

package faultinject

// Point marks a point where the fault tests crash a node; it does nothing in a normal build
// (see inject.go).
func Point(string) {}

// Supervisor returns self: a worker runs its own binary as its tasks' supervisor (see doc.go
// for the test build's).
func Supervisor(self string) string { return self }
