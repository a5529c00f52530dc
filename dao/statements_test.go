package dao_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// Each statement is written whole, so a column list that several statements return is
// written out in each of them. The tests here keep those copies equal where a difference
// would be a bug: a struct field that one statement leaves out is silently zero.

// dbTags are the db tags of the fields of the struct v points to, in their order, those of
// embedded structs in their place.
func dbTags(v any) []string {
	var tags []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			if tag := f.Tag.Get("db"); tag != "" {
				tags = append(tags, tag)
			}
		}
	}
	walk(reflect.TypeOf(v).Elem())
	return tags
}

// taskScanOrder is the db tags of TaskInstance in the order its hand scan (the claims'
// queryTasks) reads the columns.
func taskScanOrder(t *testing.T) []string {
	t.Helper()
	var ti dao.TaskInstance
	v := reflect.ValueOf(&ti).Elem()
	byAddr := map[uintptr]string{}
	for i := range v.NumField() {
		byAddr[v.Field(i).Addr().Pointer()] = v.Type().Field(i).Tag.Get("db")
	}
	var order []string
	for _, p := range dao.TaskFields(&ti) {
		order = append(order, byAddr[reflect.ValueOf(p).Pointer()])
	}
	if len(order) != v.NumField() {
		t.Fatalf("TaskInstance.fields scans %d of its %d fields", len(order), v.NumField())
	}
	return order
}

// TestStatementColumnsMatchTheirStructs: every statement whose rows are read into a struct
// returns the struct's columns, by name; those the claims scan by hand in the scan's order.
func TestStatementColumnsMatchTheirStructs(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	task := taskScanOrder(t)
	workflow := dbTags(&dao.WorkflowInstance{}) // ending in running_ms, fresh
	plain, locked := workflow[:len(workflow)-2], workflow[:len(workflow)-1]
	none := pq.Array([]int64{})
	for _, c := range []struct {
		name  string
		query string
		args  []any
		want  []string
	}{
		{"TaskClaimQueuedShare", dao.ClaimSQL, []any{"w1", pq.Array([]string{"g"}), 1, pq.Array([]string{"w2"}), pq.Array([]int64{4}), 4, 1000}, task},
		{"TaskClaimQueuedUnpooledShare", dao.ClaimUnpooledSQL, []any{"w1", pq.Array([]string{"g"}), 1, pq.Array([]string{"w2"}), pq.Array([]int64{4}), 4, 1000}, task},
		{"TaskGet", dao.TaskGetSQL, []any{0}, task},
		{"TaskListByWorkflows", dao.ListByWorkflowsSQL, []any{none}, dbTags(&dao.TaskOutcome{})},
		{"TaskListByWorkflow", dao.TaskListByWorkflowSQL, []any{0}, task},
		{"TaskPageOfWorkflow, after", dao.TaskPageOfWorkflowAfterSQL, []any{0, "", 0, 1}, task},
		{"TaskPageOfWorkflow, before", dao.TaskPageOfWorkflowBeforeSQL, []any{0, "", 0, 1}, task},
		{"TaskBriefsOfWorkflow", dao.TaskBriefsOfWorkflowSQL, []any{0}, dbTags(&dao.TaskBrief{})},
		{"TaskListPage, older", dao.TaskListOlderSQL, []any{"", 0, "", "", nil, nil, 0, 1}, dbTags(&dao.TaskRow{})},
		{"TaskListPage, newer", dao.TaskListNewerSQL, []any{"", 0, "", "", nil, nil, 0, 1}, dbTags(&dao.TaskRow{})},
		{"WorkflowGet", dao.WorkflowGetSQL, []any{0}, plain},
		{"WorkflowParent", dao.WorkflowParentSQL, []any{0}, dbTags(&dao.ParentLink{})},
		{"WorkflowLockIfOwned", dao.LockIfOwnedSQL, []any{0, "m1"}, plain},
		{"WorkflowAdmitIfUnderCap", dao.AdmitSQL, []any{"wf", "m1", 1, 0}, plain},
		{"WorkflowAdmitKeyedIfUnderMax", dao.AdmitKeyedSQL, []any{"wf", "k", "m1", 0, nil, 1}, plain},
		{"WorkflowLockManyIfOwned", dao.LockManySQL, []any{none, "m1"}, locked},
		{"WorkflowLockUnowned", dao.LockUnownedSQL, []any{none}, locked},
		{"WorkflowClaimUnowned", dao.ClaimUnownedSQL, []any{"m1", 1}, workflow},
		{"WorkflowClaimStranded", dao.ClaimStrandedSQL, []any{"m1", 0, 0}, workflow},
		{"WorkflowListPage, older", dao.WorkflowListOlderSQL, []any{"", "", 0, 1}, append(slices.Clone(plain), "task_states")},
		{"WorkflowListPage, newer", dao.WorkflowListNewerSQL, []any{"", "", 0, 1}, append(slices.Clone(plain), "task_states")},
		{"ScheduleGet", dao.ScheduleGetSQL, []any{"wf"}, dbTags(&dao.Schedule{})},
		{"ScheduleLock", dao.ScheduleLockSQL, []any{"wf"}, dbTags(&dao.Schedule{})},
		{"ScheduleLockIfDue", dao.ScheduleLockIfDueSQL, []any{"wf", time.Now()}, dbTags(&dao.Schedule{})},
		{"ScheduleList", dao.ScheduleListSQL, nil, dbTags(&dao.ScheduleRow{})},
		{"TaskEndIfWaiting", dao.EndWaitingSQL, []any{0, "succeeded", "out", nil, "m", "t", ""}, dbTags(&dao.Signalled{})},
		{"TaskListWaitingPastTimeout", dao.WaitingPastTimeoutSQL, []any{1}, dbTags(&dao.WaitingPastTimeout{})},
		{"PurgeFinishedInstances", dao.PurgeInstancesSQL, []any{1, 1}, dbTags(&dao.PurgedInstances{})},
		{"PurgeFinishedLogs", dao.PurgeLogsSQL, []any{1, 1}, dbTags(&dao.PurgedLogs{})},
	} {
		t.Run(c.name, func(t *testing.T) {
			// On an empty schema, in a transaction rolled back: the statements write nothing.
			tx, err := db.SQL().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			rows, err := tx.QueryContext(ctx, c.query, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rows.Columns()
			rows.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("columns\n%v\nwant\n%v", got, c.want)
			}
		})
	}
}

