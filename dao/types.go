package dao

import (
	"encoding/json"
	"time"
)

// TaskState is the state of a task instance: queued → running → succeeded | failed | killed;
// running → queued on retry, failover or hand-back; running → waiting → queued for an agent
// paused at a wait step until its signal; skipped when an upstream task failed; waiting for a
// wait task, a workflow task's child and the parent of a for-each task's items.
type TaskState string

// The task states.
const (
	TaskQueued TaskState = "queued"
	// TaskWaiting is a wait task's state until it is signalled or times out, a paused agent's
	// (PausedStep set) until a signal resumes or fails it, a workflow task's until its child
	// ends, and a for-each task's parent's until its items have ended: no worker claims it.
	TaskWaiting   TaskState = "waiting"
	TaskRunning   TaskState = "running"
	TaskSucceeded TaskState = "succeeded"
	TaskFailed    TaskState = "failed"
	TaskKilled    TaskState = "killed"
	TaskSkipped   TaskState = "skipped"
)

// Terminal reports whether no further attempt will run in this state.
func (s TaskState) Terminal() bool {
	return s == TaskSucceeded || s == TaskFailed || s == TaskKilled || s == TaskSkipped
}

// WorkflowState is the state of a workflow instance: submitted → running → succeeded | failed
// | stopped.
type WorkflowState string

// The workflow states.
const (
	WorkflowSubmitted WorkflowState = "submitted"
	WorkflowRunning   WorkflowState = "running"
	WorkflowSucceeded WorkflowState = "succeeded"
	WorkflowFailed    WorkflowState = "failed"
	WorkflowStopped   WorkflowState = "stopped"
)

// Terminal reports whether the workflow instance has finished.
func (s WorkflowState) Terminal() bool {
	return s == WorkflowSucceeded || s == WorkflowFailed || s == WorkflowStopped
}

// EndReason says why a task or workflow instance ended when something other than its own
// result ended it (migration 00028); nil on a row is an end by its own result. The statement
// that ends an instance sets it in the same statement; a kill of a running task sets it with
// the request, and the task's end keeps it.
type EndReason string

// The end reasons.
const (
	// EndTimeout: its own timeout passed — a task's last attempt timed out, a wait task (or a
	// paused agent's wait step) had no signal in time, a workflow instance ran past its
	// workflow timeout.
	EndTimeout EndReason = "timeout"
	// EndWorkflowTimeout: a task killed, or a child instance stopped, because its workflow
	// instance (a child's: its parent) ran past its workflow timeout.
	EndWorkflowTimeout EndReason = "workflow-timeout"
	// EndOperatorKill: an operator killed the task, or the task that started the child.
	EndOperatorKill EndReason = "operator-kill"
	// EndStop: an operator stopped the workflow instance: it, its tasks and its children.
	EndStop EndReason = "stop"
	// EndCancelOldest: a newer submission of the same concurrency key stopped the instance
	// (when-full: cancel-oldest): it, its tasks and its children.
	EndCancelOldest EndReason = "cancel-oldest"
	// EndUpstream: a task skipped because its dependencies' ends did not trigger it.
	EndUpstream EndReason = "upstream"
	// EndCondition: a task skipped because its when: rendered false.
	EndCondition EndReason = "condition"
	// EndChildFailed: a workflow task whose child instance failed or was stopped.
	EndChildFailed EndReason = "child-failed"
)

// EndReasons lists every end reason, in the order of migration 00028's domain.
var EndReasons = []EndReason{EndTimeout, EndWorkflowTimeout, EndOperatorKill, EndStop, EndCancelOldest,
	EndUpstream, EndCondition, EndChildFailed}

// Describe says the reason in words, as the CLI, the UI and the notifications show it.
func (r EndReason) Describe() string {
	switch r {
	case EndTimeout:
		return "its timeout passed"
	case EndWorkflowTimeout:
		return "the workflow's timeout passed"
	case EndOperatorKill:
		return "killed by an operator"
	case EndStop:
		return "the workflow was stopped by an operator"
	case EndCancelOldest:
		return "the workflow was stopped by a newer submission (when-full: cancel-oldest)"
	case EndUpstream:
		return "its dependencies' ends did not trigger it"
	case EndCondition:
		return "its when: condition was false"
	case EndChildFailed:
		return "its child workflow did not succeed"
	}
	return string(r)
}

// Outcome is how one attempt of a task ended.
type Outcome string

// The attempt outcomes.
const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
	OutcomeTimedOut  Outcome = "timed_out"
	OutcomeKilled    Outcome = "killed"
	// OutcomeFailedOver: the attempt's worker was lost and the leader requeued the task.
	OutcomeFailedOver Outcome = "failed_over"
	// OutcomeInterrupted: the worker stopped the attempt itself when cut off from ZooKeeper,
	// and handed the task back once it learned it was still a member.
	OutcomeInterrupted Outcome = "interrupted"
	// OutcomeHandedBack: the worker was shutting down and gave the task back.
	OutcomeHandedBack Outcome = "handed_back"
	// OutcomePaused: an agent reached a wait step; its task waits for a signal, and the
	// attempt after it goes on from the next step.
	OutcomePaused Outcome = "paused"
)

// Token is a worker's fencing token for one attempt of a task. Every write a worker makes
// about the task carries it.
type Token struct {
	TaskID   int64
	WorkerID string
	Attempt  int
}

