package soak

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/workflow"
)

// This file holds the checks of the flows a workflow builds beyond its DAG: for-each items
// (judgeForEach), child workflows (judgeChildren) and concurrency keys (judgeKeys). The
// history checker judges every task they create as any other; these judge what ties the
// tasks and instances together.

// flowLimits is what the kinds' definitions say the flow checks need.
type flowLimits struct {
	// maxParallel is the max-parallel of each for-each task, by "workflow/task".
	maxParallel map[string]int
	// keyMax is the concurrency max of each workflow with a concurrency key.
	keyMax map[string]int
	// childOnly are the workflows only a workflow task starts: the kinds of weight 0 that
	// no asset starts.
	childOnly map[string]bool
}

// limitsOf reads the flow limits from the kinds' definitions.
func limitsOf(ks []kind) (flowLimits, error) {
	l := flowLimits{maxParallel: map[string]int{}, keyMax: map[string]int{}, childOnly: map[string]bool{}}
	for _, k := range ks {
		if len(k.emit) > 0 {
			continue
		}
		spec, err := k.spec()
		if err != nil {
			return l, err
		}
		for _, t := range spec.Tasks {
			if t.ForEach != "" && t.MaxParallel > 0 {
				l.maxParallel[k.name+"/"+t.Name] = t.MaxParallel
			}
		}
		if spec.Concurrency != nil {
			l.keyMax[k.name] = spec.Concurrency.Max
		}
		if k.weight == 0 && spec.OnAssets == nil {
			l.childOnly[k.name] = true
		}
	}
	return l, nil
}

// loadFlows reads what the history does not hold: each child instance's parent task, and
// the output of each paused agent's wait step (its checkpoint).
func (v *verdict) loadFlows(ctx context.Context) error {
	var links []struct {
		ID   int64 `db:"id"`
		Task int64 `db:"parent_task_instance_id"`
	}
	if err := v.db.SQL().SelectContext(ctx, &links,
		`SELECT id, parent_task_instance_id FROM workflow_instance WHERE parent_task_instance_id IS NOT NULL`); err != nil {
		return fmt.Errorf("read the child instances' parents: %w", err)
	}
	var steps []struct {
		Task   int64  `db:"task_instance_id"`
		Output string `db:"output"`
	}
	if err := v.db.SQL().SelectContext(ctx, &steps,
		`SELECT task_instance_id, output FROM task_checkpoint WHERE step = $1`, approveStep); err != nil {
		return fmt.Errorf("read the checkpoints of step %s: %w", approveStep, err)
	}
	v.parentOf, v.approvals = map[int64]int64{}, map[int64]string{}
	for _, l := range links {
		v.parentOf[l.ID] = l.Task
	}
	for _, s := range steps {
		v.approvals[s.Task] = s.Output
	}
	return nil
}