// TestClaimsEndAlike: the two task claims reckon a worker's share alike (but for the pools'
// tasks they count), take their candidates without a pool and claim them alike, and so do the
// two claims of workflow instances.
func TestClaimsEndAlike(t *testing.T) {
	t.Parallel()
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	part := func(s, from, to string) string {
		s = norm(s)
		i := strings.Index(s, from)
		if i < 0 {
			t.Fatalf("no %q in %s", from, s)
		}
		j := strings.Index(s[i:], to)
		if j < 0 {
			t.Fatalf("no %q after %q in %s", to, from, s)
		}
		return s[i : i+j+len(to)]
	}
	for _, c := range []struct {
		name     string
		a, b     string
		from, to string
	}{
		{"task candidates", dao.ClaimSQL, dao.ClaimUnpooledSQL, "SELECT c.id, c.priority FROM share CROSS JOIN unnest(", "SKIP LOCKED) c"},
		{"task shares", dao.ClaimSQL, dao.ClaimUnpooledSQL, "ELSE ( SELECT least(", "AS claimable"},
		{"task claims", dao.ClaimSQL, dao.ClaimUnpooledSQL, "), claimed AS (", "ORDER BY priority DESC, id"},
		{"workflow claims", dao.ClaimUnownedSQL, dao.ClaimStrandedSQL, ") UPDATE workflow_instance w", "AS fresh"},
	} {
		if a, b := part(c.a, c.from, c.to), part(c.b, c.from, c.to); a != b {
			t.Errorf("%s differ:\n%s\n%s", c.name, a, b)
		}
	}
}