// TaskInstance is a row of task_instance.
type TaskInstance struct {
	ID                 int64           `db:"id"`
	WorkflowInstanceID int64           `db:"workflow_instance_id"`
	Name               string          `db:"name"`
	Type               string          `db:"type"`
	Params             json.RawMessage `db:"params"`
	State              TaskState       `db:"state"`
	Priority           int             `db:"priority"`
	WorkerGroup        string          `db:"worker_group"`
	Pool               *string         `db:"pool"`
	WorkerID           *string         `db:"worker_id"`
	Attempt            int             `db:"attempt"`
	Retries            int             `db:"retries"`
	MaxRetries         int             `db:"max_retries"`
	RetryIntervalMs    int64           `db:"retry_interval_ms"`
	TimeoutMs          *int64          `db:"timeout_ms"`
	NotBefore          *time.Time      `db:"not_before"`
	FailoverCount      int             `db:"failover_count"`
	KillRequested      bool            `db:"kill_requested"`
	Output             *string         `db:"output"`
	Error              *string         `db:"error"`
	ExitCode           *int            `db:"exit_code"`
	QueuedAt           time.Time       `db:"queued_at"`
	StartedAt          *time.Time      `db:"started_at"`
	EndedAt            *time.Time      `db:"ended_at"`
	// EndReason is why the task ended, if not by its own result; see EndReason.
	EndReason *EndReason `db:"end_reason"`

	// Usage is the token usage of the task's result, as JSON (see AttemptResult.TaskUsage);
	// nil for tasks that call no model.
	Usage *json.RawMessage `db:"usage"`
	// PausedStep is the wait step a paused agent waits at, while it waits; nil otherwise.
	PausedStep *string `db:"paused_step"`
	// ItemCount is set on the parent of a for-each task's items alone: how many items it has.
	ItemCount *int `db:"item_count"`
	// OutputTruncated marks Output as the first bytes of a longer output (output-overflow:
	// truncate).
	OutputTruncated bool `db:"output_truncated"`
}

// Token returns the fencing token of the task's current attempt.
func (t *TaskInstance) Token() Token {
	tok := Token{TaskID: t.ID, Attempt: t.Attempt}
	if t.WorkerID != nil {
		tok.WorkerID = *t.WorkerID
	}
	return tok
}

// Timeout returns the task's timeout, zero for none.
func (t *TaskInstance) Timeout() time.Duration {
	if t.TimeoutMs == nil {
		return 0
	}
	return time.Duration(*t.TimeoutMs) * time.Millisecond
}

// RetryInterval returns the wait before a retry.
func (t *TaskInstance) RetryInterval() time.Duration {
	return time.Duration(t.RetryIntervalMs) * time.Millisecond
}

// NextAttemptAt returns when the task's next attempt is due: its not_before while it is
// queued for a retry, nil otherwise (queued with nothing to wait for, or not queued). The
// claim clears not_before, so a past time means the retry is due and not yet claimed.
func (t *TaskInstance) NextAttemptAt() *time.Time {
	if t.State != TaskQueued {
		return nil
	}
	return t.NotBefore
}

// WorkflowInstance is a row of workflow_instance.
type WorkflowInstance struct {
	ID              int64           `db:"id"`
	WorkflowName    string          `db:"workflow_name"`
	WorkflowVersion int             `db:"workflow_version"`
	State           WorkflowState   `db:"state"`
	Owner           *string         `db:"owner"`
	Params          json.RawMessage `db:"params"`
	Priority        int             `db:"priority"`
	// MaxActive is the workflow's max-active-instances when the instance was created; nil
	// for no cap.
	MaxActive *int `db:"max_active"`
	// ConcurrencyKey is the key its workflow's concurrency: rendered for the instance at its
	// submission; nil for a workflow without one.
	ConcurrencyKey *string    `db:"concurrency_key"`
	Error          *string    `db:"error"`
	CreatedAt      time.Time  `db:"created_at"`
	StartedAt      *time.Time `db:"started_at"`
	EndedAt        *time.Time `db:"ended_at"`
	// EndReason is why the instance ended, if not by its tasks' ends; see EndReason.
	EndReason *EndReason `db:"end_reason"`
	// RunningMs is how long the instance has run, by the database's clock; only
	// WorkflowLockManyIfOwned, WorkflowClaimUnowned and WorkflowLockUnowned read it.
	RunningMs *int64 `db:"running_ms"`
	// Fresh says the instance had never started before WorkflowClaimUnowned claimed it, so it
	// has no task instances yet; only that claim reads it.
	Fresh bool `db:"fresh"`
}

// TaskAttempt is a row of task_attempt.
type TaskAttempt struct {
	TaskInstanceID int64      `db:"task_instance_id"`
	Attempt        int        `db:"attempt"`
	WorkerID       string     `db:"worker_id"`
	StartedAt      time.Time  `db:"started_at"`
	EndedAt        *time.Time `db:"ended_at"`
	Outcome        *Outcome   `db:"outcome"`
	ExitCode       *int       `db:"exit_code"`
	Error          *string    `db:"error"`

	// Usage is the token usage of the attempt's own model calls, as JSON; nil for none.
	Usage *json.RawMessage `db:"usage"`
}
