package soak

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/lib/pq"
)

// assetHistory is what judgeAssets reads from the database at the end of a soak.
type assetHistory struct {
	// producers are the task instances that declare produces, with their final state.
	producers []assetProducer
	events    []assetEventRow
	// consumers are the workflows with on-assets, and runs their instances, by consumer.
	consumers []assetConsumerRow
	runs      map[string][]int64
	// consumed links events to the runs they started; pending are the events still queued.
	consumed []assetLink
	pending  []assetLink
	// emits are the events the workload emitted from outside.
	emits []emitSent
}

type assetProducer struct {
	ID        int64
	Succeeded bool
	Assets    []string
}

type assetEventRow struct {
	ID     int64  `db:"id"`
	Asset  string `db:"asset"`
	Task   *int64 `db:"task_instance_id"`
	Output string `db:"output"`
}

type assetConsumerRow struct {
	Name   string         `db:"workflow_name"`
	All    bool           `db:"all_of"`
	Assets pq.StringArray `db:"assets"`
}

// assetLink is an event queued for a consumer (Run 0) or taken by its run Run.
type assetLink struct {
	Consumer string `db:"consumer"`
	Event    int64  `db:"event_id"`
	Run      int64  `db:"workflow_instance_id"`
}

// judgeAssets checks the asset events against the tasks and the workload that wrote them,
// and the consumers' runs against the events: one event per asset a task produces for each
// success of the task (none for a failed or killed attempt, none twice), an emitted event
// written at most once per master asked and at least once if one acknowledged it; each
// event, for each consumer of its asset, either taken by one run or still queued, never
// both nor twice; each consumer run started on one event of each asset (all) or one of any
// (any); and, the settle phase having let the masters start every run that was due, no run
// left to start: the queue of an all consumer lacks an event of some asset, that of an any
// consumer is empty, so an all consumer ran min(#events of each asset) times (the events
// are taken oldest first, one of each asset per run, from queues that hold every event of
// the asset: the consumers were defined before any event) and an any consumer once per
// event.
func judgeAssets(h assetHistory) (problems []string, judged map[string]int) {
	judged = map[string]int{}
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// Events by producing task and asset, and by emitted tag.
	byTask := map[int64]map[string]int{}
	byTag := map[string][]int64{}
	perAsset := map[string][]int64{}
	for _, e := range h.events {
		perAsset[e.Asset] = append(perAsset[e.Asset], e.ID)
		if e.Task != nil {
			if byTask[*e.Task] == nil {
				byTask[*e.Task] = map[string]int{}
			}
			byTask[*e.Task][e.Asset]++
			continue
		}
		byTag[e.Output] = append(byTag[e.Output], e.ID)
	}
	for _, p := range h.producers {
		for _, a := range p.Assets {
			want := 0
			if p.Succeeded {
				want = 1
			}
			if got := byTask[p.ID][a]; got != want {
				add("assets: task %d (succeeded %v) wrote %d event(s) of %s; want %d", p.ID, p.Succeeded, got, a, want)
			} else {
				judged["asset events of producing tasks"]++
			}
			delete(byTask[p.ID], a)
		}
	}
	for task, left := range byTask {
		for a, n := range left {
			add("assets: %d event(s) of %s name task %d, which does not produce it", n, a, task)
		}
	}
	for _, e := range h.emits {
		n := len(byTag[e.Tag])
		switch {
		case n > e.Sent:
			add("assets: emitted event %s of %s was written %d times %v, asked of %d master(s)", e.Tag, e.Asset, n, byTag[e.Tag], e.Sent)
		case n == 0 && e.Acked:
			add("assets: emitted event %s of %s was acknowledged but not written", e.Tag, e.Asset)
		default:
			judged["emitted asset events"]++
		}
		delete(byTag, e.Tag)
	}
	for tag, ids := range byTag {
		add("assets: events %v from outside carry %q, which the workload never emitted", ids, tag)
	}

	// Every event of a consumer's asset, taken once or queued.
	type key struct {
		consumer string
		event    int64
	}
	taken := map[key][]int64{}
	queued := map[key]bool{}
	eventsOf := map[int64][]int64{} // run → events
	for _, l := range h.consumed {
		taken[key{l.Consumer, l.Event}] = append(taken[key{l.Consumer, l.Event}], l.Run)
		eventsOf[l.Run] = append(eventsOf[l.Run], l.Event)
	}
	for _, l := range h.pending {
		queued[key{l.Consumer, l.Event}] = true
	}
	for _, l := range h.consumed {
		if !slices.Contains(h.runs[l.Consumer], l.Run) {
			add("assets: event %d names run %d of %s, which is not one", l.Event, l.Run, l.Consumer)
		}
	}
	assetOf := map[int64]string{}
	for _, e := range h.events {
		assetOf[e.ID] = e.Asset
	}
	for _, c := range h.consumers {
		left := map[string]int{}
		for _, a := range c.Assets {
			for _, id := range perAsset[a] {
				k := key{c.Name, id}
				switch runs := taken[k]; {
				case len(runs) > 1:
					add("assets: event %d of %s started %d runs %v of %s; want at most one", id, a, len(runs), runs, c.Name)
				case len(runs) == 1 && queued[k]:
					add("assets: event %d of %s started run %d of %s and is still queued for it", id, a, runs[0], c.Name)
				case len(runs) == 0 && !queued[k]:
					add("assets: event %d of %s was neither taken by a run of %s nor queued for it", id, a, c.Name)
				case len(runs) == 0:
					left[a]++
				}
			}
		}
		runs := h.runs[c.Name]
		for _, run := range runs {
			evs := eventsOf[run]
			var names []string
			for _, e := range evs {
				names = append(names, assetOf[e])
			}
			sort.Strings(names)
			want := slices.Sorted(slices.Values(c.Assets))
			switch {
			case c.All && !slices.Equal(names, want):
				add("assets: run %d of %s started on events %v of %v; want one of each of %v", run, c.Name, evs, names, want)
			case !c.All && (len(names) != 1 || !slices.Contains(c.Assets, names[0])):
				add("assets: run %d of %s started on events %v of %v; want one event of one of %v", run, c.Name, evs, names, c.Assets)
			default:
				judged["asset-started runs"]++
			}
		}
		// Nothing left to start.
		due := len(left) > 0
		if c.All {
			for _, a := range c.Assets {
				due = due && left[a] > 0
			}
		}
		if due {
			add("assets: %s has queued events %v and no run for them after the settle phase", c.Name, left)
		}
		want, counts := 0, map[string]int{}
		for i, a := range c.Assets {
			n := len(perAsset[a])
			counts[a] = n
			switch {
			case !c.All:
				want += n
			case i == 0 || n < want:
				want = n
			}
		}
		if len(runs) != want {
			add("assets: %s ran %d times on the events %v; want %d", c.Name, len(runs), counts, want)
		}
	}
	return problems, judged
}

