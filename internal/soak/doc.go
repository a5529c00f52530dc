// Package soak is zksched's randomized fault soak: a cluster of real processes on ZooKeeper
// servers and a PostgreSQL of its own, a mixed workload, and a nemesis that picks faults at
// random from a seeded generator, judged at the end by what the tasks really ran
// (internal/history).
//
// The cluster is a 3-server ZooKeeper ensemble, a PostgreSQL server, and 2 masters and 3
// workers (by default) started from the zksched binary, each
// reaching every ZooKeeper server through a proxy of its own and PostgreSQL through another,
// so one node's links can be cut while the others' stay up. A supervisor restarts every node
// that exits, as a new identity on the same port, as systemd would.
//
// The workload submits workflows through the masters' API: DAGs, shell tasks that fail their
// first attempts and retry with no interval, timeouts, pools, agent tasks on a test model
// server, wait tasks, a for-each of six items two at a time, a workflow task starting a
// child workflow, a workflow with a concurrency key (three runs of a thread drawn at random
// submitted at once, to run one at a time), an agent that pauses at a wait step, webhook
// deliveries sent again to other masters, tasks that produce assets with workflows started by
// their events (and events emitted through the API), sensors on a time, a file and an HTTP
// server of the soak's whose conditions the workload makes true after a delay (or never), and,
// acting as an operator, kills, stops, reruns and signals to wait tasks and paused agents (approve,
// reject, a second signal, none at all). Every shell task records its
// runs in the history's run log, which lives on another database than the one the nemesis
// restarts.
//
// The nemesis, every few seconds: kill -9 of a worker, a master or the leader; SIGSTOP and
// SIGCONT short of and past the session timeout, of a node or of a worker with all its tasks
// (a frozen machine); a node's ZooKeeper or PostgreSQL link cut and healed; a ZooKeeper
// server killed (leader or follower) and restarted, or the leader frozen; quorum lost and
// regained; PostgreSQL restarted; a node's log output left unread; SIGTERM during a cut.
//
// After the chaos everything heals, and the soak waits for every workflow to end. The verdict:
// no two runs of a task overlap (except those a whole-machine freeze explains, reported
// apart), one committed result per task, nothing lost, every workflow ends, no task left
// behind, no task starts again after an operator killed it, every node exits only by the
// nemesis's kill or signal or with code 75 (fenced), and every fenced node has exited.
//
// The same seed replays the same schedule of faults and submissions: the same ticks, and at
// each the same draws. What the processes do in between is not deterministic, so a replay
// reproduces the conditions, not the timing; where a tick's target is busy or restarting in
// one run and not in another, that tick chooses differently, and only that tick.
//
// Beyond the history checker's rules the soak checks pools (their runs alive at once never
// outnumber the limit), orphans (no run alive 500 ms after its worker's process exited),
// signals (one accepted per task, applied as it said: a wait task's output, or a paused
// agent's wait step checkpointed with it and its last step using it), for-each tasks (items
// created in index order, never more alive at once than max-parallel, a frozen worker's runs
// aside), child workflows (one child per workflow task, ending as it does; no child-only
// instance without a parent), concurrency keys (a key's instances never more than its max
// at once by the database's start and end times, and started in submit order), assets (one
// event per success of a producing task, each event taken by at most one run of each
// consumer, every run on the events its all or any asks for, and none left to start once the
// masters have settled) and sensors (each ends as its condition's time says: succeeded once
// true, its on-timeout's end only if still false at its timeout).
//
// Run and its helpers take a testing.TB: the soak is a test (e2e TestSoak), and
// `zksched-bench soak` runs it outside one through Main, which stands in for the test.
package soak
