//go:build !faultinject

package faultinject

// Point marks a point where the fault tests crash a node; it does nothing in a normal build
// (see inject.go).
func Point(string) {}
