package dao_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
)

func auditEvent(actor, action, target string) dao.AuditEvent {
	return dao.AuditEvent{Actor: actor, Role: "operator", Action: action, Target: target,
		Params: dao.AuditParams(map[string]any{"n": 1}), Client: "127.0.0.7"}
}

// auditAll reads every event matching f by following the cursor, limit at a time.
func auditAll(t *testing.T, b *testBundle, f dao.AuditFilter, limit int) []dao.AuditEvent {
	t.Helper()
	var all []dao.AuditEvent
	before := int64(0)
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("the cursor never ends")
		}
		evs, next, err := b.db.AuditList(b.ctx, f, before, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > limit {
			t.Fatalf("page of %d events, limit %d", len(evs), limit)
		}
		all = append(all, evs...)
		if next == 0 {
			return all
		}
		if len(evs) != limit || next != evs[len(evs)-1].ID {
			t.Fatalf("page of %d events with next %d: want a full page ending at next", len(evs), next)
		}
		before = next
	}
}

func ids(evs []dao.AuditEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func TestAuditInsertAndList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ev := auditEvent("alice", dao.AuditTaskKill, "task-instance/7")
	if err := b.db.AuditInsert(b.ctx, ev); err != nil {
		t.Fatal(err)
	}
	evs, next, err := b.db.AuditList(b.ctx, dao.AuditFilter{}, 0, 10)
	if err != nil || len(evs) != 1 || next != 0 {
		t.Fatalf("list = %v, next %d, %v; want the one event", evs, next, err)
	}
	got := evs[0]
	if got.ID == 0 || got.At.IsZero() || time.Since(got.At) > time.Minute || got.Actor != "alice" || got.Role != "operator" ||
		got.Action != dao.AuditTaskKill || got.Target != "task-instance/7" || string(got.Params) != `{"n": 1}` ||
		got.Client != "127.0.0.7" || got.Outcome != dao.AuditOK {
		t.Fatalf("event = %+v (params %s)", got, got.Params)
	}
	if err := b.db.AuditInsert(b.ctx, dao.AuditEvent{Action: dao.AuditTaskKill}); err == nil {
		t.Error("an event without an actor was recorded")
	}
	for _, limit := range []int{0, dao.MaxAuditPage + 1} {
		if _, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{}, 0, limit); err == nil {
			t.Errorf("limit %d accepted", limit)
		}
	}
}

func TestAuditListFiltersAndPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	targets := []string{"task-instance/1", "workflow-instance/2", "schedule/a_b", "schedule/axb", "schedule/a%c"}
	actors := []string{"alice", "bob", "cli:root"}
	actions := []string{dao.AuditTaskKill, dao.AuditWorkflowStop, dao.AuditScheduleTrigger}
	const n = 47
	for i := range n {
		ev := auditEvent(actors[i%len(actors)], actions[i%len(actions)], targets[i%len(targets)])
		if i%4 == 0 {
			ev.Outcome = dao.AuditRefused("conflict: it is succeeded")
		}
		if err := b.db.AuditInsert(b.ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	// The first ten events happened on an earlier day. Rewriting the trail takes turning its
	// guard off, as the table's owner.
	if _, err := b.db.SQL().Exec(`ALTER TABLE audit_event DISABLE TRIGGER audit_event_append_only;
		UPDATE audit_event SET at = timestamptz '2026-01-01T00:00:00Z' + id * interval '1 second'
		WHERE id IN (SELECT id FROM audit_event ORDER BY id LIMIT 10)`); err != nil {
		t.Fatal(err)
	}
	every := auditAll(t, b, dao.AuditFilter{}, dao.MaxAuditPage)
	if len(every) != n {
		t.Fatalf("%d events listed, want %d", len(every), n)
	}
	if !slices.IsSortedFunc(every, func(a, b dao.AuditEvent) int { return int(b.ID - a.ID) }) {
		t.Fatalf("not newest first: %v", ids(every))
	}
	// Any page size reads the same events, each once, in the same order.
	for _, limit := range []int{1, 2, 5, 46, 47, 48} {
		if got := auditAll(t, b, dao.AuditFilter{}, limit); !slices.Equal(ids(got), ids(every)) {
			t.Errorf("pages of %d: %v, want %v", limit, ids(got), ids(every))
		}
	}
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		f    dao.AuditFilter
		keep func(dao.AuditEvent) bool
	}{
		{"actor", dao.AuditFilter{Actor: "bob"}, func(e dao.AuditEvent) bool { return e.Actor == "bob" }},
		{"action", dao.AuditFilter{Action: dao.AuditWorkflowStop}, func(e dao.AuditEvent) bool { return e.Action == dao.AuditWorkflowStop }},
		{"target prefix", dao.AuditFilter{TargetPrefix: "schedule/"}, func(e dao.AuditEvent) bool { return strings.HasPrefix(e.Target, "schedule/") }},
		// LIKE's wildcards in a prefix are plain characters.
		{"target prefix with _", dao.AuditFilter{TargetPrefix: "schedule/a_"}, func(e dao.AuditEvent) bool { return e.Target == "schedule/a_b" }},
		{"target prefix with %", dao.AuditFilter{TargetPrefix: "schedule/a%"}, func(e dao.AuditEvent) bool { return e.Target == "schedule/a%c" }},
		{"whole target", dao.AuditFilter{TargetPrefix: "task-instance/1"}, func(e dao.AuditEvent) bool { return e.Target == "task-instance/1" }},
		{"since", dao.AuditFilter{Since: day.Add(24 * time.Hour)}, func(e dao.AuditEvent) bool { return e.ID > every[n-10].ID }},
		{"until", dao.AuditFilter{Until: day.Add(24 * time.Hour)}, func(e dao.AuditEvent) bool { return e.ID <= every[n-10].ID }},
		{"window", dao.AuditFilter{Since: day.Add(time.Duration(every[n-3].ID) * time.Second), Until: day.Add(time.Duration(every[n-6].ID) * time.Second)},
			func(e dao.AuditEvent) bool { return e.ID >= every[n-3].ID && e.ID < every[n-6].ID }},
		{"all at once", dao.AuditFilter{Actor: "alice", Action: dao.AuditTaskKill, TargetPrefix: "task-"},
			func(e dao.AuditEvent) bool {
				return e.Actor == "alice" && e.Action == dao.AuditTaskKill && e.Target == "task-instance/1"
			}},
	}
	for _, c := range cases {
		var want []int64
		for _, e := range every {
			if c.keep(e) {
				want = append(want, e.ID)
			}
		}
		if len(want) == 0 {
			t.Fatalf("%s: the case selects nothing; it would test nothing", c.name)
		}
		for _, limit := range []int{3, dao.MaxAuditPage} {
			if got := ids(auditAll(t, b, c.f, limit)); !slices.Equal(got, want) {
				t.Errorf("%s, pages of %d: %v, want %v", c.name, limit, got, want)
			}
		}
	}
}

