package soak

import (
	"context"
	"os"
	"strings"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
)

// judgeTools checks the tool-calling agents' effects against what their calls recorded:
// a call of charge, which is not idempotent, ran at most once, and exactly once if it ended;
// a call of note ran at most as often as it was started, and at least once if it ended; a
// call of report started one child at most, and one that succeeded if it ended without error. A
// succeeded agent answered after its calls: it has a turn more than it has calls, each call
// ended. Every turn and call was written by an attempt of its task no later than the one
// that ended it.
func (v *verdict) judgeTools(h *history.History) {
	raw, err := os.ReadFile(v.ledger)
	if err != nil && !os.IsNotExist(err) {
		v.anomaly("tools: read the ledger: %v", err)
		return
	}
	runs := map[string]int{} // "<tool> <call id>" → runs
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			runs[f[0]+" "+f[1]]++
		}
	}
	ctx := context.Background()
	for _, t := range h.Tasks {
		if t.Type != "agent" || t.Name != "operate" {
			continue
		}
		turns, calls, err := v.db.AgentLoopForTask(ctx, t.ID)
		if err != nil {
			v.anomaly("tools: task %d: %v", t.ID, err)
			continue
		}
		suspect := false
		for _, c := range calls {
			n := runs[c.Tool+" "+c.CallID]
			ended := c.State == dao.ToolCallEnded
			switch {
			case c.Tool == "charge" && n > 1:
				v.anomaly("tools: call %s of charge (task %d, workflow instance %d) ran %d times; it is not idempotent",
					c.CallID, t.ID, t.WorkflowInstanceID, n)
				suspect = true
			case c.Tool == "charge" && ended && n != 1:
				v.anomaly("tools: call %s of charge (task %d) ended but ran %d times", c.CallID, t.ID, n)
				suspect = true
			case c.Tool == "note" && (n > c.Starts || (ended && n == 0)):
				v.anomaly("tools: call %s of note (task %d) ran %d times for %d starts (%s)", c.CallID, t.ID, n, c.Starts, c.State)
				suspect = true
			}
			if c.Tool == "report" {
				var children []string
				if err := v.db.SQL().SelectContext(ctx, &children, `SELECT state FROM workflow_instance
					WHERE parent_task_instance_id = $1 AND parent_call_id = $2`, t.ID, c.CallID); err != nil {
					v.anomaly("tools: children of call %s: %v", c.CallID, err)
					continue
				}
				switch {
				case len(children) > 1:
					v.anomaly("tools: call %s of report (task %d) started %d children; want one", c.CallID, t.ID, len(children))
					suspect = true
				case ended && !c.IsError && (len(children) != 1 || children[0] != string(dao.WorkflowSucceeded)):
					v.anomaly("tools: call %s of report (task %d) ended with a result, its children %v; want one succeeded", c.CallID, t.ID, children)
					suspect = true
				case ended && len(children) == 1:
					v.flow("workflow tool calls ended with their child")
				}
			}
			if c.Attempt > t.Attempt {
				v.anomaly("tools: call %s of task %d was started by attempt %d, after the task's last attempt %d", c.CallID, t.ID, c.Attempt, t.Attempt)
				suspect = true
			}
			if c.Tool == "note" && c.Starts > 1 {
				v.flow("tool calls run again (idempotent)")
			}
			if c.Tool == "charge" && c.State != dao.ToolCallEnded {
				v.flow("tool calls cut off (on-interrupted: fail)")
			}
		}
		for _, tr := range turns {
			if tr.Attempt > t.Attempt {
				v.anomaly("tools: turn %d of task %d was written by attempt %d, after the task's last attempt %d", tr.Turn, t.ID, tr.Attempt, t.Attempt)
				suspect = true
			}
		}
		if t.State == dao.TaskSucceeded {
			allEnded := true
			for _, c := range calls {
				allEnded = allEnded && c.State == dao.ToolCallEnded
			}
			if len(turns) != len(calls)+1 || !allEnded {
				v.anomaly("tools: task %d succeeded with %d turns and %d calls (all ended: %t); want a turn per call and the answer",
					t.ID, len(turns), len(calls), allEnded)
				suspect = true
			} else {
				v.flow("tool-calling agents succeeded")
			}
			if len(turns) > 0 && turns[0].Attempt < t.Attempt {
				v.flow("tool-calling agents resumed from their turns")
			}
		}
		if suspect {
			v.suspects = append(v.suspects, t.WorkflowInstanceID)
		}
	}
}
