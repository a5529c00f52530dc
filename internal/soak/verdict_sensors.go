package soak

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/workflow"
)

// sensorEnd is how one sensor task of soak-sense ended, and when its condition turned true.
type sensorEnd struct {
	Task  int64
	Name  string
	State dao.TaskState
	// Output is the sensor's output: what the condition answered, "" for a sensor whose
	// on-timeout is succeed and that timed out.
	Output string
	// Created is when the workflow instance was created: the sensor's first check is later.
	Created time.Time
	Ended   *time.Time
	// TrueAt is when the condition turned true, zero if it never did: for a file or an http
	// sensor the moment before the workload made it true; for a time sensor, Created plus
	// its delay, before which it cannot be true (its delay runs from its first check).
	TrueAt    time.Time
	Timeout   time.Duration
	OnTimeout string
}

// judgeSensor says what is wrong with a sensor's end, "" if nothing. A sensor ends
// succeeded with its condition's answer only once its condition is true: TrueAt before its
// end. It ends as its on-timeout says (skipped, failed, or succeeded with no output) only if
// its condition was still false at a check at or past its timeout; that check came at least
// Timeout after Created, so TrueAt is later than that. Any other end is wrong.
func judgeSensor(s sensorEnd) string {
	what := fmt.Sprintf("sensor %s (task %d)", s.Name, s.Task)
	if s.Ended == nil {
		return what + " has not ended"
	}
	timedOut := false
	switch {
	case s.State == dao.TaskSucceeded && s.Output != "":
	case s.State == dao.TaskSucceeded && s.OnTimeout == workflow.OnTimeoutSucceed,
		s.State == dao.TaskSkipped && s.OnTimeout == workflow.OnTimeoutSkip,
		s.State == dao.TaskFailed && (s.OnTimeout == "" || s.OnTimeout == workflow.OnTimeoutFail):
		timedOut = true
	default:
		return fmt.Sprintf("%s ended %s with output %q; its on-timeout is %q", what, s.State, s.Output, s.OnTimeout)
	}
	deadline := s.Created.Add(s.Timeout)
	if !timedOut {
		if s.TrueAt.IsZero() || s.Ended.Before(s.TrueAt) {
			return fmt.Sprintf("%s succeeded at %s, before its condition was true (%s)", what, s.Ended.Format(time.RFC3339Nano), trueAt(s.TrueAt))
		}
		return ""
	}
	if s.Ended.Before(deadline) {
		return fmt.Sprintf("%s timed out (%s) at %s, before its timeout of %v from its creation at %s",
			what, s.State, s.Ended.Format(time.RFC3339Nano), s.Timeout, s.Created.Format(time.RFC3339Nano))
	}
	if !s.TrueAt.IsZero() && !s.TrueAt.After(deadline) {
		return fmt.Sprintf("%s timed out (%s) though its condition was true (%s) within its timeout of %v from its creation at %s",
			what, s.State, trueAt(s.TrueAt), s.Timeout, s.Created.Format(time.RFC3339Nano))
	}
	return ""
}

func trueAt(at time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return "from " + at.Format(time.RFC3339Nano)
}

// judgeSensors checks the ends of soak-sense's sensors against the times the workload made
// their conditions true (judgeSensor).
func (v *verdict) judgeSensors(h *history.History) {
	if v.w.sense == nil {
		return
	}
	var spec map[string]workflow.Task
	for _, k := range v.w.kinds {
		if k.name != senseKind {
			continue
		}
		s, err := k.spec()
		if err != nil {
			v.anomaly("sensors: %v", err)
			return
		}
		spec = map[string]workflow.Task{}
		for _, t := range s.Tasks {
			if t.Type == workflow.TypeSensor {
				spec[t.Name] = t
			}
		}
	}
	fileAt, readyAt := v.w.sense.times()
	runs := map[int64]dao.WorkflowInstance{}
	for _, wf := range h.Workflows {
		if wf.WorkflowName == senseKind {
			runs[wf.ID] = wf
		}
	}
	for _, t := range h.Tasks {
		wf, ok := runs[t.WorkflowInstanceID]
		st, sensor := spec[t.Name]
		if !ok || !sensor {
			continue
		}
		s := sensorEnd{Task: t.ID, Name: t.Name, State: t.State, Created: wf.CreatedAt, Ended: t.EndedAt,
			Timeout: time.Duration(st.Timeout), OnTimeout: st.OnTimeout}
		if t.Output != nil {
			s.Output = *t.Output
		}
		switch {
		case st.Time != nil:
			s.TrueAt = wf.CreatedAt.Add(time.Duration(st.Time.After))
		case st.File != nil:
			s.TrueAt = fileAt
		case st.HTTP != nil:
			var params map[string]string
			_ = json.Unmarshal(wf.Params, &params)
			s.TrueAt = readyAt[params["key"]]
		}
		if p := judgeSensor(s); p != "" {
			v.anomaly("sensors: %s", p)
			v.suspects = append(v.suspects, wf.ID)
			continue
		}
		if s.State == dao.TaskSucceeded && s.Output != "" {
			v.flow("sensors true in time")
		} else {
			v.flow("sensors timed out")
		}
	}
}
