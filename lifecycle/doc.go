// Package lifecycle is the one place where the state of a workflow instance or a task
// instance changes. Go decides here: which tasks an advance creates and when an instance
// ends (Decide, Outcome), what an attempt's end makes of its task (Next), which roots a
// submission starts with (Roots), which skipped tasks a rerun gives back (below), and what
// the statements need to know of a definition (Facts, kept in its row when stored). Each
// transition is then carried out by one dao statement named for the transition and the
// condition its write carries; nothing outside this package and dao calls those statements
// (TestOnlyLifecycleChangesState). Transitions lists them all.
//
// # Guarantees
//
// Every write of a state is conditioned on the state it expects, and on who may make it: a
// worker's writes carry the attempt's fencing token (task id, worker, attempt), a master's
// the instance's owner, the leader's a fenced identity. A write whose condition no longer
// holds matches no row, so two actors racing for one instance never both win: a task's result
// is committed once, a stale owner advances nothing, and an operator's action either applies
// whole or is refused with dao.ConflictError.
//
// # A workflow instance
//
//	submit ─┬─ no cap: with its roots ──▶ running, unowned ──its one task ends (worker)──▶ ended
//	        │                                 │          ▲
//	        │              taken, claimed     │          │ released (leader: owner fenced)
//	        │              (master)           ▼          │
//	        └─▶ submitted ──claimed──────▶ running, owned ──ended, timed out (master)──▶ ended
//	            (no roots,   admitted (master, under the cap;
//	            capped or    a keyed one: first of its key, under its max)
//	            keyed)
//
//	ended: succeeded | failed | stopped
//	submitted, running ──stopped (operator; a submission's when-full: cancel-oldest)──▶ stopped
//	ended ──rerun of its failed and killed tasks (operator)──▶ running, unowned
//
// An instance is created by a submission (Submit, SubmitQueued, SubmitNow, SubmitMany: the
// command line, the API, schedules, triggers, backfills and the benchmark all come in here).
// A workflow file is stored by master.Define, the one way for a definition: the definition
// with its facts, its schedule, the instance asked for (through Submit) and their audit rows,
// in one transaction.
// Without a cap it starts running at once with its root tasks queued and no owner: the first
// tasks start on the workers' wake-up, and a master takes it up when one of them ends
// (Driver.AdvanceUnowned, which finishes it or takes it). A capped one waits, submitted,
// until a master admits it under its workflow's max-active-instances (Driver.Admit). An
// instance of a workflow with a concurrency: key has its key rendered from its params at
// submission (a key that renders empty refuses it) and waits, submitted, likewise: a master
// admits it (Driver.AdmitKeys) only while fewer than the key's max instances of its workflow
// and key run, within max-active-instances too if it has one, and only once every instance
// of its key submitted before it has been admitted — a key's instances start in id order,
// which is their submissions' order. Everything that counts a key and acts on the count holds
// the key's advisory lock until it commits (taken after the workflow's, where both are): the
// admission, a submission whose when-full is skip (refused when the key is full: dao.ErrKeyFull)
// or cancel-oldest (which stops the key's oldest active instance in its own transaction, with
// an audit row), and a rerun that would reopen an ended instance of the key (refused while
// the key is full or an instance of it waits: a reopened instance runs at once, and would
// run out of turn). The end or the stop of an instance with a key wakes the masters with its
// id, so they look at its key alone; a poll looks at every key with an instance waiting. A
// keyed instance is never ended by its worker's statement (it always has a master to wake). A master
// that owns an instance advances it (Driver.AdvanceOwned): Decide says which tasks to create
// and whether it has ended; it fails one past its workflow timeout and kills its tasks. A
// single-task workflow without a cap or a timeout needs no master: the worker's statement
// that records its task's end ends it too, with the end Decide would give
// (TestSingleTaskEndMatchesDecide). When a master is fenced the leader releases its
// instances (ReleaseLostMaster) and another master goes on; instances whose last task's
// wake-up no master heard are found by the sweep (Driver.SweepAndAdvance). An operator
// stops an active instance (Stop) or reruns the failed and killed tasks of one (RerunTask,
// RerunWorkflow), which reopens it if it had ended: running, unowned.
//
// # A task instance
//
//	created ──▶ waiting (a wait task) ──signalled (operator) · timed out (master)──▶ succeeded, failed
//	   │
//	created ──▶ queued ──claimed (worker)──▶ running ──attempt ended (worker)──▶ succeeded
//	   │          ▲  │                          │                               failed
//	   │          │  └──killed (operator, stop, │                               killed
//	   │          │     workflow timeout)──▶ killed
//	   │          └── retry · hand-back · interrupted (worker) · failed over (leader)
//	   ├──▶ skipped (its trigger or its when: condition says it does not run)
//	   └──▶ failed (its when: condition could not be decided)
//	failed, killed ──rerun (operator)──▶ queued
//
// A wait task is created waiting instead of queued: no worker claims it. A signal ends it,
// succeeded with its output or failed (Signal); past its timeout a master ends it as its
// on-timeout says (EndWaitsPastTimeout), both through one statement conditioned on waiting,
// so a signal racing the timeout, or a second signal, never applies twice. A kill or a stop
// kills it at once.
//
// A master creates task instances when their upstream is terminal: queued if their trigger
// holds (by default: it all succeeded) and their when: condition renders true, skipped if
// either says no, failed if the condition cannot be decided (Decide). A rerun of such a
// failed task, which never ran, deletes it for the master to create again. A worker claims a queued one whose retry wait has passed and
// whose pool has a free slot: it runs under a new attempt, whose fencing token every later
// write carries. The attempt's end moves it on by Next: succeeded; a failure or a timeout back
// to the queue while retries last, failed after; a hand-back or an interruption back to the
// queue without counting. A kill of a running task is a request its worker carries out (the
// attempt ends killed); a task whose kill was requested never goes back to the queue. The
// leader puts the running tasks of a fenced worker back in the queue (RequeueLostWorker),
// outcome failed_over, or ends them killed where a kill was requested.
//
// # Every transition, who makes it, its condition, its statement
//
// Workflow instances:
//
//	created      submit                 definition stored; when-full: skip refuses  WorkflowCreate,
//	                                    at the cap or a full key unless queued      WorkflowCreateGrouped,
//	                                    (backfill)                                  WorkflowCreateMany
//	claimed      master                 unowned; new without roots, or running      WorkflowClaimUnowned
//	                                    with a timeout
//	claimed      master (sweep)         unowned, running, nothing queued, running   WorkflowClaimStranded
//	                                    or waiting for dao.StrandedAfter
//	admitted     master                 unowned, submitted, capped, no key, under   WorkflowAdmitIfUnderCap
//	                                    the cap
//	admitted     master                 unowned, submitted, keyed, first of its     WorkflowAdmitKeyedIfUnderMax
//	                                    key waiting, under its max and the cap
//	                                    (workflow and key locks)
//	taken        master (advance)       unowned, running, locked by the advance     WorkflowTakeIfUnowned
//	ended        master (advance)       running; owned by it, or unowned and locked WorkflowFinishManyIfOwnedOrUnowned
//	timed out    master                 running, owned by it                        WorkflowTimeOutIfOwned
//	                                                                                (WorkflowFinishIfOwned)
//	ended        worker (attempt's end) unowned, running, one task, no cap, no      TaskFinishManyIfRunning
//	                                    key, no timeout
//	released     leader                 unfinished, owned by a fenced master        WorkflowReleaseIfOwnedBy
//	stopped      operator               submitted or running                        WorkflowStopIfActive
//	stopped      submit (when-full:     submitted or running, the oldest active of  WorkflowStopIfActive
//	             cancel-oldest)         a full key (key lock)
//	reopened     operator (rerun)       ended; with a key: the key not full and     TaskRerunIfFailedOrKilled
//	                                    none of it waiting (key lock)
//
// Task instances:
//
//	created      master (advance)       its instance locked by the advance          TaskCreateMany,
//	                                                                                WorkflowCreate (roots)
//	claimed      worker                 queued, retry wait passed, its group, a     TaskClaimQueued,
//	                                    free pool slot                              TaskClaimQueuedUnpooled
//	ended        worker                 running under the attempt's token           TaskFinishManyIfRunning,
//	                                                                                TaskFinishIfRunning
//	failed over  leader                 running on a fenced worker                  TaskRequeueIfRunningOnWorker
//	killed       operator, stop,        queued, waiting (at once); running          TaskKillIfQueuedOrRunning,
//	             workflow timeout       (requested)                                 WorkflowStopIfActive,
//	                                                                                WorkflowTimeOutIfOwned
//	rerun        operator               failed or killed                            TaskRerunIfFailedOrKilled
//	signalled    operator (API, CLI)    waiting                                     TaskEndIfWaiting
//	wait timed   master                 waiting, past its wait_until (database      TaskEndIfWaiting
//	out                                 clock)
//
// The statements live in dao: workflow_instance.go (instances; the submissions shared on a
// pool in workflow_create_grouped.go; concurrency keys in workflow_concurrency.go), task_instance.go (claims, attempts' ends, task
// creation), task_action.go (the operators'), failover_event.go (the leader's). Failover's
// side of the protocol (who is fenced, and when) is package failover's.
package lifecycle
