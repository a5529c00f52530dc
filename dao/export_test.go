package dao

import "context"

// The hot statements, for the plan test.
const (
	ClaimSQL           = claimSQL
	ClaimUnpooledSQL   = claimUnpooledSQL
	ListByWorkflowsSQL = listByWorkflowsSQL
)

// The master's, for the plan test.
var (
	ClaimUnownedSQL        = claimUnownedSQL
	LockUnownedSQL         = lockUnownedSQL
	ClaimStrandedSQL       = claimStrandedSQL
	SweepRangeSQL          = sweepRangeSQL
	LockManySQL            = lockManySQL
	FinishManyWorkflowsSQL = finishManyWorkflowsSQL
)

// ClaimSettings are the claim connections' run-time parameters.
var ClaimSettings = claimSettings

// FinishManySQL is the worker's finish, for the plan test.
var FinishManySQL = finishManySQL

// CreateSQL and CreateArgs are the bulk submission's statement and parameters.
const CreateSQL = createSQL

func CreateArgs(subs []Submission) []any { return createArgs(subs) }

// The statements of each keyset list, for the test that they filter alike.
var (
	TaskListStatements     = []string{taskList.older, taskList.newer, taskList.anyOlder, taskList.anyNewer}
	WorkflowListStatements = []string{workflowList.older, workflowList.newer, workflowList.anyOlder, workflowList.anyNewer}
)

// TaskColumns and QueryTasks read task rows as the claims do, by hand.
const TaskColumns = taskColumns

func QueryTasks(ctx context.Context, q *Queries, query string, args ...any) ([]TaskInstance, error) {
	return queryTasks(ctx, q, 0, query, args...)
}
