// Package faultinject holds the hooks the fault tests have in the zksched binary. Each does
// nothing in a normal build; a build with the tag faultinject, which only the test binaries
// get (internal/testcluster), acts on an environment variable:
//
//   - Point marks where the fault tests crash a node: between fencing and requeueing in the
//     failover protocol (failover), in the middle of a fire (master) or of a webhook
//     delivery (lifecycle), between a workflow sensor's creation and its look for its run
//     (lifecycle), and between the steps of a tool-calling agent's loop
//     (worker/executor). It kills the process with SIGKILL at the point ZKSCHED_TEST_FAULT
//     names.
//   - Supervisor picks the program a worker runs as its shell tasks' supervisor: the one
//     ZKSCHED_TEST_SUPERVISOR names, else the binary itself. The test binary is built with
//     -race, whose runtime start costs several times a normal one's; a supervisor starts
//     with every task, and a test cluster under load on a small machine spends more on those
//     starts than on anything else. The tests run a normal build as the supervisor instead:
//     the one deployments run.
package faultinject