// judgeForEach checks each for-each task's items: created in index order (ids rising with
// the index, no index missing), all of them succeeded when the parent did, and never more
// of one parent's items with a live run than its max-parallel, except the runs of a worker
// frozen whole (as judgePools).
func (v *verdict) judgeForEach(h *history.History, maxParallel map[string]int) {
	type parentKey struct {
		wf   int64
		task string
	}
	type item struct {
		index int
		task  dao.TaskInstance
	}
	workflows := map[int64]string{}
	for _, wf := range h.Workflows {
		workflows[wf.ID] = wf.WorkflowName
	}
	parents := map[parentKey]dao.TaskInstance{}
	items := map[parentKey][]item{}
	itemOf := map[int64]parentKey{}
	for _, t := range h.Tasks {
		k := parentKey{t.WorkflowInstanceID, t.Name}
		if t.ItemCount != nil {
			parents[k] = t
		}
		if name, i, ok := workflow.ParseItemName(t.Name); ok {
			k.task = name
			items[k] = append(items[k], item{i, t})
			itemOf[t.ID] = k
		}
	}
	keys := slices.SortedFunc(maps.Keys(items), func(a, b parentKey) int {
		return cmp.Or(cmp.Compare(a.wf, b.wf), strings.Compare(a.task, b.task))
	})
	for _, k := range keys {
		its := items[k]
		sort.Slice(its, func(i, j int) bool { return its[i].index < its[j].index })
		p, ok := parents[k]
		if !ok {
			v.anomaly("for-each: workflow instance %d has items of %q but no such parent", k.wf, k.task)
			v.suspects = append(v.suspects, k.wf)
			continue
		}
		name := fmt.Sprintf("task %d %q (workflow instance %d)", p.ID, p.Name, p.WorkflowInstanceID)
		v.flow("for-each parents")
		for i, it := range its {
			v.flow("for-each items")
			switch {
			case it.index != i:
				v.anomaly("for-each: %s has item %d but not item %d", name, it.index, i)
			case i > 0 && it.task.ID < its[i-1].task.ID:
				v.anomaly("for-each: %s created item %d (task %d) before item %d (task %d)", name, i, it.task.ID, i-1, its[i-1].task.ID)
			default:
				continue
			}
			v.suspects = append(v.suspects, k.wf)
			break
		}
		if len(its) > *p.ItemCount {
			v.anomaly("for-each: %s has %d items, more than its %d", name, len(its), *p.ItemCount)
			v.suspects = append(v.suspects, k.wf)
		}
		if p.State != dao.TaskSucceeded {
			continue
		}
		var outputs []string
		bad := p.Output == nil || json.Unmarshal([]byte(*p.Output), &outputs) != nil || len(outputs) != *p.ItemCount ||
			len(its) != *p.ItemCount
		for _, it := range its {
			bad = bad || it.task.State != dao.TaskSucceeded
		}
		if bad {
			states := make([]string, len(its))
			for i, it := range its {
				states[i] = string(it.task.State)
			}
			v.anomaly("for-each: %s succeeded with %d items of %d (%s), output %s", name, len(its), *p.ItemCount,
				strings.Join(states, " "), deref(p.Output))
			v.suspects = append(v.suspects, k.wf)
		}
	}

	type edge struct {
		at    time.Time
		delta int
		task  int64
	}
	edges := map[parentKey][]edge{}
	for _, r := range history.RunsOf(h.Events) {
		k, ok := itemOf[r.TaskID]
		if !ok || !r.Last.After(r.Start) || v.frozenDuring(r) {
			continue
		}
		edges[k] = append(edges[k], edge{r.Start, 1, r.TaskID}, edge{r.Last, -1, r.TaskID})
	}
	for _, k := range keys {
		limit, es := maxParallel[workflows[k.wf]+"/"+k.task], edges[k]
		if limit == 0 {
			continue
		}
		sort.Slice(es, func(i, j int) bool {
			if !es[i].at.Equal(es[j].at) {
				return es[i].at.Before(es[j].at)
			}
			return es[i].delta < es[j].delta
		})
		// An item counts once however many of its runs are alive: its own runs' overlaps are
		// the history checker's.
		alive := map[int64]int{}
		for _, e := range es {
			if alive[e.task] += e.delta; alive[e.task] == 0 {
				delete(alive, e.task)
			}
			if e.delta < 0 || len(alive) <= limit {
				continue
			}
			var who []string
			for _, it := range items[k] {
				if alive[it.task.ID] > 0 {
					who = append(who, fmt.Sprintf("%s (task %d)", it.task.Name, it.task.ID))
				}
			}
			v.anomaly("for-each: %q of workflow instance %d over its max-parallel of %d: %d items alive at +%.3fs: %s",
				k.task, k.wf, limit, len(alive), e.at.Sub(v.chaosAt).Seconds(), strings.Join(who, ", "))
			v.suspects = append(v.suspects, k.wf)
			break // one report per parent
		}
	}
}