// TestAuditedActionsCommitOnlyWithTheirRecord: the operators' actions write their audit row in
// the transaction of the change. With the row refused (a trigger on audit_event), the change
// does not happen; without it, it happens with exactly its row.
func TestAuditedActionsCommitOnlyWithTheirRecord(t *testing.T) {
	t.Parallel()
	actions := []struct {
		name string
		// prepare makes an instance the action applies to; act does it; changed reports
		// whether its change is there.
		run func(t *testing.T, b *testBundle) (act func(dao.AuditEvent) error, changed func() bool)
	}{
		{"task kill", func(t *testing.T, b *testBundle) (func(dao.AuditEvent) error, func() bool) {
			wf := b.queue(t, 1, "g")
			tasks, err := b.db.TaskListByWorkflow(b.ctx, wf)
			if err != nil {
				t.Fatal(err)
			}
			id := tasks[0].ID
			return func(ev dao.AuditEvent) error { _, err := lifecycle.Kill(b.ctx, b.db, id, &ev); return err },
				func() bool {
					got, _ := b.db.TaskGet(b.ctx, id)
					return got.State == dao.TaskKilled || got.KillRequested
				}
		}},
		{"workflow stop", func(t *testing.T, b *testBundle) (func(dao.AuditEvent) error, func() bool) {
			wf := b.queue(t, 2, "g")
			return func(ev dao.AuditEvent) error { _, err := b.db.WorkflowStopIfActive(b.ctx, wf, &ev); return err },
				func() bool {
					w, _ := b.db.WorkflowGet(b.ctx, wf)
					tasks, _ := b.db.TaskListByWorkflow(b.ctx, wf)
					return w.State == dao.WorkflowStopped || tasks[0].State != dao.TaskQueued || tasks[1].KillRequested
				}
		}},
		{"submit", submitAction(map[string]any{"name": "sub"})},
		// A capped workflow with when-full: skip is created apart from the shared statement.
		{"submit capped", submitAction(map[string]any{"name": "sub", "max-active-instances": 1, "when-full": "skip"})},
		{"rerun", func(t *testing.T, b *testBundle) (func(dao.AuditEvent) error, func() bool) {
			wf, failed := b.failedTask(t, "g")
			return func(ev dao.AuditEvent) error {
					_, err := b.db.TaskRerunIfFailedOrKilled(b.ctx, wf, []int64{failed.ID}, nil, &ev)
					return err
				},
				func() bool { got, _ := b.db.TaskGet(b.ctx, failed.ID); return got.State != dao.TaskFailed }
		}},
	}
	for _, a := range actions {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			t.Run("record refused", func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				act, changed := a.run(t, b)
				daotest.RefuseAudit(t, b.db)
				err := act(auditEvent("alice", a.name, "x/1"))
				if err == nil || !strings.Contains(err.Error(), "audit_event refused by the test") {
					t.Fatalf("action with its record refused: %v, want the record's error", err)
				}
				if changed() {
					t.Fatal("the change committed without its audit record")
				}
			})
			t.Run("recorded", func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				act, changed := a.run(t, b)
				if err := act(auditEvent("alice", a.name, "x/1")); err != nil {
					t.Fatal(err)
				}
				evs, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{}, 0, 10)
				if !changed() || err != nil || len(evs) != 1 || evs[0].Action != a.name || evs[0].Actor != "alice" {
					t.Fatalf("changed %v; events %v, %v: want the change and its one row", changed(), evs, err)
				}
			})
		})
	}
}

// submitAction submits an instance of the definition spec (JSON) through the shared
// submitter (DB.WorkflowCreateGrouped), with its audit row.
func submitAction(spec map[string]any) func(t *testing.T, b *testBundle) (func(dao.AuditEvent) error, func() bool) {
	return func(t *testing.T, b *testBundle) (func(dao.AuditEvent) error, func() bool) {
		raw, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		var version int
		if err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
			version, err = q.DefinitionEnsure(b.ctx, "sub", raw, daotest.Facts(t, raw))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var id int64
		return func(ev dao.AuditEvent) error {
				var err error
				id, err = b.db.WorkflowCreateGrouped(b.ctx, dao.Submission{Name: "sub", Version: version, Audit: &ev,
					Roots: []dao.NewTask{{Name: "t", Type: "noop", State: dao.TaskQueued, Group: "g"}}})
				return err
			}, func() bool {
				var n int
				if err := b.db.SQL().Get(&n, `SELECT count(*) FROM workflow_instance`); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					// The row names the instance it records.
					evs, _, _ := b.db.AuditList(b.ctx, dao.AuditFilter{}, 0, 10)
					if len(evs) != 1 || evs[0].Target != fmt.Sprintf("workflow-instance/%d", id) {
						t.Errorf("audit rows %+v; want one naming instance %d", evs, id)
					}
				}
				return n > 0
			}
	}
}

