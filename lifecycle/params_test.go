package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
)

// TestSubmitChecksParams: a submission whose params its workflow does not declare, or of the
// wrong type, is refused with a *ParamsError and stores nothing (not the definition stored
// with it, not a trigger's fire); the params taken are stored as tasks read them, and a
// schedule's fires keep giving fire_time and fire_date.
func TestSubmitChecksParams(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	refused := func(what string, err error, want string) {
		t.Helper()
		var pe *lifecycle.ParamsError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want a *ParamsError saying %q", what, err, want)
		}
	}
	nothingCreated := func(what string) {
		t.Helper()
		if id, err := db.WorkflowLastID(ctx); err != nil || id != 0 {
			t.Errorf("%s: the last instance is %d, %v; want none", what, id, err)
		}
	}

	file := "name: typed\nparams:\n  region: eu\n  size: {type: integer, default: 3}\ntasks:\n  - {name: a, type: noop}\n"
	spec := parse(t, file)
	for _, tc := range []struct {
		given map[string]string
		want  string
	}{
		{map[string]string{"regoin": "us"}, `params: "regoin" is not a param of workflow typed (did you mean "region"?): it declares region, size`},
		{map[string]string{"size": "ten"}, `params: size must be an integer (decimal, 64 bits), not "ten"`},
	} {
		_, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: spec, File: []byte(file),
			Run: &lifecycle.Run{Params: tc.given}}, now)
		refused("Define with a run", err, tc.want)
	}
	if v, err := db.DefinitionLatest(ctx, "typed"); err != nil || v != 0 {
		t.Errorf("after refused runs the definition's latest version is %d, %v; want none stored", v, err)
	}
	nothingCreated("Define with refused params")

	// Submit, on a stored definition.
	stored, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: spec, File: []byte(file)}, now)
	if err != nil {
		t.Fatal(err)
	}
	submit := func(params string) (int64, error) {
		var id int64
		err := db.Tx(ctx, func(q *dao.Queries) error {
			var err error
			id, err = lifecycle.Submit(ctx, q, lifecycle.Submission{Spec: spec, Version: stored.Version, Params: json.RawMessage(params)})
			return err
		})
		return id, err
	}
	_, err = submit(`{"size": "3.5", "extra": "x"}`)
	refused("Submit", err, "params: \"extra\" is not a param of workflow typed: it declares region, size\nparams: size must be an integer")
	nothingCreated("Submit with refused params")
	id, err := submit(`{"size": "+007"}`)
	if err != nil {
		t.Fatalf("Submit of good params: %v", err)
	}
	wf, err := db.WorkflowGet(ctx, id)
	var got map[string]string
	if err != nil || json.Unmarshal(wf.Params, &got) != nil || got["size"] != "7" || len(got) != 1 {
		t.Errorf("the instance's params = %s, %v; want {\"size\": \"7\"}", wf.Params, err)
	}

	// A schedule's trigger: refused params fire nothing; a fire's own params are taken.
	sched := "name: nightly\nparams: {region: eu}\nschedule: {cron: '0 2 * * *'}\ntasks:\n  - {name: a, type: noop}\n"
	if _, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: parse(t, sched), File: []byte(sched)}, now); err != nil {
		t.Fatal(err)
	}
	_, err = lifecycle.TriggerSchedule(ctx, db, "nightly", map[string]string{"regoin": "us"}, "test", now, nil)
	refused("TriggerSchedule", err, `params: "regoin" is not a param of workflow nightly (did you mean "region"?): it declares region`)
	if fires, err := db.FireList(ctx, "nightly", 10); err != nil || len(fires) != 0 {
		t.Errorf("fires after a refused trigger = %+v, %v; want none", fires, err)
	}
	res, err := lifecycle.TriggerSchedule(ctx, db, "nightly", map[string]string{"region": "us"}, "test", now, nil)
	if err != nil || res.Instance == 0 {
		t.Fatalf("TriggerSchedule = %+v, %v; want an instance", res, err)
	}
	wf, err = db.WorkflowGet(ctx, res.Instance)
	got = nil
	if err != nil || json.Unmarshal(wf.Params, &got) != nil || got["region"] != "us" || got["fire_date"] != "2026-03-01" || got["fire_time"] == "" {
		t.Errorf("the trigger's instance params = %s, %v; want region, fire_time and fire_date", wf.Params, err)
	}
}

// TestChildParamsRefused: a workflow task whose params its child workflow refuses fails with
// the reason, and starts no child.
func TestChildParamsRefused(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store(ctx, t, db, "name: inner\nparams: {region: eu}\ntasks:\n  - {name: hold, type: noop, group: nobody}\n")
	id := submit(ctx, t, db, parse(t, "name: outer\ntasks:\n  - {name: start, type: workflow, workflow: inner, params: {regoin: us}}\n"))
	d := lifecycle.NewDriver(db, "m1", clockwork.NewRealClock())
	if _, err := d.ClaimAndAdvance(ctx, 10); err != nil {
		t.Fatal(err)
	}
	tasks, err := db.TaskListByWorkflow(ctx, id)
	want := `task "start": params: "regoin" is not a param of workflow inner (did you mean "region"?): it declares region`
	if err != nil || len(tasks) != 1 || tasks[0].State != dao.TaskFailed || tasks[0].Error == nil || *tasks[0].Error != want {
		t.Fatalf("tasks = %+v, %v; want start failed: %s", tasks, err, want)
	}
	if got := children(ctx, t, db, id); len(got) != 0 {
		t.Errorf("children = %v; want none", got)
	}
}