// judgeAssets loads the asset history and judges it.
func (v *verdict) judgeAssets() {
	ctx := context.Background()
	var h assetHistory
	v.w.mu.Lock()
	h.emits = append([]emitSent(nil), v.w.emits...)
	v.w.mu.Unlock()
	produces := map[string]map[string][]string{} // workflow → task → assets
	for _, k := range v.w.kinds {
		for _, t := range k.tasks {
			if as, ok := t["produces"].([]string); ok {
				if produces[k.name] == nil {
					produces[k.name] = map[string][]string{}
				}
				produces[k.name][t["name"].(string)] = as
			}
		}
	}
	if len(produces) == 0 {
		return
	}
	var tasks []struct {
		ID       int64  `db:"id"`
		Name     string `db:"name"`
		State    string `db:"state"`
		Workflow string `db:"workflow_name"`
	}
	db := v.db.SQL()
	err := db.SelectContext(ctx, &tasks, `SELECT t.id, t.name, t.state, w.workflow_name FROM task_instance t
		JOIN workflow_instance w ON w.id = t.workflow_instance_id WHERE w.workflow_name = ANY($1)`,
		pq.Array(slices.Collect(maps.Keys(produces))))
	if err == nil {
		err = db.SelectContext(ctx, &h.events, `SELECT id, asset, task_instance_id, coalesce(output, '') AS output FROM asset_event ORDER BY id`)
	}
	if err == nil {
		err = db.SelectContext(ctx, &h.consumers, `SELECT workflow_name, all_of, assets FROM asset_consumer ORDER BY workflow_name`)
	}
	if err == nil {
		err = db.SelectContext(ctx, &h.consumed, `SELECT consumer, event_id, workflow_instance_id FROM asset_consumption`)
	}
	if err == nil {
		err = db.SelectContext(ctx, &h.pending, `SELECT consumer, event_id, 0 AS workflow_instance_id FROM asset_pending`)
	}
	var runs []struct {
		ID       int64  `db:"id"`
		Workflow string `db:"workflow_name"`
	}
	if err == nil {
		err = db.SelectContext(ctx, &runs, `SELECT w.id, w.workflow_name FROM workflow_instance w
			JOIN asset_consumer c ON c.workflow_name = w.workflow_name`)
	}
	if err != nil {
		v.anomaly("assets: load the asset history: %v", err)
		return
	}
	for _, t := range tasks {
		if as := produces[t.Workflow][t.Name]; as != nil {
			h.producers = append(h.producers, assetProducer{ID: t.ID, Succeeded: t.State == "succeeded", Assets: as})
		}
	}
	h.runs = map[string][]int64{}
	for _, r := range runs {
		h.runs[r.Workflow] = append(h.runs[r.Workflow], r.ID)
	}
	problems, judged := judgeAssets(h)
	for _, p := range problems {
		v.anomaly("%s", p)
	}
	for what, n := range judged {
		if v.res.Flows == nil {
			v.res.Flows = map[string]int{}
		}
		v.res.Flows[what] += n
	}
}

// assetsDueSQL counts the asset consumers whose queue holds what a run needs: the drain
// waits until it is 0, so that the masters have started every asset-triggered run that was
// due before the verdict.
const assetsDueSQL = `SELECT count(*) FROM asset_consumer c
	WHERE (c.all_of AND NOT EXISTS (SELECT 1 FROM unnest(c.assets) a(asset)
			WHERE NOT EXISTS (SELECT 1 FROM asset_pending p WHERE p.consumer = c.workflow_name AND p.asset = a.asset)))
		OR (NOT c.all_of AND EXISTS (SELECT 1 FROM asset_pending p WHERE p.consumer = c.workflow_name))`
