//go:build !faultinject

package master

// injectFault marks a point where the end-to-end tests crash a master; it does nothing in a
// normal build (see fault_inject.go).
func injectFault(string) {}
