//go:build !faultinject

package failover

// injectFault marks a point of the protocol where the fault tests crash the leader; it does
// nothing in a normal build (see fault_inject.go).
func injectFault(string) {}
