package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"os/user"
	"strconv"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
)

// What the tests read of the zksched command line's output and records, written out here as
// a user of the binary sees them (the binary's own types are in cmd/zksched/instance.go).

// statusJSON is a workflow instance with its tasks, as `zksched status --json` prints it.
type statusJSON struct {
	ID                       int64             `json:"id"`
	WorkflowName             string            `json:"workflow_name"`
	WorkflowVersion          int               `json:"workflow_version"`
	State                    dao.WorkflowState `json:"state"`
	Owner                    *string           `json:"owner"`
	Error                    *string           `json:"error"`
	CreatedAt                time.Time         `json:"created_at"`
	StartedAt                *time.Time        `json:"started_at"`
	EndedAt                  *time.Time        `json:"ended_at"`
	ParentWorkflowInstanceID *int64            `json:"parent_workflow_instance_id,omitempty"`
	ParentTaskInstanceID     *int64            `json:"parent_task_instance_id,omitempty"`
	Tasks                    []taskStatusJSON  `json:"tasks"`
	Waiting                  []waitingJSON     `json:"waiting"`
}

// taskStatusJSON is a task of statusJSON.
type taskStatusJSON struct {
	ID                      int64         `json:"id"`
	Name                    string        `json:"name"`
	Type                    string        `json:"type"`
	State                   dao.TaskState `json:"state"`
	Attempt                 int           `json:"attempt"`
	WorkerID                *string       `json:"worker_id"`
	KillRequested           bool          `json:"kill_requested"`
	Error                   *string       `json:"error"`
	QueuedAt                time.Time     `json:"queued_at"`
	StartedAt               *time.Time    `json:"started_at"`
	EndedAt                 *time.Time    `json:"ended_at"`
	ChildWorkflowInstanceID *int64        `json:"child_workflow_instance_id,omitempty"`
	PausedStep              *string       `json:"paused_step,omitempty"`
	ItemCount               *int          `json:"item_count,omitempty"`
}

// waitingJSON is a waiting task of statusJSON and, in words, what it waits for.
type waitingJSON struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	For  string `json:"for"`
}

// logPart is part of an attempt's log, as `zksched logs --json` prints it.
type logPart struct {
	TaskInstance int64 `json:"task_instance"`
	dao.LogTail
	Running   bool          `json:"running"`
	TaskState dao.TaskState `json:"task_state"`
}

// killJSON is what `zksched kill --json` prints.
type killJSON struct {
	TaskInstance int64         `json:"task_instance"`
	State        dao.TaskState `json:"state"`
	Attempt      int           `json:"attempt"`
	Worker       *string       `json:"worker,omitempty"`
}

// rerunJSON is what `zksched rerun --json` prints.
type rerunJSON struct {
	WorkflowInstance int64   `json:"workflow_instance"`
	Requeued         []int64 `json:"requeued"`
	DeletedSkipped   int     `json:"deleted_skipped"`
	Reopened         bool    `json:"reopened"`
}

// stopJSON is what `zksched stop --json` prints.
type stopJSON struct {
	WorkflowInstance int64             `json:"workflow_instance"`
	State            dao.WorkflowState `json:"state"`
	Killed           int               `json:"killed"`
	KillRequested    int               `json:"kill_requested"`
}

// signalJSON is what `zksched signal --json` prints.
type signalJSON struct {
	TaskInstance     int64         `json:"task_instance"`
	WorkflowInstance int64         `json:"workflow_instance"`
	State            dao.TaskState `json:"state"`
	PausedStep       *string       `json:"paused_step,omitempty"`
}

// newUserLine returns a new token and the users-file line of user name with role, as
// `zksched user add` writes it.
func newUserLine(name, role string) (token, line string, err error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", err
	}
	token = base64.RawURLEncoding.EncodeToString(raw)
	return token, conf.User{Name: name, Role: role, TokenHash: sha256.Sum256([]byte(token))}.String(), nil
}

// osUser names the user running the tests as the binary's audit rows do (actor cli:<user>):
// the account name, or its uid when the account has none.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return name
	}
	return strconv.Itoa(os.Getuid())
}
