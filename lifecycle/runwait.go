package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// awaitRun is the transition "run awaited" for the workflow sensor c of wf, which Decide says
// runs, in the advance's transaction that holds wf locked: it renders the sensor's since over
// its inputs in, the upstream outputs in tasks and the run wf itself (the default: wf's
// creation, its submission, so a run queued behind a cap or a key still sees the runs that
// ended while it waited), and creates the task waiting for the run, on no worker
// (dao.TaskCreateWaitingOnRun). It returns the task's id (0 if it existed already); a sensor
// whose since does not render an RFC 3339 time is returned as a row to create failed instead.
// An error is the database's.
func (d *Driver) awaitRun(ctx context.Context, q *dao.Queries, wf *dao.WorkflowInstance, c Planned, in inputs, tasks []dao.TaskOutcome) (int64, *dao.NewTask, error) {
	t := c.Task
	row, err := taskRow(wf.ID, wf.Priority, c, in, tasks)
	if err != nil {
		return 0, nil, err
	}
	data := workflow.TemplateData{Params: in.params, Upstream: upstream(t, tasks), Assets: in.assets,
		Run: &workflow.RunInput{ID: wf.ID, CreatedAt: wf.CreatedAt, StartedAt: wf.StartedAt}}
	since, err := t.SinceTime(ctx, data, wf.CreatedAt)
	if err != nil {
		row.State, row.Error = dao.TaskFailed, err.Error()
		return 0, &row, nil
	}
	id, err := q.TaskCreateWaitingOnRun(ctx, row, dao.RunWait{Workflow: t.WorkflowRun.Name, States: t.WorkflowRun.RunStates(), Since: since})
	if err != nil {
		return 0, nil, err
	}
	if d.madeRunWait != nil {
		if err := d.madeRunWait(); err != nil {
			return 0, nil, err
		}
	}
	return id, nil, nil
}

// endRunWaits ends, once the step that created them has committed, the workflow sensors ids
// whose run has ended already (dao.TaskEndIfRunEnded): one that ended before the commit found
// no sensor to end. It returns how many it ended; after an error the masters' poll
// (master.WaitTimeouts) looks again.
func (d *Driver) endRunWaits(ctx context.Context, ids []int64) (int, error) {
	ended := 0
	for _, id := range ids {
		n, err := d.db.TaskEndIfRunEnded(ctx, id, 1)
		if err != nil {
			return ended, err
		}
		ended += n
	}
	return ended, nil
}

// runWaitTimedOut is what a workflow sensor (paused at workflow-run:NAME) whose timeout passed
// comes to, as its on-timeout says: failed (the default), skipped or succeeded with an empty
// output.
func runWaitTimedOut(t workflow.Task) (dao.TaskState, *string, *string) {
	name := ""
	if t.WorkflowRun != nil {
		name = t.WorkflowRun.Name
	}
	msg := fmt.Sprintf("no run of %s ended as the sensor waits for within its timeout of %s", name, time.Duration(t.Timeout))
	switch t.OnTimeout {
	case workflow.OnTimeoutSucceed:
		empty := ""
		return dao.TaskSucceeded, &empty, nil
	case workflow.OnTimeoutSkip:
		return dao.TaskSkipped, nil, &msg
	}
	return dao.TaskFailed, nil, &msg
}

// EndRunWaits is the transition "run ended" for the workflow sensors whose run ended while
// they were created and whose creator did not look after its commit (it died first): it ends
// at most limit of them (dao.TaskEndIfRunEnded), waking the masters with their instances, and
// returns how many it ended. Any master may call it at any time.
func EndRunWaits(ctx context.Context, db *dao.DB, limit int) (int, error) {
	return db.TaskEndIfRunEnded(ctx, 0, limit)
}
