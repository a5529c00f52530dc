package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// TestFactsEqualMigrationBackfill stores definitions as code before migration 00015 did (the
// spec's JSON alone), migrates, and checks that the facts the migration computed from the
// JSON are Facts of the spec, and that a definition stored now with Facts holds the same:
// whichever way a definition came to be, its instances are created alike. The specs are every
// combination of no tasks (absent or empty), one and many tasks, a timeout or none, a cap or
// none and each when-full policy, including combinations Validate refuses (when-full without
// a cap): the rule must agree with the backfill on anything that was ever stored.
func TestFactsEqualMigrationBackfill(t *testing.T) {
	t.Parallel()
	db := daotest.NewAtVersion(t, 14)
	ctx := context.Background()

	task := func(name string) workflow.Task {
		return workflow.Task{Name: name, Type: "noop", Group: workflow.DefaultGroup}
	}
	taskSets := []struct {
		name  string
		tasks []workflow.Task
	}{
		{"absent", nil},
		{"empty", []workflow.Task{}},
		{"one", []workflow.Task{task("a")}},
		{"many", []workflow.Task{task("a"), task("b"), task("c")}},
	}
	var specs []*workflow.Spec
	for _, ts := range taskSets {
		for _, timeout := range []time.Duration{0, 90 * time.Minute} {
			for _, maxActive := range []int{0, 3} {
				for _, whenFull := range []string{"", workflow.WhenFullQueue, workflow.WhenFullSkip} {
					specs = append(specs, &workflow.Spec{
						Name:               fmt.Sprintf("tasks-%s-timeout-%v-max-%d-when-full-%q", ts.name, timeout, maxActive, whenFull),
						Tasks:              ts.tasks,
						Timeout:            workflow.Duration(timeout),
						MaxActiveInstances: maxActive,
						WhenFull:           whenFull,
					})
				}
			}
		}
	}

	for _, spec := range specs {
		raw, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL().ExecContext(ctx, `INSERT INTO workflow_definition (name, version, spec)
			VALUES ($1, 1, $2::jsonb)`, spec.Name, string(raw)); err != nil {
			t.Fatalf("store %s before 00015: %v", spec.Name, err)
		}
	}
	applied, err := db.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(applied, "00015_definition_facts.sql") {
		t.Fatalf("migrate applied %v, want 00015_definition_facts.sql among them", applied)
	}
	const stored = "stored-"
	for _, spec := range specs {
		raw, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Tx(ctx, func(q *dao.Queries) error {
			_, err := q.DefinitionEnsure(ctx, stored+spec.Name, raw, lifecycle.Facts(spec))
			return err
		}); err != nil {
			t.Fatalf("store %s with its facts: %v", spec.Name, err)
		}
	}

	var rows []struct {
		Name         string `db:"name"`
		TaskCount    *int   `db:"task_count"`
		HasTimeout   bool   `db:"has_timeout"`
		MaxActive    *int   `db:"max_active"`
		WhenFullSkip bool   `db:"when_full_skip"`
	}
	if err := db.SQL().SelectContext(ctx, &rows, `SELECT name, task_count, has_timeout, max_active, when_full_skip
		FROM workflow_definition`); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Name] = show(dao.DefinitionFacts{TaskCount: r.TaskCount, HasTimeout: r.HasTimeout,
			MaxActive: r.MaxActive, WhenFullSkip: r.WhenFullSkip})
	}
	if want := 2 * len(specs); len(got) != want {
		t.Fatalf("%d definitions stored, want %d", len(got), want)
	}
	for _, spec := range specs {
		want := show(lifecycle.Facts(spec))
		if g := got[spec.Name]; g != want {
			t.Errorf("%s: backfilled by the migration %s, Facts %s", spec.Name, g, want)
		}
		if g := got[stored+spec.Name]; g != want {
			t.Errorf("%s: stored by DefinitionEnsure %s, Facts %s", spec.Name, g, want)
		}
	}
}

// show writes f with its nil counts spelled out, for comparing and for messages.
func show(f dao.DefinitionFacts) string {
	count := func(n *int) string {
		if n == nil {
			return "NULL"
		}
		return fmt.Sprint(*n)
	}
	return fmt.Sprintf("{task_count %s, has_timeout %t, max_active %s, when_full_skip %t}",
		count(f.TaskCount), f.HasTimeout, count(f.MaxActive), f.WhenFullSkip)
}

// TestFactsOfAForEach: a workflow with a for-each task has no task count, even of one task:
// its items are task instances of its own, and no worker's end of one may end the instance.
func TestFactsOfAForEach(t *testing.T) {
	t.Parallel()
	spec := parse(t, "name: each\ntasks:\n  - {name: sum, type: noop, for-each: \"a\\nb\"}\n")
	if f := lifecycle.Facts(spec); f.TaskCount != nil {
		t.Errorf("task count %d, want none", *f.TaskCount)
	}
}

// TestFactsOfNotifyAndDeadlines: notify: entries become one rule per event and channel
// target, each once; the deadlines are the workflow's and its tasks'.
func TestFactsOfNotifyAndDeadlines(t *testing.T) {
	t.Parallel()
	spec, err := workflow.Parse([]byte(`name: w
deadline: 1h
notify:
  - {on: [failure, timeout], webhook-url-env: OPS, email: [a@example.com]}
  - {on: [failure], email: [a@example.com, b@example.com]}
tasks:
  - {name: a, type: noop, deadline: 10m}
  - {name: b, type: noop}
`))
	if err != nil {
		t.Fatal(err)
	}
	f := lifecycle.Facts(spec)
	want := []dao.NotifyRule{
		{Event: "failure", Channel: "webhook", Target: "OPS"},
		{Event: "failure", Channel: "email", Target: "a@example.com"},
		{Event: "timeout", Channel: "webhook", Target: "OPS"},
		{Event: "timeout", Channel: "email", Target: "a@example.com"},
		{Event: "failure", Channel: "email", Target: "b@example.com"},
	}
	if !slices.Equal(f.Notify, want) {
		t.Errorf("rules = %+v; want %+v", f.Notify, want)
	}
	if f.Deadline != time.Hour || len(f.TaskDeadlines) != 1 || f.TaskDeadlines["a"] != 10*time.Minute {
		t.Errorf("deadlines = %s, %v; want 1h, a: 10m", f.Deadline, f.TaskDeadlines)
	}
}
