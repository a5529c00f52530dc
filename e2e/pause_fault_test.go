package e2e

// The fault tests of agents that pause for a person: a worker killed while its agent waits,
// and signals sent to the leader master as it is killed.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/internal/llmtest"
)

// setupPauseFault is setupFault with the processes' provider "test" on srv and the API token
// uiToken.
func setupPauseFault(t *testing.T, srv *llmtest.Server) *fault {
	t.Helper()
	t.Parallel()
	rec := history.New(t)
	env := append(append(rec.Env(), llmEnv(srv)...), "ZKSCHED_API_TOKEN="+uiToken)
	e := setupE2E(t, nil, "", env...)
	return &fault{Cluster: e.Cluster, db: e.db, rec: rec, root: envValue(e.Env, "ZKSCHED_REGISTRY_ROOT")}
}

// pausingAgent is a workflow file of the tasks before, then an agent after start that
// drafts, waits at approve and polishes with the approval's text, then publish, a recorded
// shell task, after the agent and the tasks of also.
func (f *fault) pausingAgent(name, before, also string) string {
	return fmt.Sprintf(`
name: %s
tasks:
%s  - name: agent
    type: agent
    provider: test
    depends-on: [start]
    steps:
      - {name: draft, prompt: 'Draft %s'}
      - {name: approve, wait: true}
      - {name: polish, prompt: 'Polish [{{ .steps.draft }}] per [{{ .steps.approve }}]'}
  - {name: publish, type: shell, depends-on: [agent%s], command: %q}
`, name, before, name, also, f.rec.Command(`test -n "$ZKSCHED_UPSTREAM_agent_OUTPUT"`))
}

// waitPaused waits until the agent of wf is paused at approve and returns it.
func (f *fault) waitPaused(t *testing.T, wf int64) dao.TaskInstance {
	t.Helper()
	var agent dao.TaskInstance
	waitUntil(t, 60*time.Second, "the agent to pause at approve", func() bool {
		for _, ti := range f.taskList(t, wf) {
			if ti.Name == "agent" && ti.State == dao.TaskWaiting {
				agent = ti
				return true
			}
		}
		return false
	})
	if agent.PausedStep == nil || *agent.PausedStep != "approve" {
		t.Fatalf("agent = %+v; want paused at approve", agent)
	}
	return agent
}

// expectResumedOnce checks the agent of a workflow that succeeded: paused on one worker,
// resumed by one signal with text on another attempt, the draft and the polish each sent to
// the model once.
func (f *fault) expectResumedOnce(t *testing.T, srv *llmtest.Server, agentID int64, name, text string) {
	t.Helper()
	ti := f.task(t, agentID)
	draft := llmtest.Answer("Draft " + name)
	if want := llmtest.Answer("Polish [" + draft + "] per [" + text + "]"); ti.State != dao.TaskSucceeded || ti.Output == nil || *ti.Output != want {
		t.Errorf("agent = %s, output %q; want succeeded with %q", ti.State, deref(ti.Output), want)
	}
	got := f.attempts(t, agentID)
	if len(got) != 2 || !strings.HasPrefix(got[0], "paused@") || !strings.HasPrefix(got[1], "succeeded@") || ti.FailoverCount != 0 {
		t.Errorf("agent attempts = %v, failover_count %d; want paused, then succeeded, never failed over", got, ti.FailoverCount)
	}
	for _, prompt := range []string{"Draft " + name, "Polish"} {
		if n := srv.Calls(prompt); n != 1 {
			t.Errorf("the model saw %q %d times, want once", prompt, n)
		}
	}
	cps, err := f.db.CheckpointListForTask(context.Background(), agentID)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, cp := range cps {
		steps = append(steps, fmt.Sprintf("%s@%d", cp.Step, cp.Attempt))
		if cp.Step == "approve" && cp.Output != text {
			t.Errorf("approve's checkpoint = %q, want the signal's %q", cp.Output, text)
		}
	}
	if s := strings.Join(steps, ","); s != "draft@1,approve@1,polish@2" {
		t.Errorf("checkpoints = %s; want the draft and the signal under the paused attempt, the polish under the next", s)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// A worker killed with kill -9 while its agent is paused: the agent holds no slot and no
// worker, so the failover finds nothing of it to requeue; it goes on waiting, and the signal
// resumes it on the surviving worker.
func TestFaultWorkerKilledWhileAgentPaused(t *testing.T) {
	srv := llmtest.New(t)
	srv.Key = "sk-pause"
	f := setupPauseFault(t, srv)
	f.startMaster(t, "master")
	w1 := f.startWorker(t, "worker-1", 2)
	wf := f.submitFile(t, f.pausingAgent("killed-while-paused", "  - {name: start, type: noop}\n", ""))
	agent := f.waitPaused(t, wf)
	if got := f.attempts(t, agent.ID); len(got) != 1 || got[0] != "paused@"+w1.id {
		t.Fatalf("agent attempts = %v; want paused on worker-1", got)
	}
	w2 := f.startWorker(t, "worker-2", 2)

	faultAt := time.Now()
	if err := w1.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the failover of worker-1 to finish", func() bool {
		ev, ok := f.failoverEvents(t)[w1.id]
		return ok && ev.FinishedAt != nil
	})
	if ev := f.failoverEvents(t)[w1.id]; ev.TasksRequeued != 0 {
		t.Errorf("the failover of worker-1 requeued %d tasks, want none: its agent was paused", ev.TasksRequeued)
	}
	if ti := f.task(t, agent.ID); ti.State != dao.TaskWaiting || ti.PausedStep == nil || ti.FailoverCount != 0 {
		t.Fatalf("agent after the failover = %+v; want still waiting at approve", ti)
	}

	if out, code := f.Run("signal", strconv.FormatInt(agent.ID, 10), "--output", "keep it short"); code != 0 ||
		!strings.Contains(out, "resumed at the step after approve") {
		t.Fatalf("signal: exit %d\n%s", code, out)
	}
	history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})
	f.expectResumedOnce(t, srv, agent.ID, "killed-while-paused", "keep it short")
	if got := f.attempts(t, agent.ID); len(got) == 2 && got[1] != "succeeded@"+w2.id {
		t.Errorf("agent attempts = %v; want it resumed on worker-2, the survivor", got)
	}
}

