package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// MaxSignalOutput is the longest output a signal may give a waiting task, in bytes.
const MaxSignalOutput = 1 << 20

// ErrSignalTooLarge is Signal's error for an output over MaxSignalOutput.
var ErrSignalTooLarge = errors.New("the signal's output is too large")

// Signal is the transition "signalled": it ends the waiting task instance id, succeeded with
// output, or failed with output as its error when fail is set, and wakes the masters, which
// go on with its workflow instance (dao.TaskEndIfWaiting). A task that is not waiting — one
// signalled already, timed out or killed — is a *dao.ConflictError: a second signal never
// applies. audit, unless nil, is the signal's audit_event row, committed with it; its target
// is set to the task. It returns the task's workflow instance.
func Signal(ctx context.Context, db *dao.DB, id int64, output string, fail bool, audit *dao.AuditEvent) (int64, error) {
	if len(output) > MaxSignalOutput {
		return 0, fmt.Errorf("%w: %d bytes; the limit is %d", ErrSignalTooLarge, len(output), MaxSignalOutput)
	}
	state, out, errMsg := dao.TaskSucceeded, &output, (*string)(nil)
	if fail {
		msg := "failed by a signal"
		if output != "" {
			msg += ": " + output
		}
		state, errMsg = dao.TaskFailed, &msg
	}
	return db.TaskEndIfWaiting(ctx, id, state, out, errMsg, audit)
}

// EndWaitsPastTimeout is the transition "wait timed out": it ends at most limit waiting task
// instances whose timeout has passed, as their task's on-timeout says — failed (the default)
// or succeeded with an empty output — and returns how many it ended. A task signalled
// meanwhile is left as its signal ended it, so any master may call it at any time.
func EndWaitsPastTimeout(ctx context.Context, db *dao.DB, limit int) (int, error) {
	due, err := db.TaskListWaitingPastTimeout(ctx, limit)
	if err != nil {
		return 0, err
	}
	ended := 0
	for _, w := range due {
		state, output, errMsg := waitTimedOut(w.Params)
		_, err := db.TaskEndIfWaiting(ctx, w.ID, state, output, errMsg, nil)
		var conflict *dao.ConflictError
		switch {
		case errors.As(err, &conflict):
		case err != nil:
			return ended, err
		default:
			ended++
		}
	}
	return ended, nil
}

// waitTimedOut is what a wait task whose params are params comes to at its timeout.
func waitTimedOut(params json.RawMessage) (dao.TaskState, *string, *string) {
	var p workflow.TaskParams
	if err := json.Unmarshal(params, &p); err == nil && p.Task.OnTimeout == workflow.OnTimeoutSucceed {
		empty := ""
		return dao.TaskSucceeded, &empty, nil
	}
	msg := fmt.Sprintf("no signal within its timeout of %s", time.Duration(p.Task.Timeout))
	return dao.TaskFailed, nil, &msg
}
