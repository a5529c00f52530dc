package dao

import "context"

// The hot statements, for the plan test.
const (
	ClaimSQL           = claimSQL
	ClaimUnpooledSQL   = claimUnpooledSQL
	ListByWorkflowsSQL = listByWorkflowsSQL
)

// The master's, for the plan test.
const (
	ClaimUnownedSQL        = claimUnownedSQL
	LockUnownedSQL         = lockUnownedSQL
	ClaimStrandedSQL       = claimStrandedSQL
	SweepRangeSQL          = sweepRangeSQL
	LockManySQL            = lockManySQL
	FinishManyWorkflowsSQL = finishManyWorkflowsSQL
)

// ClaimSettings are the claim connections' run-time parameters.
var ClaimSettings = claimSettings

// The statements of the concurrency keys' admission, for the plan test.
const (
	KeyCountSQL          = keyCountSQL
	KeysAdmittableSQL    = keysAdmittableSQL
	OldestActiveOfKeySQL = oldestActiveOfKeySQL
)

// FinishManySQL is the worker's finish, for the plan test.
const FinishManySQL = finishManySQL

// The signal's statements, for the column test.
const (
	EndWaitingSQL         = endWaitingSQL
	WaitingPastTimeoutSQL = waitingPastTimeoutSQL
)

// CreateSQL and CreateArgs are the bulk submission's statement and parameters.
const CreateSQL = createSQL

func CreateArgs(subs []Submission) []any { return createArgs(subs) }

// The statements that return the rows of one struct, for the test of their columns.
const (
	TaskGetSQL                  = taskGetSQL
	TaskListByWorkflowSQL       = taskListByWorkflowSQL
	TaskPageOfWorkflowAfterSQL  = taskPageOfWorkflowAfterSQL
	TaskPageOfWorkflowBeforeSQL = taskPageOfWorkflowBeforeSQL
	TaskBriefsOfWorkflowSQL     = taskBriefsOfWorkflowSQL
	WorkflowGetSQL              = workflowGetSQL
	WorkflowParentSQL           = workflowParentSQL
	LockIfOwnedSQL              = lockIfOwnedSQL
	AdmitSQL                    = admitSQL
	AdmitKeyedSQL               = admitKeyedSQL
	WorkflowListOlderSQL        = workflowListOlderSQL
	WorkflowListNewerSQL        = workflowListNewerSQL
	ScheduleGetSQL              = scheduleGetSQL
	ScheduleLockSQL             = scheduleLockSQL
	ScheduleLockIfDueSQL        = scheduleLockIfDueSQL
	ScheduleListSQL             = scheduleListSQL
	TaskListOlderSQL            = taskListOlderSQL
	TaskListNewerSQL            = taskListNewerSQL
)

// The statements of each keyset list, for the test that they filter alike.
var (
	TaskListStatements     = []string{taskList.older, taskList.newer, taskList.anyOlder, taskList.anyNewer}
	WorkflowListStatements = []string{workflowList.older, workflowList.newer, workflowList.anyOlder, workflowList.anyNewer}
)

// QueryTasks reads task rows as the claims do, by hand.
func QueryTasks(ctx context.Context, q *Queries, query string, args ...any) ([]TaskInstance, error) {
	return queryTasks(ctx, q, 0, query, args...)
}

// TaskFields are the fields TaskInstance.fields scans into, in its order.
func TaskFields(t *TaskInstance) []any { return t.fields() }

// Channels are the NOTIFY channels of db: the masters', the queued tasks' and the kill
// requests'.
func (db *DB) Channels() (master, task, kill string) {
	return db.channels.master, db.channels.task, db.channels.kill
}

// The retention's, for the plan test.
const (
	PurgeInstancesSQL      = purgeInstancesSQL
	PurgeLogsSQL           = purgeLogsSQL
	PurgeFailoverEventsSQL = purgeFailoverEventsSQL
	PurgeFiresSQL          = purgeFiresSQL
	PurgeAssetEventsSQL    = purgeAssetEventsSQL
	WaitingSensorsSQL      = waitingSensorsSQL
	TriggerHooksSQL        = triggerHooksSQL
	AssetConsumerWaitsSQL  = assetConsumerWaitsSQL
	AuditRetentionSQL      = auditRetentionSQL
	PurgeAuditSQL          = purgeAuditSQL
)

// The rows of the retention's statements, for the statements test.
type (
	PurgedInstances = purgedInstances
	PurgedLogs      = purgedLogs
)

// WakeMasters sends the masters a wake-up with payload through the notifier, after whatever
// wake-ups it holds already.
func (db *DB) WakeMasters(payload string) { db.Queries.wake(db.channels.master, payload) }

// The UI's pictures', for the plan test.
const (
	RunsPerHourSQL         = runsPerHourSQL
	DurationPercentilesSQL = durationPercentilesSQL
	GroupLoadSQL           = groupLoadSQL
	TimelineSQL            = timelineSQL
)
