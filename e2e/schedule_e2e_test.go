package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

// fireCounts returns, per kind, how many fires of a workflow created an instance, and fails
// the test if two instances carry one fire time or an instance has no fire.
func (e *e2e) fireCounts(t *testing.T, name string) map[dao.FireKind]int {
	t.Helper()
	fires, err := e.db.FireList(context.Background(), name, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[dao.FireKind]int{}
	created := 0
	for _, f := range fires {
		if f.WorkflowInstanceID != nil {
			counts[f.Kind]++
			created++
		}
	}
	var instances, distinct int
	if err := e.db.SQL().QueryRowContext(context.Background(), `SELECT count(*), count(DISTINCT params->>'fire_time')
		FROM workflow_instance WHERE workflow_name = $1`, name).Scan(&instances, &distinct); err != nil {
		t.Fatal(err)
	}
	if instances != created || distinct != instances {
		t.Fatalf("%s: %d instances with %d distinct fire times for %d fires; want one instance per fire",
			name, instances, distinct, created)
	}
	return counts
}

// makeDue moves a schedule's next fire back to the start of the current minute minus
// minutesAgo, as if the cluster had been down since then: with an every-minute cron, that is
// a fire time, so the test need not wait for one. The schedule must start before it.
func (e *e2e) makeDue(t *testing.T, name string, minutesAgo int) time.Time {
	t.Helper()
	var at time.Time
	err := e.db.SQL().QueryRowContext(context.Background(), `UPDATE schedule
		SET next_fire_at = date_trunc('minute', now()) - make_interval(mins => $2)
		WHERE workflow_name = $1 RETURNING next_fire_at`, name, minutesAgo).Scan(&at)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestSubmitRejectsBadSchedules(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	tests := []struct {
		name, schedule, want string
	}{
		{"invalid cron", "{cron: '0 25 * * *'}", `line 2: schedule: cron "0 25 * * *" is invalid: end of range (25) above maximum (23): 25`},
		{"unknown zone", "{cron: '@daily', timezone: Mars/Olympus}", `line 2: schedule: timezone "Mars/Olympus" is not a known IANA time zone`},
		{"end before start", "{cron: '@daily', start: 2026-12-01, end: 2026-11-01}", "line 2: schedule: end 2026-11-01 is before start 2026-12-01"},
	}
	for _, tt := range tests {
		f := e.file(t, "bad.yaml", "name: bad\nschedule: "+tt.schedule+"\ntasks:\n  - {name: t, type: noop}\n")
		out, code := e.Run("submit", f)
		if code != 1 || !strings.Contains(out, "rejected, nothing stored") || !strings.Contains(out, tt.want) {
			t.Errorf("%s: exit %d, output:\n%s\nwant exit 1 and %q", tt.name, code, out, tt.want)
		}
	}
	var defs, schedules int
	_ = e.db.SQL().QueryRow(`SELECT (SELECT count(*) FROM workflow_definition), (SELECT count(*) FROM schedule)`).Scan(&defs, &schedules)
	if defs != 0 || schedules != 0 {
		t.Errorf("after rejected submits: %d definitions, %d schedules stored; want none", defs, schedules)
	}
}

// TestScheduleFireSurvivesAMasterKilledMidFire: a master is killed (SIGKILL) in the middle of
// a fire, after writing the fire and its instance and before committing; two other masters
// then race for the same fire, and it is made once, its instance running with its fire time.
func TestScheduleFireSurvivesAMasterKilledMidFire(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_MASTER_MISFIRE_THRESHOLD=5m")
	f := e.file(t, "tick.yaml", `
name: tick
schedule: {cron: "* * * * *", misfire: skip, start: 2026-01-01}
tasks:
  - {name: show, type: shell, command: 'echo "$ZKSCHED_PARAM_fire_time"'}
`)
	out, code := e.Run("submit", f)
	if code != 0 || !strings.Contains(out, "next fires:") {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	due := e.makeDue(t, "tick", 0)
	doomed := e.Master("doomed", "ZKSCHED_TEST_FAULT=schedule-before-commit")
	doomed.Wait(t, 30*time.Second)
	if doomed.KilledBy() != syscall.SIGKILL || !strings.Contains(doomed.Log(), "fault injection") {
		t.Fatalf("the doomed master did not die at the fault point; log:\n%s", doomed.Log())
	}
	if n := e.fireCounts(t, "tick"); len(n) != 0 {
		t.Fatalf("the killed master's fire survived: %v", n)
	}
	e.Master("master-1")
	e.Master("master-2")
	e.Worker("worker")
	var wfID int64
	waitUntil(t, 30*time.Second, "the fire to run", func() bool {
		fires, _ := e.db.FireList(context.Background(), "tick", 100)
		for _, fr := range fires {
			if fr.FireTime.Equal(due) && fr.WorkflowInstanceID != nil {
				wfID = *fr.WorkflowInstanceID
				wf, err := e.db.WorkflowGet(context.Background(), wfID)
				return err == nil && wf.State == dao.WorkflowSucceeded
			}
		}
		return false
	})
	e.fireCounts(t, "tick")
	show := e.tasks(t, wfID)["show"]
	if show.Output == nil || !strings.HasPrefix(*show.Output, due.UTC().Format("2006-01-02T15:04:05")) {
		t.Errorf("the task saw fire_time %v, want %s", show.Output, due.UTC().Format(time.RFC3339))
	}
}

// TestMisfirePoliciesAfterClusterStop stops the only master, then moves three every-minute
// schedules back ten minutes as if the cluster had been down that long, and starts a master
// again: skip drops the missed fires, run-once runs one of them, run-all runs its limit of
// them, and each runs the current minute's fire.
func TestMisfirePoliciesAfterClusterStop(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	for _, p := range []string{"skip", "run-once", "run-all, misfire-limit: 3"} {
		name := "mf-" + strings.Fields(strings.Trim(p, ","))[0]
		name = strings.TrimSuffix(name, ",")
		f := e.file(t, name+".yaml", fmt.Sprintf("name: %s\nschedule: {cron: '* * * * *', start: 2026-01-01, misfire: %s}\ntasks:\n  - {name: t, type: noop}\n", name, p))
		if out, code := e.Run("submit", f); code != 0 {
			t.Fatalf("submit %s: exit %d\n%s", name, code, out)
		}
	}
	m := e.Master("master")
	m.WaitLog(t, 20*time.Second, `"message":"registered"`)
	if err := m.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := m.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("master exit %d", code)
	}
	names := []string{"mf-skip", "mf-run-once", "mf-run-all"}
	for _, n := range names {
		e.makeDue(t, n, 10)
	}
	e.Master("master-again")
	waitUntil(t, 30*time.Second, "the masters to catch up", func() bool {
		rows, err := e.db.ScheduleList(context.Background())
		if err != nil {
			return false
		}
		for _, r := range rows {
			if r.NextFireAt == nil || !r.NextFireAt.After(time.Now().Add(-time.Second)) {
				return false
			}
		}
		return true
	})
	want := map[string]int{"mf-skip": 0, "mf-run-once": 1, "mf-run-all": 3}
	for _, n := range names {
		got := e.fireCounts(t, n)
		if got[dao.FireMisfire] != want[n] || got[dao.FireCron] < 1 {
			t.Errorf("%s: fires %v; want %d misfires and the on-time fire", n, got, want[n])
		}
	}
}

// TestBackfillAndScheduleCommands drives the command line: a backfill of six hourly fires of
// a workflow capped at one active instance runs them one at a time; schedule list shows the
// next fires; disable, enable and trigger --wait work.
func TestBackfillAndScheduleCommands(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	f := e.file(t, "hourly.yaml", `
name: hourly
max-active-instances: 1
schedule: {cron: "0 * * * *", timezone: Asia/Tokyo}
tasks:
  - {name: work, type: shell, command: 'sleep 0.2; echo "$ZKSCHED_PARAM_fire_date"'}
`)
	if out, code := e.Run("submit", f); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	out, code := e.Run("backfill", "hourly", "--from", "2026-11-01T00:00", "--to", "2026-11-01T05:00", "--dry-run")
	if code != 0 || strings.Count(out, "would be created") != 6 || !strings.Contains(out, "2026-11-01T00:00:00+09:00") {
		t.Fatalf("backfill --dry-run: exit %d\n%s", code, out)
	}
	e.Master("master")
	e.Worker("worker")
	out, code = e.Run("backfill", "hourly", "--from", "2026-11-01T00:00", "--to", "2026-11-01T05:00")
	if code != 0 || strings.Count(out, "workflow instance") != 6 {
		t.Fatalf("backfill: exit %d\n%s", code, out)
	}
	waitUntil(t, 60*time.Second, "the backfill to finish", func() bool {
		var done int
		_ = e.db.SQL().QueryRow(`SELECT count(*) FROM workflow_instance WHERE state = 'succeeded'`).Scan(&done)
		return done == 6
	})
	var overlaps int
	if err := e.db.SQL().QueryRow(`SELECT count(*) FROM workflow_instance a JOIN workflow_instance b
		ON a.id < b.id AND a.started_at < b.ended_at AND b.started_at < a.ended_at`).Scan(&overlaps); err != nil {
		t.Fatal(err)
	}
	if overlaps != 0 {
		t.Errorf("%d pairs of backfilled instances ran at the same time; max-active-instances is 1", overlaps)
	}
	out, _ = e.Run("backfill", "hourly", "--from", "2026-11-01T04:00", "--to", "2026-11-01T05:00")
	if strings.Count(out, "fired before") != 2 {
		t.Errorf("repeated backfill:\n%s\nwant both fire times reported as fired before", out)
	}

	out, code = e.Run("schedule", "list")
	if code != 0 || !strings.Contains(out, "hourly") || !strings.Contains(out, "Asia/Tokyo") || !strings.Contains(out, "+09:00") {
		t.Errorf("schedule list: exit %d\n%s", code, out)
	}
	if out, code := e.Run("schedule", "disable", "hourly"); code != 0 || !strings.Contains(out, "disabled") {
		t.Errorf("disable: exit %d\n%s", code, out)
	}
	if out, _ := e.Run("schedule", "list"); !strings.Contains(out, "disabled") {
		t.Errorf("schedule list after disable:\n%s", out)
	}
	if out, code := e.Run("schedule", "enable", "hourly"); code != 0 || !strings.Contains(out, "next fire") {
		t.Errorf("enable: exit %d\n%s", code, out)
	}
	out, code = e.Run("schedule", "trigger", "hourly", "--wait", "--param", "fire_date=by-hand")
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("trigger --wait: exit %d\n%s", code, out)
	}
	if out, code := e.Run("schedule", "trigger", "nothing"); code != 1 || !strings.Contains(out, "has no schedule") {
		t.Errorf("trigger of an unscheduled workflow: exit %d\n%s", code, out)
	}
}

// TestTaskWaitsForItsGroup: a task of a group no live worker serves stays queued — it does
// not fail — and submit --wait says what it waits for; a worker of the group then runs it.
func TestTaskWaitsForItsGroup(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	e.Master("master")
	e.Worker("worker")
	f := e.file(t, "gpu.yaml", `
name: gpu
tasks:
  - {name: prepare, type: shell, command: 'echo ready'}
  - {name: train, type: shell, command: 'echo trained', group: gpu, depends-on: [prepare]}
`)
	sub := e.Start("submit", nil, "submit", "--wait", f)
	sub.WaitLog(t, 30*time.Second, "queued: waiting for a worker of group gpu (none is running)")
	ts := e.tasks(t, 1)
	if ts["prepare"].State != dao.TaskSucceeded || ts["train"].State != dao.TaskQueued {
		t.Fatalf("prepare %s, train %s; want succeeded and queued", ts["prepare"].State, ts["train"].State)
	}
	if wf, _ := e.db.WorkflowGet(context.Background(), 1); wf.State != dao.WorkflowRunning {
		t.Fatalf("workflow is %s while its task waits for a worker; want running", wf.State)
	}
	e.Worker("gpu-worker", "ZKSCHED_WORKER_GROUPS=gpu")
	if code := sub.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("submit --wait exit %d once the gpu worker came:\n%s", code, sub.Log())
	}
	if o := e.tasks(t, 1)["train"].Output; o == nil || *o != "trained" {
		t.Errorf("train output %v", o)
	}
}