// signalAPI posts a signal to a master's API; err is set when no answer came back (the
// master died under it).
func signalAPI(c *http.Client, base string, id int64, output string) (status int, body string, err error) {
	req, err := http.NewRequest("POST", fmt.Sprintf("%s/api/v1/task-instances/%d/signal", base, id),
		strings.NewReader(fmt.Sprintf(`{"output": %q}`, output)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+uiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), err
}

// Signals sent to the leader master while it is killed with kill -9, to a paused agent and
// to a wait task of the workflow the leader owns: each is applied exactly once — a signal
// that got no answer is sent again to the other master, which applies it (the first was
// lost) or refuses it (it was not) — and the other master takes the workflow over and
// finishes it.
func TestFaultSignalWhileLeaderKilled(t *testing.T) {
	srv := llmtest.New(t)
	srv.Key = "sk-pause"
	f := setupPauseFault(t, srv)
	m1 := f.startMaster(t, "master-1")
	m1.WaitLog(t, 30*time.Second, `"message":"became the leader"`)
	f.startWorker(t, "worker-1", 2)
	wf := f.submitFile(t, f.pausingAgent("signal-failover",
		fmt.Sprintf("  - {name: start, type: shell, command: %q}\n  - {name: review, type: wait, depends-on: [start]}\n", f.rec.Command("true")),
		", review"))
	agent := f.waitPaused(t, wf)
	// The leader owns the workflow, or has released it once review waits too (a workflow
	// whose live tasks all wait is released until a wait ends): either way the signals reach
	// the leader, and only the leader can pick the workflow up again until it dies.
	if owner := f.owner(t, wf); owner != m1.id && owner != "" {
		t.Fatalf("workflow %d is owned by %q; the scenario needs the leader %s owning it, or no one", wf, owner, m1.id)
	}
	m2 := f.startMaster(t, "master-2")
	var review dao.TaskInstance
	for _, ti := range f.taskList(t, wf) {
		if ti.Name == "review" {
			review = ti
		}
	}
	if review.State != dao.TaskWaiting {
		t.Fatalf("review = %+v; want it waiting", review)
	}

	c := &http.Client{Timeout: 10 * time.Second}
	base1 := fmt.Sprintf("http://127.0.0.1:%d", m1.Port)
	base2 := fmt.Sprintf("http://127.0.0.1:%d", m2.Port)
	type sent struct {
		id     int64
		text   string
		status int
		err    error
	}
	signals := []*sent{{id: agent.ID, text: "approved in a hurry"}, {id: review.ID, text: "looks fine"}}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, s := range signals {
		wg.Go(func() {
			<-start
			s.status, _, s.err = signalAPI(c, base1, s.id, s.text)
		})
	}
	// The kill lands while the signals are under way: a few milliseconds after they are
	// sent, so that one may be applied and answered, or applied and not answered, or lost.
	var faultAt time.Time
	wg.Go(func() {
		<-start
		time.Sleep(10 * time.Millisecond)
		faultAt = time.Now()
		if err := m1.Signal(syscall.SIGKILL); err != nil {
			t.Error(err)
		}
	})
	close(start)
	wg.Wait()
	for _, s := range signals {
		status, body, err := signalAPI(c, base2, s.id, s.text)
		t.Logf("signal of task %d to the dying leader: %d %v; again to master-2: %d %v", s.id, s.status, s.err, status, err)
		switch {
		case err != nil:
			t.Fatalf("signal of task %d to master-2: %v", s.id, err)
		case s.err == nil && s.status != 200:
			t.Errorf("signal of task %d to the leader answered %d; want 200, or no answer", s.id, s.status)
		case s.err == nil && status != 409:
			t.Errorf("signal of task %d again, after the leader had applied it: %d %s; want 409", s.id, status, body)
		case s.err != nil && status != 200 && status != 409:
			t.Errorf("signal of task %d again, after no answer: %d %s; want 200 or 409", s.id, status, body)
		}
	}

	history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})
	f.expectResumedOnce(t, srv, agent.ID, "signal-failover", "approved in a hurry")
	if ti := f.task(t, review.ID); ti.State != dao.TaskSucceeded || deref(ti.Output) != "looks fine" {
		t.Errorf("review = %s, output %q; want succeeded with the signal's text", ti.State, deref(ti.Output))
	}
	if owner := f.owner(t, wf); owner == m1.id {
		t.Errorf("workflow %d is still owned by the killed leader", wf)
	}
	events, _, err := f.db.AuditList(context.Background(), dao.AuditFilter{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	applied := map[string]int{}
	for _, ev := range events {
		if ev.Action == dao.AuditTaskSignal && ev.Outcome == dao.AuditOK {
			applied[ev.Target]++
		}
	}
	for _, s := range signals {
		if n := applied[fmt.Sprintf("task-instance/%d", s.id)]; n != 1 {
			t.Errorf("task %d has %d applied signals in the audit log, want 1", s.id, n)
		}
	}
}
