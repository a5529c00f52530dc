package master

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestDeadlinesQueuedByTwoMasters: two masters polling queue a passed deadline once each, of
// the workflow and of its task that has not ended, and the instance goes on unchanged; an
// instance that ended within its deadline queues none.
func TestDeadlinesQueuedByTwoMasters(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	m := runMaster(t, db, Config{ID: "m1", PollInterval: 50 * time.Millisecond})
	runMaster(t, db, Config{ID: "m2", PollInterval: 50 * time.Millisecond})
	file := `
name: late
deadline: 300ms
notify: [{on: [deadline, success], webhook-url-env: OPS_WEBHOOK}]
tasks:
  - {name: build, type: noop, deadline: 300ms}
  - {name: ship, type: noop, depends-on: [build]}
`
	late := submitFile(t, db, file, nil)
	build := claimOne(t, m, db, "build")
	m.waitFor(t, "both deadlines to be queued", func() bool {
		ns, _ := db.NotificationList(ctx, "", 0, 100)
		return len(ns) >= 2
	})
	// A few polls more of both masters queue nothing more.
	time.Sleep(300 * time.Millisecond)
	ns, err := db.NotificationList(ctx, "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, n := range ns {
		subjects = append(subjects, n.Event+": "+n.Subject)
	}
	slices.Sort(subjects)
	want := []string{"deadline: workflow " + fmt.Sprint(late) + " deadline", "deadline: workflow " + fmt.Sprint(late) + " task build deadline"}
	if !slices.Equal(subjects, want) {
		t.Fatalf("notifications %v; want %v", subjects, want)
	}
	if wf, err := db.WorkflowGet(ctx, late); err != nil || wf.State != dao.WorkflowRunning {
		t.Fatalf("instance = %+v, %v; want running still", wf, err)
	}
	if ti, err := db.TaskGet(ctx, build.ID); err != nil || ti.State != dao.TaskRunning {
		t.Fatalf("build = %+v, %v; want running still", ti, err)
	}
}
