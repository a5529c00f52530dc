package master

import (
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/lifecycle"
)

// TestScheduleChangesCommitOnlyWithTheirRecord: enable, disable, trigger and backfill write
// their audit row in their own transaction. With the row refused (a trigger on audit_event)
// nothing changes; without it, each change leaves its one row.
func TestScheduleChangesCommitOnlyWithTheirRecord(t *testing.T) {
	t.Parallel()
	// What each does, and what it changes: the schedule's enabled flag or its fires.
	type state struct {
		enabled bool
		fires   int
	}
	changes := []struct {
		action string
		do     func(b *scheduleBundle, ev *dao.AuditEvent) error
		want   state // after the change, from enabled and no fires
	}{
		{dao.AuditScheduleDisable, func(b *scheduleBundle, ev *dao.AuditEvent) error {
			_, err := lifecycle.SetScheduleEnabled(b.ctx, b.db, "au", false, b.clock.Now(), ev)
			return err
		}, state{false, 0}},
		{dao.AuditScheduleTrigger, func(b *scheduleBundle, ev *dao.AuditEvent) error {
			_, err := lifecycle.TriggerSchedule(b.ctx, b.db, "au", map[string]string{"k": "v"}, "test", b.clock.Now(), ev)
			return err
		}, state{true, 1}},
		{dao.AuditBackfill, func(b *scheduleBundle, ev *dao.AuditEvent) error {
			_, err := lifecycle.Backfill(b.ctx, b.db, "au", utcTime("2026-11-01 00:00"), utcTime("2026-11-01 02:00"), "test", false, ev)
			return err
		}, state{true, 3}},
	}
	for _, c := range changes {
		for _, refuse := range []bool{true, false} {
			name := c.action + "/recorded"
			if refuse {
				name = c.action + "/record refused"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := setupSchedule(t, utcTime("2026-11-20 10:00"))
				b.submit(t, scheduled("au", `{cron: "0 * * * *"}`, "params: {k: {}}\n"))
				if refuse {
					daotest.RefuseAudit(t, b.db)
				}
				ev := &dao.AuditEvent{Actor: "cli:root", Role: "admin", Action: c.action, Target: "schedule/au", Client: "host"}
				err := c.do(b, ev)
				s := b.schedule(t, "au")
				got := state{s.Enabled, len(b.fired(t, "au"))}
				evs, _, lerr := b.db.AuditList(b.ctx, dao.AuditFilter{}, 0, 10)
				if lerr != nil {
					t.Fatal(lerr)
				}
				if refuse {
					if err == nil || !strings.Contains(err.Error(), "audit_event refused by the test") {
						t.Fatalf("%s with its record refused: %v, want the record's error", c.action, err)
					}
					if (got != state{true, 0}) {
						t.Fatalf("%s committed without its record: %+v", c.action, got)
					}
					return
				}
				if err != nil || got != c.want || len(evs) != 1 || evs[0].Action != c.action || evs[0].Actor != "cli:root" {
					t.Fatalf("%s: %v, state %+v (want %+v), events %+v", c.action, err, got, c.want, evs)
				}
			})
		}
	}
}

// TestDryBackfillIsNotAudited: a dry run changes nothing and records nothing.
func TestDryBackfillIsNotAudited(t *testing.T) {
	t.Parallel()
	b := setupSchedule(t, utcTime("2026-11-20 10:00"))
	b.submit(t, scheduled("au", `{cron: "0 * * * *"}`, "params: {k: {}}\n"))
	ev := &dao.AuditEvent{Actor: "cli:root", Role: "admin", Action: dao.AuditBackfill, Target: "schedule/au", Client: "host"}
	if _, err := lifecycle.Backfill(b.ctx, b.db, "au", utcTime("2026-11-01 00:00"), utcTime("2026-11-01 02:00"), "test", true, ev); err != nil {
		t.Fatal(err)
	}
	if evs, _, err := b.db.AuditList(b.ctx, dao.AuditFilter{}, 0, 10); err != nil || len(evs) != 0 {
		t.Fatalf("events %v, %v after a dry run; want none", evs, err)
	}
}
