package dao_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
)

// walk pages through a keyset list with pages of two, from the newest to the oldest and then
// back, and returns the ids each way read, newest first.
func walk(t *testing.T, page func(dao.PageCursor) (items []int64, older, newer int64)) (down, up []int64) {
	t.Helper()
	c := dao.PageCursor{Limit: 2}
	var last []int64
	var newer int64
	for {
		items, older, nw := page(c)
		down, last, newer = append(down, items...), items, nw
		if older == 0 {
			break
		}
		c = dao.PageCursor{Before: older, Limit: 2}
	}
	up = slices.Clone(last)
	for newer != 0 {
		items, older, nw := page(dao.PageCursor{After: newer, Limit: 2})
		if older == 0 {
			t.Errorf("the page after %d has no older page", newer)
		}
		up, newer = append(slices.Clone(items), up...), nw
	}
	return down, up
}

// TestListFiltersAreCopiesOfEachOther: the statements of a keyset list (its pages either
// way, and whether there are any) carry the same filter, each side of the task list its own.
func TestListFiltersAreCopiesOfEachOther(t *testing.T) {
	t.Parallel()
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, c := range []struct {
		name       string
		statements []string
		filters    []string
	}{
		{"tasks", dao.TaskListStatements, []string{
			`WHERE t.state <> 'running' AND $1::text <> 'running'
			   AND ($1 = '' OR t.state = $1) AND ($2::bigint = 0 OR t.workflow_instance_id = $2)
			   AND ($3::text = '' OR t.name = $3) AND ($4::text = '' OR t.worker_id = $4)
			   AND ($5::timestamptz IS NULL OR t.queued_at >= $5) AND ($6::timestamptz IS NULL OR t.queued_at < $6)
			   AND `,
			`WHERE t.state = 'running' AND $1 IN ('', 'running')
			   AND ($1 = '' OR t.state = $1) AND ($2 = 0 OR t.workflow_instance_id = $2)
			   AND ($3 = '' OR t.name = $3) AND ($4 = '' OR t.worker_id = $4)
			   AND ($5 IS NULL OR t.queued_at >= $5) AND ($6 IS NULL OR t.queued_at < $6)
			   AND `,
		}},
		{"workflows", dao.WorkflowListStatements, []string{
			`WHERE ($1::text = '' OR w.state = $1) AND ($2::text = '' OR w.workflow_name = $2)
			  AND `,
		}},
	} {
		for i, st := range c.statements {
			for _, f := range c.filters {
				if n := strings.Count(norm(st), norm(f)); n != 1 {
					t.Errorf("%s statement %d holds the filter %d times, want once:\n%s\nfilter:\n%s", c.name, i, n, st, f)
				}
			}
		}
	}
}

// TestListStatementsFilterAlike: the two statements of each list (older and newer pages)
// apply the same filters, on both sides of the task list (running or not): every filter,
// read down the pages and back up, gives the rows it selects.
func TestListStatementsFilterAlike(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf1, wf2 := b.queue(t, 9, "g"), b.queue(t, 5, "g")
	if _, err := b.db.SQL().Exec(`UPDATE task_instance SET
		state = (ARRAY['queued', 'running', 'succeeded', 'failed'])[id % 4 + 1],
		worker_id = CASE WHEN id % 4 > 0 THEN 'w' || (id % 3) END,
		queued_at = now() - id * interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	var all []dao.TaskInstance
	for _, wf := range []int64{wf2, wf1} {
		tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, tasks...)
	}
	slices.SortFunc(all, func(a, b dao.TaskInstance) int { return int(b.ID - a.ID) })
	mid := all[len(all)/2].QueuedAt
	for _, c := range []struct {
		name string
		f    dao.TaskFilter
	}{
		{"none", dao.TaskFilter{}},
		{"queued", dao.TaskFilter{State: dao.TaskQueued}},
		{"running", dao.TaskFilter{State: dao.TaskRunning}},
		{"failed", dao.TaskFilter{State: dao.TaskFailed}},
		{"workflow", dao.TaskFilter{WorkflowInstanceID: wf2}},
		{"name", dao.TaskFilter{Name: "t3"}},
		{"worker", dao.TaskFilter{WorkerID: "w1"}},
		{"running on a worker", dao.TaskFilter{State: dao.TaskRunning, WorkerID: "w2"}},
		{"queued from", dao.TaskFilter{QueuedFrom: mid}},
		{"queued to", dao.TaskFilter{QueuedTo: mid}},
	} {
		f := c.f
		t.Run(c.name, func(t *testing.T) {
			var want []int64
			for _, ti := range all {
				if (f.State == "" || ti.State == f.State) && (f.WorkflowInstanceID == 0 || ti.WorkflowInstanceID == f.WorkflowInstanceID) &&
					(f.Name == "" || ti.Name == f.Name) && (f.WorkerID == "" || ti.WorkerID != nil && *ti.WorkerID == f.WorkerID) &&
					(f.QueuedFrom.IsZero() || !ti.QueuedAt.Before(f.QueuedFrom)) && (f.QueuedTo.IsZero() || ti.QueuedAt.Before(f.QueuedTo)) {
					want = append(want, ti.ID)
				}
			}
			if len(want) < 1 {
				t.Fatalf("the filter selects nothing of %d tasks", len(all))
			}
			down, up := walk(t, func(c dao.PageCursor) ([]int64, int64, int64) {
				p, err := b.db.TaskListPage(b.ctx, f, c)
				if err != nil {
					t.Fatal(err)
				}
				ids := make([]int64, len(p.Items))
				for i, r := range p.Items {
					ids[i] = r.ID
				}
				return ids, p.Older, p.Newer
			})
			if !slices.Equal(down, want) || !slices.Equal(up, want) {
				t.Errorf("down the pages %v, back up %v; want %v", down, up, want)
			}
		})
	}
	for _, c := range []struct {
		name string
		f    dao.WorkflowFilter
		want []int64
	}{
		{"workflows", dao.WorkflowFilter{}, []int64{wf2, wf1}},
		{"running workflows", dao.WorkflowFilter{State: dao.WorkflowRunning}, []int64{wf2, wf1}},
		{"failed workflows", dao.WorkflowFilter{State: dao.WorkflowFailed}, nil},
		{"workflows by name", dao.WorkflowFilter{Name: "wf"}, []int64{wf2, wf1}},
		{"workflows of another name", dao.WorkflowFilter{Name: "none"}, nil},
	} {
		f, want := c.f, c.want
		t.Run(c.name, func(t *testing.T) {
			down, up := walk(t, func(c dao.PageCursor) ([]int64, int64, int64) {
				p, err := b.db.WorkflowListPage(b.ctx, f, c)
				if err != nil {
					t.Fatal(err)
				}
				ids := make([]int64, len(p.Items))
				for i, r := range p.Items {
					ids[i] = r.ID
				}
				return ids, p.Older, p.Newer
			})
			if !slices.Equal(down, want) || !slices.Equal(up, want) {
				t.Errorf("down the pages %v, back up %v; want %v", down, up, want)
			}
		})
	}
}
