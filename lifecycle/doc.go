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
//	        │              taken, claimed     │          │ released (leader: owner fenced;
//	        │              (master)           ▼          │ master: only waiting tasks live)
//	        └─▶ submitted ──claimed──────▶ running, owned ──ended, timed out (master)──▶ ended
//	            (no roots,   admitted (master, under the cap;
//	            capped or    a keyed one: first of its key, under its max)
//	            keyed)
//
//	ended: succeeded | failed | stopped
//	submitted, running ──stopped (operator; a submission's when-full: cancel-oldest;
//	                     a child: its parent stopped, timed out or its task killed)──▶ stopped
//	ended ──rerun of its failed and killed tasks (operator)──▶ running, unowned
//	ended ──past retention.instances, no active parent or child (leader)──▶ deleted
//
// The last is no change of state: the leader's retention (master.Retention, dao's Purge
// statements) deletes an ended instance with its tasks once it is past its period, taking it
// FOR UPDATE SKIP LOCKED, so a rerun that holds it wins and the purge passes it by.
//
// An instance is created by a Submission, prepared in one step (its roots and its concurrency
// key) and created in the caller's transaction (Submit), in a statement shared with the
// submissions of the same moment (SubmitNow) or many alike at once (SubmitMany): the command
// line, the API, schedules (a Firer's fires: the masters' cron, TriggerSchedule, Backfill),
// webhook deliveries (Deliver: the delivery's row, unique on its hook and id, and the
// instance in one transaction, so a delivery starts one run however often and wherever it
// arrives) and the benchmarks all come in here. A child workflow's instance is submitted the
// same way, by the master's advance of its parent (below). A workflow file is stored by
// Define, the one way for a definition: the definition with its facts, its schedule, its hooks,
// the instance asked for (through Submit) and their audit rows, in one transaction.
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
// single-task workflow without a cap, a key or a timeout, not a child, needs no master: the
// worker's statement
// that records its task's end ends it too, with the end Decide would give
// (TestSingleTaskEndMatchesDecide). When a master is fenced the leader releases its
// instances (ReleaseLostMaster) and another master goes on; instances whose last task's
// wake-up no master heard are found by the sweep (Driver.SweepAndAdvance). An operator
// stops an active instance (Stop) or reruns the failed and killed tasks of one (RerunTask,
// RerunWorkflow), which reopens it if it had ended: running, unowned.
//
// # A child workflow
//
//	workflow task ready ──child started (master)──▶ waiting ─┬─ child ended (succeeded) ──▶ succeeded
//	                                                          ├─ child ended (failed, stopped) ──▶ failed
//	                                                          └─ killed (operator, stop, timeout) ──▶ killed, child stopped
//
// A workflow task that Decide says runs starts its child in the master's advance, in the
// transaction that holds its instance locked: the child is created by Submit, like any
// submission, and the task is created waiting on it, the two linked both ways
// (TaskCreateWaitingOnChild). A master killed in the middle commits neither; the next advance
// creates both, once, since only the holder of the instance's lock creates its tasks. A task
// whose params do not render, whose workflow or version is not stored, or whose child would
// be more than MaxNesting levels below the instance submitted is created failed instead.
// The child runs as any instance. Each statement that ends an instance ends its parent task
// in the same transaction (TaskEndIfChildEnded): a master's end (WorkflowFinishManyIfOwnedOrUnowned,
// with the child's final output), its timeout (WorkflowFinishIfOwned) and its stop
// (WorkflowStopIfActive); the worker's statement that ends a one-task instance leaves a child
// to a master. So a child never ends without its parent task, whatever fails when, and the
// task's end wakes the parent's master like any task's end (a lost wake-up is caught by the
// resync, or by the sweep for an unowned parent). Stopping an instance, its timeout, or a
// kill of its waiting workflow task stops its children, and theirs in turn, in the same
// transaction; it locks the children before it kills the tasks waiting on them, the order a
// child's end takes (the child, then its parent task), so the two racing never deadlock
// (TestStopRacingTheChildsEnd). A rerun of a failed or killed workflow task creates it again, with a new child.
//
// # A task instance
//
//	created ──▶ waiting (a wait task) ──signalled (operator) · timed out (master)──▶ succeeded, failed
//	created ──▶ waiting (a workflow task) ──its child ended──▶ succeeded, failed
//	   │
//	created ──▶ waiting (a for-each's parent) ──its items ended (master)──▶ succeeded, failed, killed
//	   │
//	created ──▶ queued ──claimed (worker)──▶ running ──attempt ended (worker)──▶ succeeded
//	   │          ▲  │                          │                               failed
//	   │          │  └──killed (operator, stop, │                               killed
//	   │          │     workflow timeout)──▶ killed
//	   │          └── retry · hand-back · interrupted (worker) · failed over (leader)
//	   ├──▶ skipped (its trigger or its when: condition says it does not run)
//	   └──▶ failed (its when: condition could not be decided)
//	failed, killed ──rerun (operator)──▶ queued (a for-each's parent: waiting)
//
//	running ──paused (worker: an agent at a wait step)──▶ waiting (a paused agent)
//	waiting (a paused agent) ──resumed (operator) · timed out, on-timeout: succeed (master)──▶ queued
//	waiting (a paused agent) ──rejected (operator) · timed out (master)──▶ failed
//	created ──▶ waiting (a time sensor) ──its time · its timeout (master)──▶ succeeded, failed, skipped
//	created ──▶ waiting (a workflow sensor) ──a run of its workflow ended as it waits for (whoever
//	                                          ends the run)──▶ succeeded
//	            waiting (a workflow sensor) ──its timeout (master)──▶ failed, skipped, succeeded
//	waiting (a sensor between checks) ──its next check due (master, TaskQueueSensorsDue)──▶ queued
//	waiting (a sensor past its timeout, on-timeout: skip) ──timed out (master)──▶ skipped
//	waiting ──killed (operator, stop, workflow timeout)──▶ killed
//
// A wait task is created waiting instead of queued: no worker claims it. A signal ends it,
// succeeded with its output or failed (Signal); past its timeout a master ends it as its
// on-timeout says (EndWaitsPastTimeout), both through one statement conditioned on waiting,
// so a signal racing the timeout, or a second signal, never applies twice. A kill or a stop
// kills it at once. An instance with nothing live but waiting tasks and no workflow timeout
// has no owner while it waits (an advance releases it, or does not take it): the end of a
// wait wakes the masters with it as a task's end does, so instances waiting for people cost
// the masters nothing while they wait.
//
// An agent task pauses at a wait step: its worker ends the attempt with the outcome paused
// through the statement of any attempt's end, under the attempt's token (a stale token
// changes nothing), and the task waits as a wait task does, paused_step naming the step, its
// slot freed and no retry counted. The same statement that ends a wait task resumes it: an
// approving signal stores its output as the wait step's checkpoint and queues the task, in
// one statement, for any worker to claim as a new attempt that goes on from the next step;
// a rejecting one fails it. The wait step's timeout ends the wait as its on-timeout says:
// failed, or resumed with an empty output. A kill or a stop kills a paused agent at once.
//
// A tool-calling agent pauses the same way, at a pseudo-step naming a tool call: at
// tool-call:T.S when a call of a tool that is not idempotent started in an attempt that died
// before it ended (its fate is for a person to tell: an approving signal's text becomes the
// call's result; a rejecting one fails the task), and at tool-approval:T.S before a call of
// a tool with approve: true runs. There a rejection resumes the agent too: its text is stored
// as the checkpoint tool-rejection:T.S, which the model is given as the call's result. The
// agent's turns (agent_turn) and its calls (tool_call: started under the attempt's token
// before the tool runs, ended with its result after) are written only under a valid token.
//
// A sensor (executor.Sensor) pauses the same way between its checks, at the step sensor for
// its interval: no slot is held while it waits, and the timeout of its wait (wait_until, from
// the index every wait's timeout is found by) queues it again for the next check, as a new
// attempt on any worker of its group: a batch of due sensors in one statement
// (TaskQueueSensorsDue, which skips the rows a kill or a signal holds; they decide those). Its own timeout is judged by its attempts, from its
// first check (the checkpoint sensor-state): with on-timeout: skip the last attempt pauses at
// sensor-timeout, which the sweep ends skipped. A time sensor needs no worker: it is created
// waiting, as a wait task is, its wait's timeout its time (or its own timeout, if sooner), and
// the sweep ends it as the times stored say.
//
// A workflow sensor (workflow: {name, state, since}) needs no worker either: the advance that
// decides it runs renders its since (by default its instance's creation) and creates it
// waiting at the paused step workflow-run:NAME, what it waits for beside it
// (TaskCreateWaitingOnRun), its wait's timeout its own. The end of a run of NAME ends it, in
// the transaction of that end, whatever statement makes it: a trigger on the instance's state
// (migration 00038) ends every sensor the run satisfies (ended in one of its states at or
// after its since, and not its own instance), succeeded with the run as its output, and wakes
// the masters with their instances as a task's end does. A run that ended before the
// sensor's creation committed found nothing to end: the master that created it looks once it
// has committed, after waiting for the ends in flight of NAME's runs (TaskEndIfRunEnded), and
// the masters' poll looks too, for a sensor whose creator died first. Its timeout ends it as
// its on-timeout says; a kill or a stop kills it; a rerun creates it again, to wait again.
//
// A for-each task runs once per item. When it would be queued, the advance renders its items
// (Decide) and creates, in its transaction, a parent task instance under the task's own name,
// waiting like a wait task but for its items (it records them and their count, item_count),
// and the item instances name[0], name[1], ..., queued, each with its item in its params: all
// of them, or the first max-parallel. Every later advance of the instance (an item's end
// wakes the masters) creates the next ones in index order while fewer than max-parallel are
// unended, and once all have ended ends the parent (ForEach; TaskFinishManyForEachIfWaiting,
// conditioned on the parent waiting): succeeded with the JSON array of their outputs, failed
// naming the items that did not succeed, or killed after a kill. Without items it is created
// succeeded, with the output "[]"; when its items cannot be had (a template error, text that
// is not a JSON array, more than workflow.MaxItems) it is created failed, as a when:
// condition that cannot be decided. The items are rows of the instance but no tasks of its
// spec: Decide and Outcome look at the parent alone. An advance that dies midway leaves none
// of what it created, and task instances are unique by name in their instance, so the next
// advance creates each item once. A signal never ends a parent (TaskEndIfWaiting takes wait
// tasks alone). A kill of the parent marks it and kills its items — the queued at once, the
// running by request — and no further item is created; it ends killed once they have. A
// rerun of a failed or killed for-each, named by its parent or one of its items, queues its
// failed and killed items again (the succeeded keep their outputs) and makes the parent
// wait again, for them and for the items never created. The sweep counts a parent as live
// through its items alone, so an instance whose items' last wake-up was missed is taken up.
//
// A master creates task instances when their upstream is terminal: queued if their trigger
// holds (by default: it all succeeded) and their when: condition renders true, skipped if
// either says no, failed if the condition cannot be decided (Decide). A rerun of such a
// failed task, which never ran, deletes it for the master to create again. A worker claims a queued one whose retry wait has passed and
// whose pool has a free slot: it runs under a new attempt, whose fencing token every later
// write carries. The attempt's end moves it on by Next: succeeded; a failure or a timeout back
// to the queue while retries last, failed after; a hand-back or an interruption back to the
// queue without counting. A retry is claimable from its not_before, which the attempt's end
// sets: the retry interval, or the step of the task's retry-backoff (EndOf, with the task's
// retry policy from its params); a failure its retry-on or no-retry-on refuses fails the task
// at once, its error saying why. A kill of a running task is a request its worker carries out (the
// attempt ends killed); a task whose kill was requested never goes back to the queue. The
// leader puts the running tasks of a fenced worker back in the queue (RequeueLostWorker),
// outcome failed_over, or ends them killed where a kill was requested.
//
// An end that is not the instance's own result carries its reason (dao.EndReason), written
// by the statement that ends it: a kill request records the reason with the request (an
// operator's kill, its workflow's stop or timeout), and the end keeps it.
//
// # Notifications
//
// The events people are told of follow from these transitions without any statement naming
// them: triggers of migration 00022 queue a notification row (dao.Notification) in the
// transaction of the transition, when an instance ends succeeded or failed (timeout when its
// workflow timeout failed it: its end_reason, migration 00028), when a task ends failed (after its retries, or created failed),
// and when the leader records a failover. Facts stores a definition's notify: entries as
// rules (NotifyRules) and its deadlines; a master's poll queues the passed deadlines
// (dao.DeadlineQueuePassed), which change no state.
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
//	released     master (advance)       running, owned by it; nothing live but      WorkflowReleaseIfOwned
//	                                    waiting tasks, no workflow timeout
//	ended        master (advance)       running; owned by it, or unowned and locked WorkflowFinishManyIfOwnedOrUnowned
//	timed out    master                 running, owned by it                        WorkflowTimeOutIfOwned
//	                                                                                (WorkflowFinishIfOwned)
//	ended        worker (attempt's end) unowned, running, one task, no cap, no      TaskFinishManyIfRunning
//	                                    key, no timeout, not a child
//	released     leader                 unfinished, owned by a fenced master        WorkflowReleaseIfOwnedBy
//	stopped      operator               submitted or running                        WorkflowStopIfActive
//	stopped      submit (when-full:     submitted or running, the oldest active of  WorkflowStopIfActive
//	             cancel-oldest)         a full key (key lock)
//	child        operator (stop of the  submitted or running                        WorkflowStopIfActive,
//	stopped      parent, kill of its                                                TaskKillIfQueuedOrRunning,
//	             task), master (the                                                 WorkflowTimeOutIfOwned
//	             parent's timeout)
//	reopened     operator (rerun)       ended; with a key: the key not full and     TaskRerunIfFailedOrKilled
//	                                    none of it waiting (key lock)
//
// Task instances:
//
//	created      master (advance)       its instance locked by the advance          TaskCreateMany,
//	                                                                                WorkflowCreate (roots)
//	child        master (advance)       its instance locked by the advance; the     TaskCreateWaitingOnChild
//	started                             child created in the same transaction
//	child ended  whoever ends the       waiting on the child, which has ended       TaskEndIfChildEnded
//	             child, in its
//	             transaction
//	for-each     master (advance)       a for-each's parent, waiting, its items     TaskFinishManyForEachIfWaiting
//	ended                               all ended; its instance locked
//	claimed      worker                 queued, retry wait passed, its group, a     TaskClaimQueuedShare,
//	                                    free pool slot; up to the worker's share    TaskClaimQueuedUnpooledShare
//	                                    of a burst while others have free slots     (alone: TaskClaimQueued,
//	                                                                                TaskClaimQueuedUnpooled)
//	ended        worker                 running under the attempt's token           TaskFinishManyIfRunning,
//	                                                                                TaskFinishIfRunning
//	failed over  leader                 running on a fenced worker                  TaskRequeueIfRunningOnWorker
//	killed       operator, stop,        queued, waiting (at once); running          TaskKillIfQueuedOrRunning,
//	             workflow timeout       (requested); a for-each's parent (marked)   WorkflowStopIfActive,
//	                                    and its items, by an operator               WorkflowTimeOutIfOwned
//	rerun        operator               failed or killed; a for-each's parent       TaskRerunIfFailedOrKilled
//	                                    waits again
//	paused       worker                 running under the attempt's token (an      TaskFinishManyIfRunning
//	                                    agent at a wait step); killed if a kill
//	                                    was requested
//	signalled    operator (API, CLI)    waiting, a wait task: ended                 TaskEndIfWaiting
//	resumed,     operator (API, CLI)    waiting, a paused agent: queued with the    TaskEndIfWaiting
//	rejected                            step's checkpoint, or failed
//	wait timed   master                 waiting, past its wait_until (database      TaskEndIfWaiting
//	out                                 clock); a paused agent failed or resumed
//	sensor check master                 waiting at the step sensor, past its        TaskQueueSensorsDue
//	due                                 wait_until (database clock): queued
//	run awaited  master (advance)       its instance locked; a workflow sensor,     TaskCreateWaitingOnRun
//	                                    created waiting at workflow-run:NAME
//	run ended    whoever ends the run   waiting at workflow-run:NAME; the run       TaskEndIfRunEnded
//	             (trigger), its creator ended in one of its states at or after
//	             after commit, the poll its since
//
// The statements live in dao: workflow_instance.go (instances; the submissions shared on a
// pool in workflow_create_grouped.go; concurrency keys in workflow_concurrency.go),
// task_instance.go (claims, attempts' ends, task creation), task_foreach.go (a for-each's
// parent), sensor.go (sensors due, workflow sensors), task_action.go (the operators'), child_workflow.go (child workflows),
// failover_event.go (the leader's). Failover's side of the protocol (who is fenced, and
// when) is package failover's.
package lifecycle
