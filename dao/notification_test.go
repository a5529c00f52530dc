package dao_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// notifySpec is a workflow with a notify: list hearing every workflow event on a webhook.
func notifySpec(name string) map[string]any {
	return map[string]any{"name": name, "notify": []map[string]any{{
		"on":              []string{"failure", "success", "timeout", "task-failed", "deadline"},
		"webhook-url-env": "OPS_WEBHOOK",
	}}}
}

// notifications returns every notification of the schema, oldest first.
func (b *testBundle) notifications(t *testing.T) []dao.Notification {
	t.Helper()
	ns, err := b.db.NotificationList(b.ctx, "", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(ns)
	return ns
}

// events returns "event channel target" for each notification, oldest first.
func events(ns []dao.Notification) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Event+" "+n.Channel+" "+n.Target)
	}
	return out
}

// TestNotificationQueuedWithTheEnd: a workflow instance's end queues its event once per rule,
// in the end's own transaction (a rolled-back end queues nothing), and an instance of a
// workflow without rules queues nothing while no default is set.
func TestNotificationQueuedWithTheEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := daotest.Submit(t, b.db, "n", notifySpec("n"))
	quiet := daotest.Submit(t, b.db, "quiet", map[string]any{"name": "quiet"})
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	// A rolled-back end queues nothing.
	err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
		if err := q.WorkflowFinishIfOwned(b.ctx, wf, "m1", dao.WorkflowFailed, "boom"); err != nil {
			return err
		}
		return fmt.Errorf("roll back")
	})
	if err == nil || len(b.notifications(t)) != 0 {
		t.Fatalf("rolled-back end: %v, notifications %v; want none", err, b.notifications(t))
	}
	for _, id := range []int64{wf, quiet} {
		if err := b.db.WorkflowFinishIfOwned(b.ctx, id, "m1", dao.WorkflowFailed, "boom"); err != nil {
			t.Fatal(err)
		}
	}
	ns := b.notifications(t)
	if got, want := events(ns), []string{"failure webhook OPS_WEBHOOK"}; !slices.Equal(got, want) {
		t.Fatalf("notifications = %v; want %v", got, want)
	}
	n := ns[0]
	if n.State != dao.NotificationPending || *n.WorkflowInstanceID != wf || *n.WorkflowName != "n" || n.IdempotencyKey == "" {
		t.Fatalf("notification = %+v; want pending, of instance %d", n, wf)
	}
	var p struct{ State, Error string }
	if err := json.Unmarshal(n.Payload, &p); err != nil || p.State != "failed" || p.Error != "boom" {
		t.Fatalf("payload = %s, %v; want state failed, error boom", n.Payload, err)
	}
}

