package soak

import (
	"context"
)

// judgeHooks checks the webhook deliveries against the runs they started: a delivery sent
// once or more, to one master or several, started at most one run, and exactly one if a
// master acknowledged it (201, or 200 for a duplicate).
func (v *verdict) judgeHooks() {
	v.w.mu.Lock()
	deliveries := make(map[string]bool, len(v.w.deliveries))
	for id, acked := range v.w.deliveries {
		deliveries[id] = acked
	}
	v.w.mu.Unlock()
	if len(deliveries) == 0 {
		return
	}
	var rows []struct {
		ID       int64  `db:"id"`
		Delivery string `db:"delivery"`
	}
	if err := v.db.SQL().SelectContext(context.Background(), &rows, `SELECT id, coalesce(params->>'delivery', '') AS delivery
		FROM workflow_instance WHERE workflow_name = 'soak-hook'`); err != nil {
		v.anomaly("hooks: list the runs of soak-hook: %v", err)
		return
	}
	runs := map[string][]int64{}
	for _, r := range rows {
		runs[r.Delivery] = append(runs[r.Delivery], r.ID)
	}
	for id, acked := range deliveries {
		switch n := len(runs[id]); {
		case n > 1:
			v.anomaly("hooks: delivery %s started %d runs %v; want one", id, n, runs[id])
			v.suspects = append(v.suspects, runs[id]...)
		case n == 0 && acked:
			v.anomaly("hooks: delivery %s was acknowledged but started no run", id)
		case n == 1:
			v.flow("webhook deliveries started one run")
		}
		delete(runs, id)
	}
	for id, wfs := range runs {
		v.anomaly("hooks: runs %v of soak-hook name delivery %q, which the workload never sent", wfs, id)
	}
}
