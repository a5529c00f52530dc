// Package failover is the failover and fencing protocol of zksched: the leader's Coordinator,
// which fails lost nodes over, and every node's Guard, which stops a node's work before the
// leader can hand it to others and ends a node that was fenced. It is the one place where
// ZooKeeper (package registry) and PostgreSQL (package dao) meet.
//
// # Guarantees
//
// A task instance is never lost (a lost worker's running tasks go back to the queue), never
// runs twice at the same time (the old run has stopped before the new one can start, outside
// the frozen-process case below), and its result is committed once (every write carries the
// attempt's fencing token; a stale attempt's writes match no row).
//
// # The state of one identity, as the leader sees it
//
//	registered ──znode gone──▶ absent ──delay passed──▶ fenced ──requeue/release──▶ finished
//	    ▲                        │                         (marker phase fenced)    (marker phase finished)
//	    └──── registered again ──┘
//
// Identities are host:port_startMillis: a restarted process is a new identity, so an old
// incarnation can be fenced while the new one works.
//
// # Leader side (Coordinator, on the elected master only)
//
//  1. Resync: list nodes/masters and nodes/workers (setting children watches), on every watch
//     event, at the start of each leadership term and on a periodic sweep. An identity that
//     was registered at the last look and is gone now is absent, as is one that owns running
//     work in PostgreSQL (a worker_id of a running task, an owner of an unfinished workflow)
//     while neither registered nor fenced: its loss happened before this term, or the event
//     was missed. Watches only make this fast; the sweep makes it correct.
//  2. Wait: an absent identity is failed over only after its znode is gone — ZooKeeper
//     expired its session, the leader never decides that on a timer of its own — and a
//     further failover.delay has passed since the leader saw it. The delay covers the node's
//     own stop (its watchdog tick and its tasks' kill grace; config validation enforces
//     delay >= kill grace + 1 s, conf.KillGraceMargin, within one config file). Each worker
//     also publishes its kill grace in its NodeInfo; the leader keeps the value it read while
//     the worker was registered and waits at least that plus the margin, whatever its own
//     config says. An identity
//     registered again before then is left alone.
//  3. Fence, in one ZooKeeper multi: check the leader's own election znode (a deposed leader
//     fences nothing), create and delete nodes/<role>s/<id> (fails if the node is back), and
//     create failover-finish-nodes/<role>/<id> with phase fenced. From this moment the
//     identity can never register again, so giving its work away is safe. A marker already
//     there means an earlier leader fenced it: go on to step 4.
//  4. In one PostgreSQL transaction: a worker's running tasks go back to queued (attempt
//     outcome failed_over, failover_count + 1, retries untouched; one whose kill was requested
//     ends killed instead, and its master is woken); a master's unfinished
//     workflows lose their owner, the masters are woken with their ids, and another master
//     locks them and continues without re-running tasks that succeeded or still run on live
//     workers. A failover_event row
//     records it, keyed by identity. Idempotent: a repeat finds nothing running and adds 0.
//  5. Set the marker's phase to finished with the counts (leader-checked multi). A leader that
//     crashes between 3 and 5 leaves a marker in phase fenced; the next leader learns of it on
//     its first sweep and repeats 4 and 5. If a fenced identity is later found owning work
//     again (a claim in flight when it was cut off), 4 and 5 run again.
//  6. Finished markers older than failover.marker-retention are deleted on a sweep.
//
// A marker counts only if a leader could have made it, and step 3 succeeds only while the
// identity's znode is gone. A marker of an identity that is registered at the sweep is no
// fence: someone who reached an unprotected ZooKeeper (no registry.auth-file) made it. The
// leader logs it once a term and leaves the identity's work where it is, and the node goes on
// (registry/doc.go); should the identity be lost later, it is failed over as in steps 2–5, the
// marker met in step 3 as already fenced. A marker of an identity this term saw lost and is
// still waiting for does not cut the wait short either. With registry.auth-file only the
// cluster's nodes can create markers at all.
//
// # Node side (Guard, on every master and worker)
//
//   - The node takes work only while Active: its client is connected, its registration holds
//     under the current session, and its last contact with ZooKeeper is less than the session
//     timeout ago. Active is decided at each call, not read from the watchdog's last tick, and a
//     worker asks it under the lock its Interrupt takes, as it starts each attempt: a claim that
//     returns after the deadline (it waited on a lock, a slow database, a freeze) starts
//     nothing and hands its tasks back unstarted. Disconnected, the node stops claiming
//     (workers) and advancing (masters) at once.
//   - The watchdog: once the node has been cut off for the negotiated session timeout since its
//     last contact (registry.Client.LastContact: the send time of the last request the
//     ensemble's leader answered, a Sync probe or a handshake, by registry.Now, CLOCK_BOOTTIME,
//     which counts a suspend of the machine as the servers' clocks do), its session may have
//     expired; a worker stops its running tasks (SIGTERM to each task's processes, SIGKILL
//     after the kill grace) and hands them back under its own token (outcome interrupted).
//     Lost is sticky: until the watchdog has seen the node live again, Active stays false and
//     every tick (100 ms) stops the running work again, so nothing started around the deadline
//     survives it. After a freeze it fires as soon as the process runs again. It acts before it
//     logs, and a node's log output never blocks (lines are dropped and counted instead): a
//     stalled log pipe cannot hold a stop up. The guard lives until the node has left the
//     registry: a graceful stop keeps it. With registry.on-lost = keep-running the work goes on
//     instead (at-least-once, with overlap possible; results are still committed once).
//   - Fenced (its marker appears — it watches its own marker path — while its znode is gone, or
//     re-registration after an expiry finds it): the node logs who fenced it and exits with
//     code 75 at once, without a
//     graceful stop or deferred cleanups (closing the database would wait for queries a cut
//     link holds); the supervisors of its tasks kill all their processes when they see it gone. A supervisor
//     (systemd Restart=on-failure) starts it again as a new identity.
//   - Not fenced after an expiry: the registration re-registers the same identity through the
//     fenced multi and the node resumes.
//
// # Why the old run has stopped before the new one starts
//
// The server expires a session no sooner than the session timeout after the last request it
// received, which is no earlier than the node's LastContact. The node's watchdog kills its
// tasks at LastContact + timeout, and they are gone within the kill grace. The leader requeues
// them failover.delay after it sees the expiry, which is later still. A late write from the old
// run carries the old token and changes nothing. That holds for the one write a worker makes
// about a workflow instance too: the end of a workflow of one task, in the statement that
// records the task's end, only for a row that statement's token check let through, and only
// while no master owns the instance (owner NULL, the row locked with SKIP LOCKED).
//
// The exception is a node whose own process was frozen past the deadline: its watchdog cannot
// run, and its tasks live in processes of their own. For a worker stopped by a signal
// (SIGSTOP, a debugger), each task's supervisor sees its parent in state T and kills the task
// once that has lasted the session timeout, so there is no overlap. For a freeze the
// supervisors cannot see (the process descheduled without being stopped), the tasks may go on
// and overlap the new run until the worker wakes; its watchdog then stops them at once, and
// whatever they try to commit is refused by the token.
package failover