// judgeChildren checks the workflow tasks against their children (parentOf: each child
// instance's parent task): each workflow task that started has exactly one child, and
// succeeded if and only if its child did; each child's parent task exists; no instance of a
// workflow only workflow tasks start (childOnly) is without a parent: one would be a child
// created twice, or left behind by a creation that did not commit its task.
func (v *verdict) judgeChildren(h *history.History, parentOf map[int64]int64, childOnly map[string]bool) {
	instances := map[int64]dao.WorkflowInstance{}
	children := map[int64][]int64{}
	for _, wf := range h.Workflows {
		instances[wf.ID] = wf
		if p, ok := parentOf[wf.ID]; ok {
			children[p] = append(children[p], wf.ID)
			v.flow("child instances")
		} else if childOnly[wf.WorkflowName] {
			v.anomaly("child workflows: instance %d of %s, which only a workflow task starts, has no parent task", wf.ID, wf.WorkflowName)
			v.suspects = append(v.suspects, wf.ID)
		}
	}
	tasks := map[int64]bool{}
	for _, t := range h.Tasks {
		tasks[t.ID] = true
		if t.Type != workflow.TypeWorkflow {
			continue
		}
		name := fmt.Sprintf("task %d %q (workflow instance %d)", t.ID, t.Name, t.WorkflowInstanceID)
		cs, want := children[t.ID], 1
		if t.State == dao.TaskSkipped {
			want = 0 // never started
		}
		if len(cs) != want {
			v.anomaly("child workflows: %s, %s, has %d child instance(s) %v, want %d", name, t.State, len(cs), cs, want)
			v.suspects = append(v.suspects, t.WorkflowInstanceID)
			continue
		}
		if want == 0 {
			continue
		}
		c := instances[cs[0]]
		if (t.State == dao.TaskSucceeded) != (c.State == dao.WorkflowSucceeded) {
			v.anomaly("child workflows: %s ended %s, its child instance %d %s", name, t.State, c.ID, c.State)
			v.suspects = append(v.suspects, t.WorkflowInstanceID, c.ID)
		}
	}
	for _, child := range slices.Sorted(maps.Keys(parentOf)) {
		if p := parentOf[child]; !tasks[p] {
			v.anomaly("child workflows: instance %d names parent task %d, which is not in the history", child, p)
			v.suspects = append(v.suspects, child)
		}
	}
}

// judgeKeys checks the instances of each concurrency key (keyMax: each workflow's max):
// never more than the max of them running at once — by their [started_at, ended_at], the
// database's clock, which admits them — and started in submit (id) order. A freeze explains
// nothing here: admission is the database's, under the key's lock.
func (v *verdict) judgeKeys(h *history.History, keyMax map[string]int) {
	type key struct{ workflow, key string }
	byKey := map[key][]dao.WorkflowInstance{}
	for _, wf := range h.Workflows {
		if wf.ConcurrencyKey != nil && wf.StartedAt != nil && keyMax[wf.WorkflowName] > 0 {
			k := key{wf.WorkflowName, *wf.ConcurrencyKey}
			byKey[k] = append(byKey[k], wf)
			v.flow("keyed instances")
		}
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].workflow < keys[j].workflow || (keys[i].workflow == keys[j].workflow && keys[i].key < keys[j].key)
	})
	span := func(wf dao.WorkflowInstance) string {
		end := "-"
		if wf.EndedAt != nil {
			end = fmt.Sprintf("%+.3fs", wf.EndedAt.Sub(v.chaosAt).Seconds())
		}
		return fmt.Sprintf("%d (%+.3fs..%s)", wf.ID, wf.StartedAt.Sub(v.chaosAt).Seconds(), end)
	}
	for _, k := range keys {
		wfs, limit := byKey[k], keyMax[k.workflow]
		sort.Slice(wfs, func(i, j int) bool { return wfs[i].ID < wfs[j].ID })
	judge:
		for i, a := range wfs {
			alive := []string{span(a)}
			for j, b := range wfs {
				if j < i && a.StartedAt.Before(*b.StartedAt) {
					v.anomaly("concurrency key %q of %s: instance %s started before instance %s, submitted ahead of it",
						k.key, k.workflow, span(a), span(b))
					v.suspects = append(v.suspects, a.ID, b.ID)
					break judge // one report per key
				}
				if j != i && !b.StartedAt.After(*a.StartedAt) && (b.EndedAt == nil || b.EndedAt.After(*a.StartedAt)) {
					alive = append(alive, span(b))
				}
			}
			if len(alive) > limit {
				v.anomaly("concurrency key %q of %s over its max of %d: %d instances running as %d started: %s",
					k.key, k.workflow, limit, len(alive), a.ID, strings.Join(alive, ", "))
				v.suspects = append(v.suspects, a.ID)
				break
			}
		}
	}
}