// TestStrandedIntervalIsStrandedAfter: the stranded claim's two intervals are StrandedAfter.
func TestStrandedIntervalIsStrandedAfter(t *testing.T) {
	t.Parallel()
	want := fmt.Sprintf("interval '%d seconds'", int(dao.StrandedAfter/time.Second))
	if n, all := strings.Count(dao.ClaimStrandedSQL, want), strings.Count(dao.ClaimStrandedSQL, "interval '"); n != 2 || all != 2 {
		t.Errorf("the statement has %q %d times among %d intervals; want it twice, alone", want, n, all)
	}
}

// TestRootsAreCreatedAsTasksAre: a root task created with its instance (WorkflowCreate) is
// the row TaskCreateMany makes of the same NewTask: the two statements insert the same
// columns from the same arrays.
func TestRootsAreCreatedAsTasksAre(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tasks := []dao.NewTask{
		{Name: "a", Type: "shell", Params: []byte(`{"command": "true"}`), State: dao.TaskQueued, Priority: 3,
			Group: "g2", Pool: "p", MaxRetries: 2, RetryInterval: 1500 * time.Millisecond, Timeout: 2 * time.Minute},
		{Name: "b", Type: "noop", State: dao.TaskSkipped, Group: "default"},
	}
	var fromCreate int64
	err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		raw := []byte(`{"name": "roots"}`)
		v, err := q.DefinitionEnsure(b.ctx, "roots", raw, daotest.Facts(t, raw))
		if err != nil {
			return err
		}
		fromCreate, err = q.WorkflowCreate(b.ctx, dao.Submission{Name: "roots", Version: v, Roots: tasks})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fromMany := daotest.Submit(t, b.db, "wf", map[string]any{"name": "wf"})
	many := slices.Clone(tasks)
	for i := range many {
		many[i].WorkflowInstanceID = fromMany
	}
	if _, err := b.db.TaskCreateMany(b.ctx, many); err != nil {
		t.Fatal(err)
	}
	read := func(wf int64) []dao.TaskInstance {
		got, err := b.db.TaskListByWorkflow(b.ctx, wf)
		if err != nil || len(got) != len(tasks) {
			t.Fatalf("tasks of %d = %v, %v", wf, got, err)
		}
		for i := range got {
			if (got[i].EndedAt == nil) != (tasks[i].State == dao.TaskQueued) {
				t.Errorf("%s: ended_at %v for a task %s", got[i].Name, got[i].EndedAt, tasks[i].State)
			}
			got[i].ID, got[i].WorkflowInstanceID, got[i].QueuedAt, got[i].EndedAt = 0, 0, time.Time{}, nil
		}
		return got
	}
	if roots, created := read(fromCreate), read(fromMany); !reflect.DeepEqual(roots, created) {
		t.Errorf("roots:\n%+v\ncreated by TaskCreateMany:\n%+v", roots, created)
	}
}

// walkPages is walk over the pages page returns, each item known by id.
func walkPages[T any](t *testing.T, page func(dao.PageCursor) (dao.Page[T], error), id func(T) int64) (down, up []int64) {
	t.Helper()
	return walk(t, func(c dao.PageCursor) ([]int64, int64, int64) {
		p, err := page(c)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, len(p.Items))
		for i, r := range p.Items {
			ids[i] = id(r)
		}
		return ids, p.Older, p.Newer
	})
}

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
			down, up := walkPages(t, func(c dao.PageCursor) (dao.Page[dao.TaskRow], error) {
				return b.db.TaskListPage(b.ctx, f, c)
			}, func(r dao.TaskRow) int64 { return r.ID })
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
			down, up := walkPages(t, func(c dao.PageCursor) (dao.Page[dao.WorkflowRow], error) {
				return b.db.WorkflowListPage(b.ctx, f, c)
			}, func(r dao.WorkflowRow) int64 { return r.ID })
			if !slices.Equal(down, want) || !slices.Equal(up, want) {
				t.Errorf("down the pages %v, back up %v; want %v", down, up, want)
			}
		})
	}
}
