// Package faultinject marks the points where the fault tests crash a node: between fencing
// and requeueing in the failover protocol (failover), and in the middle of a fire (master).
// Point does nothing in a normal build; in a build with the tag faultinject, which only the
// test binaries get (internal/testcluster), it kills the process with SIGKILL at the point
// the environment variable ZKSCHED_TEST_FAULT names.
package faultinject
