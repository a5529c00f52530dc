package lifecycle

// Transition is one change of a workflow or task instance's state: who makes it, the
// condition the write carries, and the dao statement that carries it out. Transitions is the
// list doc.go draws; a test holds it, doc.go and the code together.
type Transition struct {
	Name      string
	Who       string
	Condition string
	// Statement is the dao method that carries the transition out.
	Statement string
}

// Transitions lists every state change of an instance.
var Transitions = []Transition{
	{"workflow created", "submit (CLI, API, schedule, trigger, backfill)", "definition stored; under the cap or queued unless when-full: skip; its key under its max or queued unless when-full: skip (key lock)", "WorkflowCreate"},
	{"workflow created", "submit on the pool, shared commit", "as WorkflowCreate", "WorkflowCreateGrouped"},
	{"workflow created", "bulk submit (benchmark)", "as WorkflowCreate", "WorkflowCreateMany"},
	{"workflow claimed", "master", "unowned; new without roots, or running with a timeout", "WorkflowClaimUnowned"},
	{"workflow claimed", "master (sweep)", "unowned, running, no task queued, running or waiting for StrandedAfter", "WorkflowClaimStranded"},
	{"workflow admitted", "master", "unowned, submitted, capped, no key, under the cap (admission lock)", "WorkflowAdmitIfUnderCap"},
	{"workflow admitted", "master", "unowned, submitted, keyed, first of its key waiting, under its key's max and the cap (admission and key locks)", "WorkflowAdmitKeyedIfUnderMax"},
	{"workflow taken", "master", "unowned, running, locked by this advance", "WorkflowTakeIfUnowned"},
	{"workflow released (only waiting)", "master", "running, owned by it, nothing live but waiting tasks, no workflow timeout", "WorkflowReleaseIfOwned"},
	{"task created", "master (advance)", "instance locked by its owner or unowned and locked", "TaskCreateMany"},
	{"child started", "master (advance)", "instance locked; the child created in the same transaction", "TaskCreateWaitingOnChild"},
	{"run awaited", "master (advance)", "instance locked; a workflow sensor, created waiting at workflow-run:NAME on no worker", "TaskCreateWaitingOnRun"},
	{"run ended", "whoever ends the run, in its transaction (trigger workflow_run_ended); after its creation, the master that created the sensor; the masters' poll", "waiting at workflow-run:NAME; a run of NAME ended in one of its states at or after its since", "TaskEndIfRunEnded"},
	{"for-each ended", "master (advance)", "a for-each task's parent, waiting, its items all ended; instance locked", "TaskFinishManyForEachIfWaiting"},
	{"workflow ended", "master (advance)", "running; owned by this master, or unowned and locked", "WorkflowFinishManyIfOwnedOrUnowned"},
	{"workflow ended", "master", "running; owned by this master", "WorkflowFinishIfOwned"},
	{"workflow timed out", "master", "running; owned by this master", "WorkflowTimeOutIfOwned"},
	{"task claimed", "worker", "queued; retry wait passed; group; pool slot free; up to its share of a burst", "TaskClaimQueuedShare"},
	{"task claimed", "worker (no pool known)", "queued; retry wait passed; group; up to its share of a burst", "TaskClaimQueuedUnpooledShare"},
	{"task claimed", "worker alone in its groups", "queued; retry wait passed; group; pool slot free", "TaskClaimQueued"},
	{"task claimed", "worker alone (no pool known)", "queued; retry wait passed; group", "TaskClaimQueuedUnpooled"},
	{"attempt ended", "worker", "running under the attempt's token", "TaskFinishManyIfRunning"},
	{"attempt ended", "worker (one attempt)", "running under the attempt's token", "TaskFinishIfRunning"},
	{"workflow ended", "worker (in its attempt's end)", "unowned, running, one task, no cap, no key, no timeout, not a child", "TaskFinishManyIfRunning"},
	{"child ended", "whoever ends the child, in the same transaction", "waiting on the child, which has ended", "TaskEndIfChildEnded"},
	{"task failed over", "leader", "running on a fenced worker", "TaskRequeueIfRunningOnWorker"},
	{"workflow released", "leader", "unfinished, owned by a fenced master", "WorkflowReleaseIfOwnedBy"},
	{"task killed", "operator (API, UI)", "queued, waiting or running; a for-each's parent and its items", "TaskKillIfQueuedOrRunning"},
	{"agent paused", "worker (an agent at a wait step)", "running under the attempt's token", "TaskFinishManyIfRunning"},
	{"task signalled", "operator (API, CLI, UI)", "waiting, a wait task", "TaskEndIfWaiting"},
	{"paused agent resumed or rejected", "operator (API, CLI, UI)", "waiting, a paused agent", "TaskEndIfWaiting"},
	{"wait timed out", "master", "waiting, past its timeout by the database's clock", "TaskEndIfWaiting"},
	{"sensor check due", "master", "waiting at the step sensor, past its wait_until by the database's clock; rows held elsewhere skipped", "TaskQueueSensorsDue"},
	{"task rerun", "operator (API, UI)", "failed or killed (a for-each's parent: waiting again); workflow reopened if it ended (a keyed one: its key free, none waiting; key lock)", "TaskRerunIfFailedOrKilled"},
	{"workflow stopped", "operator (API, UI)", "submitted or running", "WorkflowStopIfActive"},
	{"workflow stopped", "submit (when-full: cancel-oldest)", "submitted or running, the oldest active of a full key (key lock)", "WorkflowStopIfActive"},
	{"child stopped", "operator (stop of its parent)", "submitted or running", "WorkflowStopIfActive"},
	{"child stopped", "operator (kill of its parent task)", "submitted or running", "TaskKillIfQueuedOrRunning"},
	{"child stopped", "master (its parent's timeout)", "submitted or running", "WorkflowTimeOutIfOwned"},
}
