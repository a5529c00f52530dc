package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
// go on with its workflow instance (dao.TaskEndIfWaiting). A paused agent is resumed instead
// of succeeding: output becomes its wait step's output and the task is queued again for any
// worker to go on from the next step; fail fails it. A task that is not waiting — one
// signalled already, timed out or killed — is a *dao.ConflictError: a second signal never
// applies. audit, unless nil, is the signal's audit_event row, committed with it; its target
// is set to the task.
func Signal(ctx context.Context, db *dao.DB, id int64, output string, fail bool, audit *dao.AuditEvent) (dao.Signalled, error) {
	if len(output) > MaxSignalOutput {
		return dao.Signalled{}, fmt.Errorf("%w: %d bytes; the limit is %d", ErrSignalTooLarge, len(output), MaxSignalOutput)
	}
	state, out, errMsg := dao.TaskSucceeded, &output, (*string)(nil)
	if fail {
		msg := "failed by a signal"
		if output != "" {
			msg += ": " + output
		}
		state, errMsg = dao.TaskFailed, &msg
	}
	return db.TaskEndIfWaiting(ctx, id, state, out, errMsg, "", audit)
}

// EndWaitsPastTimeout is the transition "wait timed out": it ends at most limit waiting task
// instances whose timeout has passed, as their on-timeout says — failed (the default) or
// succeeded with an empty output — and returns how many it ended. Before them it queues again
// at most limit sensors due for their next check, in one statement (the transition "sensor
// check due", TaskQueueSensorsDue), and counts them too. For a paused agent the
// timeout and on-timeout are its wait step's, and succeeding resumes it with an empty output
// for the step. A task signalled meanwhile is left as its signal ended it, so any master may
// call it at any time.
func EndWaitsPastTimeout(ctx context.Context, db *dao.DB, limit int) (int, error) {
	ended, err := db.TaskQueueSensorsDue(ctx, limit)
	if err != nil {
		return 0, err
	}
	due, err := db.TaskListWaitingPastTimeout(ctx, limit)
	if err != nil {
		return ended, err
	}
	for _, w := range due {
		state, output, errMsg := waitTimedOut(w.Params, w.PausedStep)
		if w.PausedStep == nil {
			if tm, timeout, onTimeout, ok := timeSensor(w.Params); ok {
				state, output, errMsg = timeSensorEnded(tm, timeout, onTimeout, w.StartedAt)
			}
		}
		_, err := db.TaskEndIfWaiting(ctx, w.ID, state, output, errMsg, dao.EndTimeout, nil)
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

// waitTimedOut is what a waiting task whose params are params comes to at its timeout: a wait
// task as its on-timeout says, a paused agent as its wait step pausedStep's does; an agent
// waiting for a workflow tool's child is resumed, to fail the call. A sensor past its timeout
// whose on-timeout is skip (it paused at workflow.SensorTimeoutStep) is skipped; a workflow
// sensor (at workflow-run:NAME) ends as its on-timeout says.
func waitTimedOut(params json.RawMessage, pausedStep *string) (dao.TaskState, *string, *string) {
	var p workflow.TaskParams
	err := json.Unmarshal(params, &p)
	onTimeout, timeout := p.Task.OnTimeout, p.Task.Timeout
	if pausedStep != nil && *pausedStep == workflow.SensorTimeoutStep {
		msg := fmt.Sprintf("the sensor was not true within its timeout of %s", time.Duration(timeout))
		return dao.TaskSkipped, nil, &msg
	}
	if pausedStep != nil && strings.HasPrefix(*pausedStep, workflow.WorkflowRunStep) {
		return runWaitTimedOut(p.Task)
	}
	if pausedStep != nil && strings.HasPrefix(*pausedStep, "tool-child:") {
		// The agent goes on, and fails the call: its child has not ended in the tool's time.
		empty := ""
		return dao.TaskSucceeded, &empty, nil
	}
	if pausedStep != nil {
		onTimeout, timeout = "", 0
		for _, st := range p.Task.Steps {
			if st.Name == *pausedStep {
				onTimeout, timeout = st.OnTimeout, st.Timeout
			}
		}
	}
	if err == nil && onTimeout == workflow.OnTimeoutSucceed {
		empty := ""
		return dao.TaskSucceeded, &empty, nil
	}
	msg := fmt.Sprintf("no signal within its timeout of %s", time.Duration(timeout))
	return dao.TaskFailed, nil, &msg
}

// TimeSensorWait is how long the time sensor t, created waiting at now, waits on no worker
// before the masters end it: until its time, or its timeout when that comes first. At least
// a millisecond, so a time already past ends it at the next look.
func TimeSensorWait(t *workflow.Task, now time.Time) time.Duration {
	wait := time.Duration(t.Time.After)
	if t.Time.At != "" {
		at, _ := time.Parse(time.RFC3339, t.Time.At)
		wait = at.Sub(now)
	}
	if t.Timeout > 0 {
		wait = min(wait, time.Duration(t.Timeout))
	}
	return max(wait, time.Millisecond)
}

// timeSensor reads the params of a waiting task: ok if it is a time sensor.
func timeSensor(params json.RawMessage) (tm *workflow.SensorTime, timeout time.Duration, onTimeout string, ok bool) {
	var p workflow.TaskParams
	if json.Unmarshal(params, &p) != nil || p.Task.Type != workflow.TypeSensor || p.Task.Time == nil {
		return nil, 0, "", false
	}
	return p.Task.Time, time.Duration(p.Task.Timeout), p.Task.OnTimeout, true
}

// timeSensorEnded is what a time sensor that began to wait at started comes to when its wait
// ends: succeeded, its time as its output, unless its timeout came first (by the times stored,
// not by a clock), then as its on-timeout says.
func timeSensorEnded(tm *workflow.SensorTime, timeout time.Duration, onTimeout string, started *time.Time) (dao.TaskState, *string, *string) {
	var begun time.Time
	if started != nil {
		begun = *started
	}
	due := begun.Add(time.Duration(tm.After))
	if tm.At != "" {
		due, _ = time.Parse(time.RFC3339, tm.At)
	}
	if timeout == 0 || started == nil || !due.After(begun.Add(timeout)) {
		out := due.UTC().Format(time.RFC3339)
		return dao.TaskSucceeded, &out, nil
	}
	msg := fmt.Sprintf("the sensor was not true within its timeout of %s", timeout)
	switch onTimeout {
	case workflow.OnTimeoutSucceed:
		empty := ""
		return dao.TaskSucceeded, &empty, nil
	case workflow.OnTimeoutSkip:
		return dao.TaskSkipped, nil, &msg
	}
	return dao.TaskFailed, nil, &msg
}
