package worker_test

import (
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/worker/llm"
)

// TestAgentPausesAndResumesElsewhere: an agent that reaches its wait step ends its attempt
// paused and gives its slot back — on a worker with one slot, another task runs while it
// waits — and the signal's output resumes it on another worker, which goes on from the step
// after the wait without sending the finished step to the model again; the wait step's output
// is the signal's, in the prompt after it.
func TestAgentPausesAndResumesElsewhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := llmtest.New(t)
	stop := b.startLLMWorker(t, "w1", srv, 1)
	id := b.submit(t, `
name: review
tasks:
  - name: agent
    type: agent
    provider: test
    steps:
      - {name: draft, prompt: 'Draft a note'}
      - {name: approve, wait: true}
      - {name: polish, prompt: 'Polish [{{ .steps.draft }}] per [{{ .steps.approve }}]'}
  - {name: publish, type: shell, depends-on: [agent], command: 'echo "published $ZKSCHED_UPSTREAM_agent_OUTPUT"'}
`)
	paused := b.waitTask(t, id, "agent", "paused", func(ti dao.TaskInstance) bool { return ti.State == dao.TaskWaiting })
	if paused.PausedStep == nil || *paused.PausedStep != "approve" || paused.Retries != 0 {
		t.Fatalf("paused agent = %+v; want waiting at approve, no retry counted", paused)
	}
	if got := b.attempts(t, paused.ID); strings.Join(got, ",") != "paused" {
		t.Fatalf("attempts = %v; want one, paused", got)
	}

	// The one slot is free: another task runs while the agent waits.
	other := b.submit(t, "name: meanwhile\ntasks:\n  - {name: other, type: shell, command: 'echo ran'}\n")
	if wf, _ := b.waitDone(t, other); wf.State != dao.WorkflowSucceeded {
		t.Fatalf("the task submitted while the agent waited: %s, %v", wf.State, wf.Error)
	}
	if ti, err := b.db.TaskGet(b.ctx, paused.ID); err != nil || ti.State != dao.TaskWaiting {
		t.Fatalf("agent = %+v, %v; want it still waiting for its signal", ti, err)
	}

	stop()
	b.startLLMWorker(t, "w2", srv, 1)
	if res, err := lifecycle.Signal(b.ctx, b.db, paused.ID, "make it shorter", false, nil); err != nil || res.State != dao.TaskQueued {
		t.Fatalf("Signal = %+v, %v; want the agent queued again", res, err)
	}
	wf, tasks := b.waitDone(t, id)
	if wf.State != dao.WorkflowSucceeded {
		t.Fatalf("workflow %s: %v", wf.State, wf.Error)
	}
	draft := llmtest.Answer("Draft a note")
	polish := llmtest.Answer("Polish [" + draft + "] per [make it shorter]")
	agent := tasks["agent"]
	if agent.Output == nil || *agent.Output != polish || deref(tasks["publish"].Output) != "published "+polish {
		t.Errorf("agent output %q, publish %q; want the polish of the draft with the signal's text", deref(agent.Output), deref(tasks["publish"].Output))
	}
	if n := srv.Calls("Draft"); n != 1 {
		t.Errorf("the draft was sent to the model %d times, want once", n)
	}
	if n := srv.Calls("Polish"); n != 1 {
		t.Errorf("the polish was sent to the model %d times, want once", n)
	}
	as, err := b.db.AttemptList(b.ctx, agent.ID)
	if err != nil || len(as) != 2 || *as[0].Outcome != dao.OutcomePaused || as[0].WorkerID != "w1" ||
		*as[1].Outcome != dao.OutcomeSucceeded || as[1].WorkerID != "w2" {
		t.Fatalf("attempts = %+v, %v; want paused on w1, then succeeded on w2", as, err)
	}
	if first, second := usageOf(t, as[0].Usage), usageOf(t, as[1].Usage); first.Calls != 1 || second.Calls != 1 ||
		usageOf(t, agent.Usage) != first.Add(second) {
		t.Errorf("usage: attempts %+v and %+v, task %+v; want one call each, the task both", first, second, usageOf(t, agent.Usage))
	}
	log, _ := b.db.TaskLogRead(b.ctx, agent.ID, 1)
	if !strings.Contains(log, "step 2/3 approve: waits for a signal") {
		t.Errorf("attempt 1 log does not say it paused:\n%s", log)
	}
	log, _ = b.db.TaskLogRead(b.ctx, agent.ID, 2)
	if !strings.Contains(log, "step 1/3 draft: done by attempt 1") || !strings.Contains(log, "step 2/3 approve: signalled while attempt 1 waited") {
		t.Errorf("attempt 2 log does not say it resumed:\n%s", log)
	}
}

// TestOfflineAgentPausesOnceAndResumes runs the offline provider: the pause and the signal
// cost no model call for the step before the wait, and the step after it reads the signal.
func TestOfflineAgentPausesOnceAndResumes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := llmtest.New(t)
	b.startLLMWorker(t, "w1", srv, 2)
	id := b.submit(t, `
name: offline-review
tasks:
  - name: agent
    type: agent
    provider: offline
    steps:
      - {name: approve, wait: true}
      - {name: write, prompt: 'Write about {{ .steps.approve }}'}
`)
	paused := b.waitTask(t, id, "agent", "paused", func(ti dao.TaskInstance) bool { return ti.State == dao.TaskWaiting })
	if _, err := lifecycle.Signal(b.ctx, b.db, paused.ID, "schedulers", false, nil); err != nil {
		t.Fatal(err)
	}
	wf, tasks := b.waitDone(t, id)
	if want := llm.OfflineAnswer("Write about schedulers"); wf.State != dao.WorkflowSucceeded || deref(tasks["agent"].Output) != want {
		t.Fatalf("workflow %s, agent output %q; want succeeded with %q", wf.State, deref(tasks["agent"].Output), want)
	}
	if u := usageOf(t, tasks["agent"].Usage); u.Calls != 1 {
		t.Errorf("usage %+v; want the one step after the wait", u)
	}
}
