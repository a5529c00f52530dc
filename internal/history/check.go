package history

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

// quiet is how long a run without an end must have been silent to count as stopped. Beats
// come every 100 ms; this leaves room for a loaded machine.
const quiet = time.Second

// Check is the verdict of a scenario. It waits for the workflow instances to finish (up to
// opts.Deadline; the processes give no signal to wait on, so it polls) and for every run of
// their tasks to stop beating, judges the history, logs the timeline and the figures, and
// fails the test once per problem. A run still beating seconds after its workflow finished is
// a problem too: a task that outlived its attempt. It returns the report for the scenario's
// own assertions and figures.
func Check(t testing.TB, db *dao.DB, rec *Recorder, opts Options) *Report {
	t.Helper()
	if opts.Deadline <= 0 {
		opts.Deadline = 60 * time.Second
	}
	ctx := context.Background()
	deadline := time.Now().Add(opts.Deadline)
	var h *History
	var err error
	for {
		// Errors are retried: the scenario may have just restarted the database.
		h, err = Load(ctx, db, rec, opts.Workflows)
		if (err == nil && h.finished()) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("history: load: %v", err)
	}

	var alive []Run
	if h.finished() {
		alive, err = h.settle(ctx, rec, 5*time.Second)
		if err != nil {
			t.Fatalf("history: %v", err)
		}
	}
	rep := h.Judge(opts)
	for _, r := range alive {
		rep.Problems = append(rep.Problems, fmt.Sprintf(
			"outlived its attempt: task %d attempt %d on %s still beating (last beat %s ago) after its workflow finished",
			r.TaskID, r.Attempt, r.Worker, time.Since(r.Last).Round(time.Millisecond)))
	}

	// The problems come first: a long timeline after them must not push them out of a
	// truncated log.
	for _, p := range rep.Problems {
		t.Errorf("history: %s", p)
	}
	t.Logf("%s", rep.Timeline)
	for _, f := range rep.Failovers {
		t.Logf("failed over: task %d %q: attempt %d on %s stopped %s after the fault; attempt %d on %s started %s after the fault",
			f.TaskID, f.Task, f.From.Attempt, f.From.Worker, ms(f.Stopped), f.To.Attempt, f.To.Worker, ms(f.Elsewhere))
	}
	for _, n := range rep.Notes {
		t.Logf("allowed: %s", n)
	}
	t.Logf("%s", rep.Summary())
	return rep
}

// finished reports whether every workflow instance of the history has finished.
func (h *History) finished() bool {
	for _, wf := range h.Workflows {
		if !wf.State.Terminal() {
			return false
		}
	}
	return true
}

// settle rereads the run log until no run of the history's tasks is alive and nothing new
// arrived for one poll, for at most limit. It returns the runs still alive at the end.
func (h *History) settle(ctx context.Context, rec *Recorder, limit time.Duration) ([]Run, error) {
	tasks := map[int64]bool{}
	for _, t := range h.Tasks {
		tasks[t.ID] = true
	}
	end := time.Now().Add(limit)
	prev := -1
	for {
		evs, err := rec.Events(ctx)
		if err != nil {
			return nil, err
		}
		var mine []Event
		for _, e := range evs {
			if tasks[e.TaskID] {
				mine = append(mine, e)
			}
		}
		h.Events = evs
		var alive []Run
		now := time.Now()
		for _, r := range RunsOf(mine) {
			if !r.Ended && now.Sub(r.Last) < quiet {
				alive = append(alive, r)
			}
		}
		if (len(alive) == 0 && len(mine) == prev) || now.After(end) {
			return alive, nil
		}
		prev = len(mine)
		time.Sleep(250 * time.Millisecond)
	}
}