// TestNotificationTimeoutAndTaskFailed: a workflow failed by its timeout sends timeout, not
// failure, whatever its error says (the event is read from end_reason, not from the text), and
// its payload carries the reason; a task failed after its retries sends task-failed, a retry
// nothing.
func TestNotificationTimeoutAndTaskFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := daotest.Submit(t, b.db, "n", notifySpec("n"))
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{
		{WorkflowInstanceID: wf, Name: "a", Type: "noop", State: dao.TaskQueued, Group: "g", MaxRetries: 1},
		{WorkflowInstanceID: wf, Name: "b", Type: "noop", State: dao.TaskQueued, Group: "g"},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	if _, err := b.db.TaskFinishManyIfRunning(b.ctx, []dao.Finish{
		{Token: got[0].Token(), Result: dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskQueued, Retry: true, Error: "retry me"}},
		{Token: got[1].Token(), Result: dao.AttemptResult{Outcome: dao.OutcomeFailed, Next: dao.TaskFailed, Error: "boom"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.WorkflowTimeOutIfOwned(b.ctx, wf, "m1", "ran past its limit"); err != nil {
		t.Fatal(err)
	}
	ns := b.notifications(t)
	if got, want := events(ns), []string{"task-failed webhook OPS_WEBHOOK", "timeout webhook OPS_WEBHOOK"}; !slices.Equal(got, want) {
		t.Fatalf("notifications = %v; want %v", got, want)
	}
	var p struct {
		EndReason string `json:"end_reason"`
	}
	if err := json.Unmarshal(ns[1].Payload, &p); err != nil || p.EndReason != "timeout" {
		t.Fatalf("timeout's payload = %s, %v; want end_reason timeout", ns[1].Payload, err)
	}
	if *ns[0].TaskInstanceID != got[1].ID {
		t.Fatalf("task-failed is of task %d; want %d", *ns[0].TaskInstanceID, got[1].ID)
	}
}

// TestNotificationDefaultRules: the default rules apply to a workflow without rules of its
// own, not to one with, and to the cluster's events.
func TestNotificationDefaultRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	def := []dao.NotifyRule{
		{Event: dao.EventSuccess, Channel: dao.ChannelEmail, Target: "ops@example.com"},
		{Event: dao.EventNodeFenced, Channel: dao.ChannelWebhook, Target: "CLUSTER", Slack: true},
		{Event: dao.EventFailover, Channel: dao.ChannelWebhook, Target: "CLUSTER", Slack: true},
	}
	if err := b.db.NotifyDefaultReplace(b.ctx, def); err != nil {
		t.Fatal(err)
	}
	// A second replace leaves the same rules, not twice as many.
	if err := b.db.NotifyDefaultReplace(b.ctx, def); err != nil {
		t.Fatal(err)
	}
	if rules, err := b.db.NotifyRules(b.ctx, "", 0); err != nil || len(rules) != 3 {
		t.Fatalf("default rules = %v, %v; want 3", rules, err)
	}
	own := daotest.Submit(t, b.db, "own", notifySpec("own"))
	plain := daotest.Submit(t, b.db, "plain", map[string]any{"name": "plain"})
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{own, plain} {
		if err := b.db.WorkflowFinishIfOwned(b.ctx, id, "m1", dao.WorkflowSucceeded, ""); err != nil {
			t.Fatal(err)
		}
	}
	ev := dao.FailoverEvent{NodeID: "w9", Role: "worker", LostAt: time.Now(), FencedAt: time.Now(), Leader: "m1"}
	if _, err := b.db.FailoverEventRecord(b.ctx, ev); err != nil {
		t.Fatal(err)
	}
	// A repeat that moved work sends failover; one that moved nothing sends nothing more.
	ev.TasksRequeued = 2
	for range 2 {
		if _, err := b.db.FailoverEventRecord(b.ctx, ev); err != nil {
			t.Fatal(err)
		}
		ev.TasksRequeued = 0
	}
	want := []string{"success webhook OPS_WEBHOOK", "success email ops@example.com",
		"node-fenced webhook CLUSTER", "failover webhook CLUSTER"}
	if got := events(b.notifications(t)); !slices.Equal(got, want) {
		t.Fatalf("notifications = %v; want %v", got, want)
	}
}

// TestNotificationClaimAndDone: a claimed notification is held; its sender's result is
// written only under its attempt; a lapsed hold lets another sender take it again with the
// same idempotency key; dead and sent rows are never claimed.
func TestNotificationClaimAndDone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := daotest.Submit(t, b.db, "n", notifySpec("n"))
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	if err := b.db.WorkflowFinishIfOwned(b.ctx, wf, "m1", dao.WorkflowSucceeded, ""); err != nil {
		t.Fatal(err)
	}
	first, err := b.db.NotificationClaimDue(b.ctx, 10, time.Hour)
	if err != nil || len(first) != 1 || first[0].State != dao.NotificationSending || first[0].Attempts != 1 {
		t.Fatalf("claim = %+v, %v; want one, sending, attempt 1", first, err)
	}
	if again, err := b.db.NotificationClaimDue(b.ctx, 10, time.Hour); err != nil || len(again) != 0 {
		t.Fatalf("claim of a held row = %+v, %v; want none", again, err)
	}
	// The hold lapses (a sender died): another takes it, with the same key.
	if _, err := b.db.SQL().Exec(`UPDATE notification SET next_attempt_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	second, err := b.db.NotificationClaimDue(b.ctx, 10, time.Hour)
	if err != nil || len(second) != 1 || second[0].Attempts != 2 || second[0].IdempotencyKey != first[0].IdempotencyKey {
		t.Fatalf("claim after the hold = %+v, %v; want attempt 2 with key %s", second, err, first[0].IdempotencyKey)
	}
	if ok, err := b.db.NotificationDoneIfSending(b.ctx, first[0].ID, 1, dao.NotificationSent, 0, ""); err != nil || ok {
		t.Fatalf("stale sender's result = %v, %v; want refused", ok, err)
	}
	if ok, err := b.db.NotificationDoneIfSending(b.ctx, first[0].ID, 2, dao.NotificationPending, 0, "503"); err != nil || !ok {
		t.Fatalf("result = %v, %v; want recorded", ok, err)
	}
	third, err := b.db.NotificationClaimDue(b.ctx, 10, time.Hour)
	if err != nil || len(third) != 1 || third[0].LastError == nil || *third[0].LastError != "503" {
		t.Fatalf("claim of a retry = %+v, %v; want it with its last error", third, err)
	}
	if ok, err := b.db.NotificationDoneIfSending(b.ctx, first[0].ID, 3, dao.NotificationDead, 0, "gave up"); err != nil || !ok {
		t.Fatalf("result = %v, %v; want recorded", ok, err)
	}
	if rest, err := b.db.NotificationClaimDue(b.ctx, 10, 0); err != nil || len(rest) != 0 {
		t.Fatalf("claim of a dead row = %+v, %v; want none", rest, err)
	}
	if dead, err := b.db.NotificationList(b.ctx, dao.NotificationDead, 0, 10); err != nil || len(dead) != 1 {
		t.Fatalf("dead = %+v, %v; want one", dead, err)
	}
}

// TestDeadlineQueuedOnce: a passed deadline of a workflow and of a task is queued once, even
// by many masters looking at once; an ended task's and a workflow's not yet passed are not,
// nor a deadline nobody hears.
func TestDeadlineQueuedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := notifySpec("d")
	spec["deadline"] = "1ms"
	spec["tasks"] = []map[string]any{
		{"name": "slow", "type": "noop", "group": "g", "deadline": "1ms"},
		{"name": "done", "type": "noop", "group": "g", "deadline": "1ms"},
		{"name": "later", "type": "noop", "group": "g", "deadline": "1h"},
		{"name": "uncreated", "type": "noop", "group": "g", "deadline": "1ms"},
	}
	wf := daotest.Submit(t, b.db, "d", spec)
	unheard := daotest.Submit(t, b.db, "unheard", map[string]any{"name": "unheard", "deadline": "1ms"})
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{
		{WorkflowInstanceID: wf, Name: "slow", Type: "noop", State: dao.TaskQueued, Group: "g"},
		{WorkflowInstanceID: wf, Name: "done", Type: "noop", State: dao.TaskSkipped, Group: "g"},
		{WorkflowInstanceID: wf, Name: "later", Type: "noop", State: dao.TaskQueued, Group: "g"},
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the deadlines are 1ms after creation, by the database's clock
	var wg sync.WaitGroup
	counts := make([]int, 4)
	for i := range counts {
		wg.Go(func() {
			n, err := b.db.DeadlineQueuePassed(b.ctx, 100)
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		})
	}
	wg.Wait()
	var subjects []string
	for _, n := range b.notifications(t) {
		if n.Event != dao.EventDeadline || *n.WorkflowInstanceID != wf {
			t.Errorf("notification %+v; want deadlines of %d alone (not of %d)", n, wf, unheard)
		}
		subjects = append(subjects, n.Subject)
	}
	slices.Sort(subjects)
	want := []string{
		fmt.Sprintf("workflow %d deadline", wf),
		fmt.Sprintf("workflow %d task slow deadline", wf),
		fmt.Sprintf("workflow %d task uncreated deadline", wf),
	}
	if !slices.Equal(subjects, want) {
		t.Fatalf("deadlines queued = %v; want %v", subjects, want)
	}
	if n, err := b.db.DeadlineQueuePassed(b.ctx, 100); err != nil || n != 0 {
		t.Fatalf("a second look queued %d, %v; want 0", n, err)
	}
}

// TestNotificationOnceUnderConcurrentEnds: statements racing to end the same instances (a
// master's finish, its batch finish, its timeout) end each once and queue one notification
// each, whose event is the end that won.
func TestNotificationOnceUnderConcurrentEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []int64
	for range 20 {
		ids = append(ids, daotest.Submit(t, b.db, "n", notifySpec("n")))
	}
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 100); err != nil {
		t.Fatal(err)
	}
	enders := []func(q *dao.Queries, id int64) error{
		func(q *dao.Queries, id int64) error {
			return q.WorkflowFinishIfOwned(b.ctx, id, "m1", dao.WorkflowSucceeded, "")
		},
		func(q *dao.Queries, id int64) error {
			_, err := q.WorkflowFinishManyIfOwnedOrUnowned(b.ctx, "m1", []dao.WorkflowFinish{{ID: id, State: dao.WorkflowFailed, Error: "boom"}})
			return err
		},
		func(q *dao.Queries, id int64) error {
			_, err := q.WorkflowTimeOutIfOwned(b.ctx, id, "m1", "workflow timeout 1s exceeded")
			return err
		},
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		for _, end := range enders {
			wg.Go(func() {
				err := b.db.Tx(b.ctx, func(q *dao.Queries) error { return end(q, id) })
				if err != nil && !errors.Is(err, dao.ErrNotOwner) {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	byInstance := map[int64][]string{}
	for _, n := range b.notifications(t) {
		byInstance[*n.WorkflowInstanceID] = append(byInstance[*n.WorkflowInstanceID], n.Event)
	}
	for _, id := range ids {
		wf, err := b.db.WorkflowGet(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := map[dao.WorkflowState]string{dao.WorkflowSucceeded: "success", dao.WorkflowFailed: "failure"}[wf.State]
		if wf.Error != nil && strings.HasPrefix(*wf.Error, "workflow timeout") {
			want = "timeout"
		}
		if got := byInstance[id]; len(got) != 1 || got[0] != want {
			t.Errorf("instance %d ended %s (%v): notifications %v; want [%s]", id, wf.State, wf.Error, got, want)
		}
	}
}

// TestNotificationOfAWorkersEnd: a one-task instance ended by its worker's statement (no
// master involved) queues its notification too, and a task failed after its retries
// queues task-failed in the same statement.
func TestNotificationOfAWorkersEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	raw, err := json.Marshal(map[string]any{"name": "one", "notify": []map[string]any{{
		"on": []string{"failure", "task-failed"}, "webhook-url-env": "OPS_WEBHOOK"}},
		"tasks": []map[string]any{{"name": "t", "type": "noop", "group": "g"}}})
	if err != nil {
		t.Fatal(err)
	}
	wf := b.submitWithRoot(t, string(raw), "g", 0)
	got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	done, err := b.db.TaskFinishManyIfRunning(b.ctx, []dao.Finish{{Token: got[0].Token(), Result: dao.AttemptResult{
		Outcome: dao.OutcomeFailed, Next: dao.TaskFailed, Error: "exit 1"}}})
	if err != nil || len(done) != 1 || done[0].Workflow != dao.WorkflowFailed {
		t.Fatalf("finish = %+v, %v; want the instance ended by the worker's statement", done, err)
	}
	ns := b.notifications(t)
	got2 := events(ns)
	slices.Sort(got2)
	if want := []string{"failure webhook OPS_WEBHOOK", "task-failed webhook OPS_WEBHOOK"}; !slices.Equal(got2, want) {
		t.Fatalf("notifications = %v; want %v", got2, want)
	}
	for _, n := range ns {
		if *n.WorkflowInstanceID != wf {
			t.Fatalf("%s of instance %d; want %d", n.Event, *n.WorkflowInstanceID, wf)
		}
	}
}

// TestPurgeNotifications: the retention deletes sent and dead notifications past the period,
// never one still to send.
func TestPurgeNotifications(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		wf := daotest.Submit(t, b.db, "n", notifySpec("n"))
		if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
			t.Fatal(err)
		}
		if err := b.db.WorkflowFinishIfOwned(b.ctx, wf, "m1", dao.WorkflowSucceeded, ""); err != nil {
			t.Fatal(err)
		}
	}
	ns := b.notifications(t)
	for i, state := range []string{dao.NotificationSent, dao.NotificationDead, dao.NotificationPending} {
		if _, err := b.db.SQL().Exec(`UPDATE notification SET state = $2, created_at = now() - interval '2 days' WHERE id = $1`,
			ns[i].ID, state); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.db.PurgeNotifications(b.ctx, 72*time.Hour, 10); err != nil || n != 0 {
		t.Fatalf("purge within the period = %d, %v; want 0", n, err)
	}
	if n, err := b.db.PurgeNotifications(b.ctx, 24*time.Hour, 1); err != nil || n != 1 {
		t.Fatalf("purge of a batch of 1 = %d, %v; want 1", n, err)
	}
	if n, err := b.db.PurgeNotifications(b.ctx, 24*time.Hour, 10); err != nil || n != 1 {
		t.Fatalf("second purge = %d, %v; want 1", n, err)
	}
	if left := b.notifications(t); len(left) != 1 || left[0].ID != ns[2].ID {
		t.Fatalf("left %+v; want the pending one", left)
	}
}

// TestNotificationAfterARerun: a rerun reopens an ended instance, and its next end is an
// event of its own, as is its rerun task's next failure.
func TestNotificationAfterARerun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := daotest.Submit(t, b.db, "n", notifySpec("n"))
	if _, err := b.db.WorkflowClaimUnowned(b.ctx, "m1", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{{WorkflowInstanceID: wf, Name: "a", Type: "noop", State: dao.TaskQueued, Group: "g"}}); err != nil {
		t.Fatal(err)
	}
	var task int64
	end := func() {
		t.Helper()
		got, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("claim = %v, %v", got, err)
		}
		task = got[0].ID
		if _, err := b.db.TaskFinishManyIfRunning(b.ctx, []dao.Finish{{Token: got[0].Token(), Result: dao.AttemptResult{
			Outcome: dao.OutcomeFailed, Next: dao.TaskFailed, Error: "boom"}}}); err != nil {
			t.Fatal(err)
		}
		if n, err := b.db.WorkflowFinishManyIfOwnedOrUnowned(b.ctx, "m1", []dao.WorkflowFinish{{ID: wf, State: dao.WorkflowFailed, Error: "boom"}}); err != nil || n != 1 {
			t.Fatalf("finish = %d, %v", n, err)
		}
	}
	end()
	rerun, err := b.db.TaskRerunIfFailedOrKilled(b.ctx, wf, []int64{task}, nil, nil)
	if err != nil || !rerun.Reopened {
		t.Fatalf("rerun = %+v, %v; want the instance reopened", rerun, err)
	}
	end()
	got := events(b.notifications(t))
	slices.Sort(got)
	want := []string{"failure webhook OPS_WEBHOOK", "failure webhook OPS_WEBHOOK", "task-failed webhook OPS_WEBHOOK", "task-failed webhook OPS_WEBHOOK"}
	if !slices.Equal(got, want) {
		t.Fatalf("notifications = %v; want %v", got, want)
	}
}
