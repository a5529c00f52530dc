package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// TestDefine: storing a file stores the definition, its schedule or the instance asked for,
// and an audit row for each, in one transaction; a when-full: skip workflow at its cap stores
// nothing at all, not even the new version.
func TestDefine(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	by := &dao.AuditEvent{Actor: "alice", Role: "admin", Client: "10.0.0.1", Outcome: dao.AuditOK}
	parse := func(src string) *workflow.Spec {
		t.Helper()
		spec, err := workflow.Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return spec
	}
	audits := func() []dao.AuditEvent {
		t.Helper()
		rows, _, err := db.AuditList(ctx, dao.AuditFilter{}, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}

	file := "name: once\nparams: {k: {}}\nmax-active-instances: 1\nwhen-full: skip\ntasks:\n  - {name: a, type: noop}\n"
	got, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: parse(file), File: []byte(file),
		Run: &lifecycle.Run{Params: map[string]string{"k": "v"}, Priority: 2}, By: by}, now)
	if err != nil || got.Version != 1 || got.Instance == 0 || got.Schedule != nil || got.Unscheduled {
		t.Fatalf("Define = %+v, %v; want version 1 and an instance", got, err)
	}
	wf, err := db.WorkflowGet(ctx, got.Instance)
	if err != nil || wf.WorkflowName != "once" || wf.WorkflowVersion != 1 || wf.Priority != 2 || string(wf.Params) != `{"k": "v"}` {
		t.Fatalf("instance = %+v, %v; want once v1, priority 2, the params", wf, err)
	}
	rows := audits()
	if len(rows) != 2 {
		t.Fatalf("audit rows = %+v; want the definition's and the instance's", rows)
	}
	// Newest first.
	sub, def := rows[0], rows[1]
	var stored, want map[string]any
	_ = json.Unmarshal(def.Params, &stored)
	_ = json.Unmarshal(dao.DefinitionAuditParams("once", 1, []byte(file)), &want)
	if def.Action != dao.AuditDefinitionStore || def.Target != "definition/once" || def.Actor != "alice" ||
		def.Client != "10.0.0.1" || fmt.Sprint(stored) != fmt.Sprint(want) {
		t.Errorf("definition row = %+v, params %v; want %v", def, stored, want)
	}
	var p struct {
		Name     string            `json:"name"`
		Version  int               `json:"version"`
		Params   map[string]string `json:"params"`
		Priority int               `json:"priority"`
	}
	if err := json.Unmarshal(sub.Params, &p); err != nil || sub.Action != dao.AuditWorkflowSubmit ||
		sub.Target != fmt.Sprintf("workflow-instance/%d", got.Instance) || sub.Actor != "alice" ||
		p.Name != "once" || p.Version != 1 || p.Params["k"] != "v" || p.Priority != 2 {
		t.Errorf("instance row = %+v (params %+v, %v)", sub, p, err)
	}

	// At its cap, with a changed file: the error, and neither version 2 nor a row.
	changed := file + "# changed\n"
	spec := parse(changed)
	spec.Description = "changed"
	if got, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: spec, File: []byte(changed), Run: &lifecycle.Run{}, By: by}, now); !errors.Is(err, dao.ErrWorkflowFull) {
		t.Fatalf("Define at the cap = %+v, %v; want dao.ErrWorkflowFull", got, err)
	}
	if v, err := db.DefinitionLatest(ctx, "once"); err != nil || v != 1 {
		t.Errorf("latest version after the refused submit = %d, %v; want 1", v, err)
	}
	if n := len(audits()); n != 2 {
		t.Errorf("%d audit rows after the refused submit; want the 2 before it", n)
	}

	// A file with a schedule stores it and runs nothing, even when asked to; the next file
	// without one removes it.
	sched := "name: nightly\nschedule: {cron: '0 3 * * *', timezone: UTC}\ntasks:\n  - {name: a, type: noop}\n"
	got, err = lifecycle.Define(ctx, db, lifecycle.Definition{Spec: parse(sched), File: []byte(sched), Run: &lifecycle.Run{}, By: by}, now)
	if err != nil || got.Schedule == nil || got.Instance != 0 || got.Schedule.NextFireAt == nil ||
		!got.Schedule.NextFireAt.Equal(time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC)) {
		t.Fatalf("Define with a schedule = %+v, %v; want the schedule stored, next fire at 03:00 the next day, no instance", got, err)
	}
	if n := len(audits()); n != 3 {
		t.Errorf("%d audit rows after storing the scheduled file; want 3 (no instance row)", n)
	}
	plain := "name: nightly\ntasks:\n  - {name: a, type: noop}\n"
	got, err = lifecycle.Define(ctx, db, lifecycle.Definition{Spec: parse(plain), File: []byte(plain)}, now)
	if err != nil || got.Version != 2 || got.Schedule != nil || !got.Unscheduled || got.Instance != 0 {
		t.Fatalf("Define without the schedule = %+v, %v; want version 2, the schedule removed, nothing run", got, err)
	}
	if s, err := db.ScheduleGet(ctx, "nightly"); !errors.Is(err, dao.ErrNoSchedule) {
		t.Errorf("schedule after the file without one = %+v, %v; want none", s, err)
	}
	if n := len(audits()); n != 3 {
		t.Errorf("%d audit rows after a store without By; want still 3", n)
	}
}