// TestAuditRowOfARefusedActionIsNotWritten: an action its instance's state refuses writes no
// row of its own (the caller records the refusal apart).
func TestAuditRowOfARefusedActionIsNotWritten(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.queue(t, 1, "g")
	if _, err := b.db.WorkflowStopIfActive(b.ctx, wf, nil); err != nil {
		t.Fatal(err)
	}
	ev := auditEvent("alice", dao.AuditWorkflowStop, fmt.Sprint(wf))
	if _, err := b.db.WorkflowStopIfActive(b.ctx, wf, &ev); err == nil {
		t.Fatal("second stop accepted")
	}
	if evs, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{}, 0, 10); err != nil || len(evs) != 0 {
		t.Fatalf("events %v, %v after a refused stop; want none", evs, err)
	}
}

// TestAuditTrailIsAppendOnly: no statement changes or removes a recorded event, whoever sends
// it, short of disabling the table's trigger.
func TestAuditTrailIsAppendOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.db.AuditInsert(b.ctx, auditEvent("alice", dao.AuditTaskKill, "task-instance/1")); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE audit_event SET actor = 'mallory'`,
		`DELETE FROM audit_event`,
		`TRUNCATE audit_event`,
	} {
		if _, err := b.db.SQL().Exec(stmt); err == nil || !strings.Contains(err.Error(), "audit_event is append-only") {
			t.Errorf("%s: %v, want it refused", stmt, err)
		}
	}
	evs, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{}, 0, 10)
	if err != nil || len(evs) != 1 || evs[0].Actor != "alice" {
		t.Fatalf("events %+v, %v after the attempts; want alice's one", evs, err)
	}
}

// TestSubmissionsTogetherEachCommitWithTheirRow: submissions arriving at once, some audited
// and some not, share the submitter's statements; each audited instance has exactly its row,
// the others none.
func TestSubmissionsTogetherEachCommitWithTheirRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var version int
	if err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		var err error
		version, err = q.DefinitionEnsure(b.ctx, "many", []byte(`{"name": "many"}`), dao.DefinitionFacts{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const n = 60
	ids := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sub := dao.Submission{Name: "many", Version: version,
				Roots: []dao.NewTask{{Name: "t", Type: "noop", State: dao.TaskQueued, Group: "g"}}}
			if i%3 != 0 {
				ev := auditEvent(fmt.Sprintf("user-%d", i), dao.AuditWorkflowSubmit, "")
				sub.Audit = &ev
			}
			ids[i], errs[i] = b.db.WorkflowCreateGrouped(b.ctx, sub)
		})
	}
	wg.Wait()
	evs, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{}, 0, dao.MaxAuditPage)
	if err != nil {
		t.Fatal(err)
	}
	byTarget := map[string][]string{}
	for _, e := range evs {
		byTarget[e.Target] = append(byTarget[e.Target], e.Actor)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		got := byTarget[fmt.Sprintf("workflow-instance/%d", ids[i])]
		want := []string{fmt.Sprintf("user-%d", i)}
		if i%3 == 0 {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("instance %d (submit %d): audit actors %v, want %v", ids[i], i, got, want)
		}
	}
	if len(evs) != n-n/3 {
		t.Errorf("%d audit rows, want %d", len(evs), n-n/3)
	}
}

// TestAuditRefusalsFoldAndOnlyTheirCountChanges: identical refusals of a minute are one row
// counting them, concurrent ones included; another outcome, actor or action is a row of its
// own; a change's row is never folded. The trigger lets through only the count of a folded
// refusal going up: not a change's, not a count going down, not any other column.
func TestAuditRefusalsFoldAndOnlyTheirCountChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	refusal := func(actor, action, target, outcome string) dao.AuditEvent {
		ev := auditEvent(actor, action, target)
		ev.Outcome = dao.AuditRefused(outcome)
		return ev
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.db.AuditRefusal(b.ctx, refusal("vic", dao.AuditTaskKill, fmt.Sprintf("task-instance/%d", i), "forbidden: needs operator")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, ev := range []dao.AuditEvent{
		refusal("vic", dao.AuditTaskKill, "task-instance/1", "not found: no task 1"),
		refusal("eve", dao.AuditTaskKill, "task-instance/1", "forbidden: needs operator"),
		refusal("vic", dao.AuditTaskRerun, "task-instance/1", "forbidden: needs operator"),
	} {
		if err := b.db.AuditRefusal(b.ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := b.db.AuditInsert(b.ctx, auditEvent("olga", dao.AuditTaskKill, "task-instance/1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.db.AuditRefusal(b.ctx, auditEvent("olga", dao.AuditTaskKill, "task-instance/1")); err == nil {
		t.Errorf("AuditRefusal took an outcome that is no refusal")
	}
	evs := auditAll(t, b, dao.AuditFilter{}, 50)
	got := map[string]int{}
	for _, ev := range evs {
		got[ev.Actor+" "+ev.Action+" "+ev.Outcome] += ev.Count
	}
	want := map[string]int{
		"vic task.kill refused: forbidden: needs operator": 40, "vic task.kill refused: not found: no task 1": 1,
		"eve task.kill refused: forbidden: needs operator": 1, "vic task.rerun refused: forbidden: needs operator": 1,
		"olga task.kill ok": 2,
	}
	if len(evs) != 6 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%d rows counting %v; want 6 counting %v", len(evs), got, want)
	}

	for _, stmt := range []string{
		`UPDATE audit_event SET count = count + 1 WHERE outcome = 'ok'`,
		`UPDATE audit_event SET count = count - 1 WHERE actor = 'vic'`,
		`UPDATE audit_event SET count = count + 1, target = 'task-instance/999' WHERE actor = 'vic'`,
		`UPDATE audit_event SET count = count + 1, outcome = 'ok' WHERE actor = 'vic'`,
	} {
		if _, err := b.db.SQL().Exec(stmt); err == nil || !strings.Contains(err.Error(), "audit_event is append-only") {
			t.Errorf("%s: %v, want it refused", stmt, err)
		}
	}
}

// TestAuditRowIsAlwaysWritten: a target or outcome of any length or bytes (60 KB, random and
// incompressible, invalid UTF-8, NUL) is clipped to 256 bytes with the hash of the rest, and
// the row is written, for a change as for a refusal.
func TestAuditRowIsAlwaysWritten(t *testing.T) {
	t.Parallel()
	b := setup(t)
	random := make([]byte, 8<<10)
	for i := range random {
		random[i] = byte(33 + (i*7919+i*i*31)%94)
	}
	for i, target := range []string{
		"schedule/" + strings.Repeat("a", 60<<10),
		"schedule/" + string(random),
		"schedule/bad\xff\xfeutf8\x00nul",
		"schedule/" + strings.Repeat("é", 300),
	} {
		ev := auditEvent("vic", dao.AuditScheduleEnable, target)
		ev.Outcome = dao.AuditRefused("bad request: " + target)
		if err := b.db.AuditRefusal(b.ctx, ev); err != nil {
			t.Errorf("refusal %d: %v", i, err)
		}
		ev.Outcome = ""
		if err := b.db.AuditInsert(b.ctx, ev); err != nil {
			t.Errorf("change %d: %v", i, err)
		}
	}
	evs := auditAll(t, b, dao.AuditFilter{}, 50)
	if len(evs) != 8 {
		t.Fatalf("%d rows, want 8", len(evs))
	}
	targets := map[string]bool{}
	for _, ev := range evs {
		if len(ev.Target) > 256 || len(ev.Outcome) > 256 || !utf8.ValidString(ev.Target) || strings.Contains(ev.Target, "\x00") {
			t.Errorf("row %d: target of %d bytes, outcome of %d: %.60q", ev.ID, len(ev.Target), len(ev.Outcome), ev.Target)
		}
		targets[ev.Target] = true
	}
	if len(targets) != 4 {
		t.Errorf("%d distinct targets, want 4: the clipped ones differ by their hash", len(targets))
	}
}
