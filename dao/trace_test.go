package dao_test

import (
	"testing"
)

// TestTraceOutboxQueuesSampledEndsOnce: the triggers of migration 00023 queue the span of a
// sampled instance's end and of its attempt failed over, whichever statement makes them (here
// an operator's stop and the leader's requeue), and nothing of an
// unsampled one; a take hands each row out once.
func TestTraceOutboxQueuesSampledEndsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tps := []string{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-00",
	}
	next := 0
	b.db.SetTraceStart(func() string { next++; return tps[next-1] })
	sampled := b.submitWithRoot(t, `{"name": "sampled"}`, "g", 0)
	unsampled := b.submitWithRoot(t, `{"name": "unsampled"}`, "g", 0)
	got, err := b.db.WorkflowTraceparentsOf(b.ctx, []int64{sampled, unsampled})
	if err != nil || got[sampled] != tps[0] || got[unsampled] != tps[1] {
		t.Fatalf("traceparents = %v, %v; want %v", got, err, tps)
	}

	claimed, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"g"}, 10)
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed %d, %v; want 2", len(claimed), err)
	}
	if n, err := b.db.TaskRequeueIfRunningOnWorker(b.ctx, "w1"); err != nil || n != 2 {
		t.Fatalf("requeued %d, %v; want 2", n, err)
	}
	for _, id := range []int64{sampled, unsampled} {
		if _, err := b.db.WorkflowStopIfActive(b.ctx, id, nil); err != nil {
			t.Fatal(err)
		}
	}

	spans, err := b.db.TraceOutboxTakeUnsent(b.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 2 {
		t.Fatalf("took %+v, want the sampled instance's end and failed-over attempt", spans)
	}
	for _, s := range spans {
		if s.WorkflowInstanceID != sampled || s.Traceparent != tps[0] {
			t.Errorf("took a span of instance %d trace %s, want %d %s", s.WorkflowInstanceID, s.Traceparent, sampled, tps[0])
		}
		switch s.TaskInstanceID {
		case 0:
			if s.State != "stopped" || s.WorkflowName != "sampled" || !s.EndedAt.After(s.CreatedAt) {
				t.Errorf("end span row = %+v", s)
			}
		default:
			if s.Attempt != 1 || s.Outcome == nil || *s.Outcome != "failed_over" || s.WorkerID == nil || *s.WorkerID != "w1" ||
				s.TaskName == nil || *s.TaskName != "t" || s.AttemptEndedAt == nil {
				t.Errorf("failed-over attempt row = %+v", s)
			}
		}
	}
	if again, err := b.db.TraceOutboxTakeUnsent(b.ctx, 10); err != nil || len(again) != 0 {
		t.Errorf("a second take = %+v, %v; want nothing", again, err)
	}
}
