package e2e

// The fault tests of tool-calling agents: a worker killed with kill -9 in the middle of a tool
// call. Every tool appends to a ledger, so the test sees each effect as it happened; the
// agent's turns and calls in the database say what was sent to the model and by which
// attempt.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// toolAgentFile is a workflow whose agent calls, through the offline model, lookup (an
// idempotent tool), then deploy, which holds while the file hold exists, then notify. deploy
// is idempotent, or not: then an interruption asks a person.
func toolAgentFile(name, ledger, hold string, deployIdempotent bool) string {
	return fmt.Sprintf(`
name: %[1]s
tasks:
  - name: agent
    type: agent
    provider: offline
    prompt: Roll out release 7 and tell the channel
    env: {LEDGER: %[2]s, HOLD: %[3]s}
    tools:
      - name: lookup
        description: Looks up the current release of a service.
        type: shell
        idempotent: true
        arguments:
          type: object
          properties: {service: {type: string, default: api}}
          required: [service]
        command: echo "lookup $ZKSCHED_ARG_service $ZKSCHED_TOOL_CALL_ID" >> "$LEDGER"; echo "api runs release 6"
      - name: deploy
        description: Deploys a release of a service.
        type: shell
        idempotent: %[4]t
        arguments:
          type: object
          properties: {service: {type: string, default: api}, release: {type: integer, default: 7}}
        command: |
          echo "deploy-start $ZKSCHED_ARG_release $ZKSCHED_TOOL_CALL_ID" >> "$LEDGER"
          while [ -e "$HOLD" ]; do sleep 0.05; done
          echo "deploy-end $ZKSCHED_TOOL_CALL_ID" >> "$LEDGER"
          echo "release $ZKSCHED_ARG_release deployed"
      - name: notify
        description: Tells the channel.
        type: shell
        idempotent: true
        command: echo "notify $ZKSCHED_TOOL_CALL_ID" >> "$LEDGER"; echo sent
`, name, ledger, hold, deployIdempotent)
}

func readLedger(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

// agentLoop returns the turns of task id as "turn@attempt" and its calls as
// "turn.seq tool state starts=N by=A".
func (f *fault) agentLoop(t *testing.T, id int64) (turns, calls []string, results map[string]string) {
	t.Helper()
	ts, cs, err := f.db.AgentLoopForTask(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	results = map[string]string{}
	for _, tr := range ts {
		turns = append(turns, fmt.Sprintf("%d@%d", tr.Turn, tr.Attempt))
	}
	for _, c := range cs {
		by := "-"
		if c.EndedAttempt != nil {
			by = strconv.Itoa(*c.EndedAttempt)
		}
		calls = append(calls, fmt.Sprintf("%d.%d %s %s starts=%d ended-by=%s", c.Turn, c.Seq, c.Tool, c.State, c.Starts, by))
		if c.Result != nil {
			results[c.Tool] = *c.Result
		}
	}
	return turns, calls, results
}

// A worker killed with kill -9 while a tool-calling agent's deploy call runs: another worker
// takes the task over. Everything finished before the kill is replayed, never sent or run
// again. An idempotent deploy runs again with the same call id; any other waits, holding no
// slot, for a person to say whether it happened, and their word is its result.
func TestFaultWorkerKilledMidToolCall(t *testing.T) {
	for _, idempotent := range []bool{false, true} {
		t.Run(fmt.Sprintf("idempotent=%t", idempotent), func(t *testing.T) {
			f := setupFault(t)
			dir := t.TempDir()
			ledger, hold := filepath.Join(dir, "ledger"), filepath.Join(dir, "hold")
			if err := os.WriteFile(hold, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			offline := "ZKSCHED_LLM_PROVIDERS_OFFLINE_TYPE=offline"
			f.startMaster(t, "master", offline)
			w1 := f.startWorker(t, "worker-1", 1, offline)
			wf := f.submitFile(t, toolAgentFile(fmt.Sprintf("tools-killed-%t", idempotent), ledger, hold, idempotent))
			waitUntil(t, 60*time.Second, "the deploy call to start", func() bool {
				l := readLedger(t, ledger)
				return len(l) == 2 && strings.HasPrefix(l[1], "deploy-start")
			})
			agent := f.taskList(t, wf)[0]
			w2 := f.startWorker(t, "worker-2", 1, offline)
			if err := w1.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			// The deploy's process died with its worker (its supervisor's parent death); no
			// deploy-end may appear for the first start.
			time.Sleep(200 * time.Millisecond)
			if idempotent {
				// The retried deploy may finish once the test lets it.
				waitUntil(t, 60*time.Second, "the deploy to start again on worker-2", func() bool {
					return len(readLedger(t, ledger)) == 3
				})
				if err := os.Remove(hold); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.Remove(hold); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, 60*time.Second, "the agent to wait for a person", func() bool {
					ti := f.task(t, agent.ID)
					return ti.State == dao.TaskWaiting
				})
				ti := f.task(t, agent.ID)
				if ti.PausedStep == nil || *ti.PausedStep != "tool-call:2.1" {
					t.Fatalf("agent = %+v; want waiting at tool-call:2.1", ti)
				}
				if got := f.attempts(t, agent.ID); len(got) != 2 || got[0] != "failed_over@"+w1.id || got[1] != "paused@"+w2.id {
					t.Fatalf("attempts %v; want failed over on worker-1, paused on worker-2", got)
				}
				out, code := f.Run("signal", strconv.FormatInt(agent.ID, 10), "--output", "release 7 is live (checked by hand)")
				if code != 0 || !strings.Contains(out, "its interrupted tool-call 2.1 is recorded as done") {
					t.Fatalf("signal: exit %d\n%s", code, out)
				}
			}
			waitUntil(t, 60*time.Second, "the workflow to succeed", func() bool {
				ti := f.task(t, agent.ID)
				return ti.State == dao.TaskSucceeded
			})
			l := readLedger(t, ledger)
			callID := func(turn int) string { return fmt.Sprintf("zk-%d-%d-1", agent.ID, turn) }
			want := []string{"lookup api " + callID(1), "deploy-start 7 " + callID(2)}
			if idempotent {
				want = append(want, "deploy-start 7 "+callID(2), "deploy-end "+callID(2))
			}
			want = append(want, "notify "+callID(3))
			if strings.Join(l, "\n") != strings.Join(want, "\n") {
				t.Errorf("ledger:\n%s\nwant:\n%s", strings.Join(l, "\n"), strings.Join(want, "\n"))
			}
			turns, calls, results := f.agentLoop(t, agent.ID)
			last := 2
			if !idempotent {
				last = 3
			}
			wantTurns := fmt.Sprintf("1@1,2@1,3@%d,4@%d", last, last)
			if strings.Join(turns, ",") != wantTurns {
				t.Errorf("turns %v, want %s: a turn answered before the kill must not be sent again", turns, wantTurns)
			}
			deploy := fmt.Sprintf("2.1 deploy ended starts=1 ended-by=%d", last)
			if idempotent {
				deploy = "2.1 deploy ended starts=2 ended-by=2"
			}
			wantCalls := []string{"1.1 lookup ended starts=1 ended-by=1", deploy, fmt.Sprintf("3.1 notify ended starts=1 ended-by=%d", last)}
			if strings.Join(calls, "\n") != strings.Join(wantCalls, "\n") {
				t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(wantCalls, "\n"))
			}
			if !idempotent && results["deploy"] != "release 7 is live (checked by hand)" {
				t.Errorf("deploy's result %q, want the person's text", results["deploy"])
			}
			if idempotent && results["deploy"] != "release 7 deployed" {
				t.Errorf("deploy's result %q", results["deploy"])
			}
			ti := f.task(t, agent.ID)
			if ti.Output == nil || !strings.HasPrefix(*ti.Output, "[offline model]") {
				t.Errorf("output %q, want the offline model's final answer", deref(ti.Output))
			}
		})
	}
}

// A worker dies (kill -9, or SIGKILL at a fault point) at each phase of a tool-calling
// agent's turn: while its model call is in flight, after the model answered but before the
// turn was stored, after the turn was stored but before its tool started, and after its tool
// ended but before the next turn. Another worker goes on: a stored turn is never sent again,
// a tool that ended never runs again, and only the turn that was not stored is sent twice.
func TestFaultToolAgentKilledAtEachPhase(t *testing.T) {
	for _, phase := range []struct {
		name, point string
		// turn1 is the attempt whose turn 1 is stored; requests the model calls in all.
		turn1, requests int
		// lookup is the attempt that ended the first call.
		lookup int
	}{
		{name: "mid model call", turn1: 2, requests: 4, lookup: 2},
		{name: "answered, not stored", point: "agent-before-turn-saved", turn1: 2, requests: 4, lookup: 2},
		{name: "stored, tool not started", point: "agent-after-turn-saved", turn1: 1, requests: 3, lookup: 2},
		{name: "tool ended, next turn not sent", point: "agent-after-tool-ended", turn1: 1, requests: 3, lookup: 1},
	} {
		t.Run(phase.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Key = "sk-tools"
			f := setupPauseFault(t, srv)
			prompt := "Phase " + strings.ReplaceAll(phase.name, " ", "-")
			dir := t.TempDir()
			ledger := filepath.Join(dir, "ledger")
			f.startMaster(t, "master")
			var w1env []string
			if phase.point != "" {
				w1env = append(w1env, "ZKSCHED_TEST_FAULT="+phase.point)
			}
			var release func()
			if phase.point == "" {
				release = srv.Hold(prompt)
			}
			w1 := f.startWorker(t, "worker-1", 1, w1env...)
			wf := f.submitFile(t, fmt.Sprintf(`
name: phases
tasks:
  - name: agent
    type: agent
    provider: test
    retries: 0
    prompt: %s
    env: {LEDGER: %q}
    tools:
      - {name: lookup, description: looks up, type: shell, command: 'echo "lookup $ZKSCHED_TOOL_CALL_ID" >> "$LEDGER"; echo found'}
      - {name: act, description: acts, type: shell, command: 'echo "act $ZKSCHED_TOOL_CALL_ID" >> "$LEDGER"; echo done'}
`, prompt, ledger))
			if phase.point == "" {
				srv.WaitCalls(t, prompt, 1, 60*time.Second)
				if err := w1.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			} else {
				waitUntil(t, 60*time.Second, "worker-1 to die at "+phase.point, func() bool { return strings.Contains(w1.Log(), "SIGKILL at "+phase.point) })
			}
			f.startWorker(t, "worker-2", 1)
			if release != nil {
				release()
			}
			agent := f.taskList(t, wf)[0]
			waitUntil(t, 90*time.Second, "the agent to succeed", func() bool { return f.task(t, agent.ID).State == dao.TaskSucceeded })
			if got := readLedger(t, ledger); strings.Join(got, ",") != fmt.Sprintf("lookup zk-%d-1-1,act zk-%d-2-1", agent.ID, agent.ID) {
				t.Errorf("ledger %q: want each tool's effect once", got)
			}
			turns, calls, _ := f.agentLoop(t, agent.ID)
			if want := fmt.Sprintf("1@%d,2@2,3@2", phase.turn1); strings.Join(turns, ",") != want {
				t.Errorf("turns %v, want %s", turns, want)
			}
			if want := fmt.Sprintf("1.1 lookup ended starts=1 ended-by=%d|2.1 act ended starts=1 ended-by=2", phase.lookup); strings.Join(calls, "|") != want {
				t.Errorf("calls %v, want %s", calls, want)
			}
			if n := srv.Calls(prompt); n != phase.requests {
				t.Errorf("the model got %d requests, want %d: only a turn not stored may be sent again", n, phase.requests)
			}
		})
	}
}

// A workflow tool's call starts a child and the agent waits for it on no worker: the child's
// task runs on the one slot of the only worker, which the agent would otherwise hold. That
// worker dies with kill -9, either while the child's task runs or (at a fault point) after the
// call started its child but before the agent paused. Another worker goes on: the call finds
// the child it started instead of starting another, the child's end queues the agent again,
// and the model is given the child's final output.
func TestFaultWorkerKilledWhileAWorkflowToolWaits(t *testing.T) {
	for _, phase := range []struct {
		name, point string
		// attempts is how many attempts the agent took: the paused one and the resumed
		// one, and one killed before it paused.
		attempts int
	}{
		{name: "while the child runs", attempts: 2},
		{name: "child started, agent not paused", point: "agent-after-child-started", attempts: 3},
	} {
		t.Run(phase.name, func(t *testing.T) {
			f := setupFault(t)
			hold := filepath.Join(t.TempDir(), "hold")
			if err := os.WriteFile(hold, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			offline := "ZKSCHED_LLM_PROVIDERS_OFFLINE_TYPE=offline"
			f.startMaster(t, "master", offline)
			w1env := []string{offline}
			if phase.point != "" {
				w1env = append(w1env, "ZKSCHED_TEST_FAULT="+phase.point)
			}
			w1 := f.startWorker(t, "worker-1", 1, w1env...)
			child, err := workflow.Parse([]byte(fmt.Sprintf(`
name: slow-report
params: {day: {type: string}}
tasks:
  - name: build
    type: shell
    command: 'while [ -e %q ]; do sleep 0.05; done; echo "report for $ZKSCHED_PARAM_day"'
`, hold)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lifecycle.Define(context.Background(), f.db, lifecycle.Definition{Spec: child}, time.Now()); err != nil {
				t.Fatal(err)
			}
			wf := f.submitFile(t, `
name: asks-for-a-report
tasks:
  - name: agent
    type: agent
    provider: offline
    retries: 0
    prompt: Get me Monday's report
    tools:
      - name: report
        description: Builds the report of a day.
        type: workflow
        workflow: slow-report
        arguments: {type: object, properties: {day: {type: string, default: monday}}, required: [day]}
`)
			agent := f.taskList(t, wf)[0]
			var childID int64
			childRuns := func() bool {
				var ids []int64
				_ = f.db.SQL().Select(&ids, `SELECT w.id FROM workflow_instance w JOIN task_instance t ON t.workflow_instance_id = w.id
					WHERE w.workflow_name = 'slow-report' AND t.state = 'running'`)
				if len(ids) == 1 {
					childID = ids[0]
				}
				return len(ids) == 1
			}
			step := fmt.Sprintf("tool-child:zk-%d-1-1", agent.ID)
			agentWaits := func() bool {
				ti := f.task(t, agent.ID)
				return ti.State == dao.TaskWaiting && ti.PausedStep != nil && *ti.PausedStep == step
			}
			if phase.point == "" {
				waitUntil(t, 60*time.Second, "the child's task to run on worker-1's one slot, the agent waiting at "+step,
					func() bool { return childRuns() && agentWaits() })
				if err := w1.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			} else {
				waitUntil(t, 60*time.Second, "worker-1 to die at "+phase.point, func() bool { return strings.Contains(w1.Log(), "SIGKILL at "+phase.point) })
			}
			// Two slots: the child's task may take one before the agent's next attempt has
			// reached its pause.
			f.startWorker(t, "worker-2", 2, offline)
			if phase.point != "" {
				waitUntil(t, 90*time.Second, "the child's task to run on worker-2, the agent waiting at "+step,
					func() bool { return childRuns() && agentWaits() })
			}
			if err := os.Remove(hold); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 90*time.Second, "the agent to succeed", func() bool { return f.task(t, agent.ID).State == dao.TaskSucceeded })
			var n int
			if err := f.db.SQL().Get(&n, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'slow-report'`); err != nil || n != 1 {
				t.Errorf("%d instances of slow-report (%v); want the one child the call started", n, err)
			}
			_, calls, results := f.agentLoop(t, agent.ID)
			if want := fmt.Sprintf("1.1 report ended starts=1 ended-by=%d", phase.attempts); len(calls) != 1 || calls[0] != want || results["report"] != "report for monday" {
				t.Errorf("calls %v, result %q; want %s, with the child's output", calls, results["report"], want)
			}
			if a := f.task(t, agent.ID).Attempt; a != phase.attempts {
				t.Errorf("the agent took %d attempts, want %d", a, phase.attempts)
			}
			var parent int64
			if err := f.db.SQL().Get(&parent, `SELECT parent_task_instance_id FROM workflow_instance WHERE id = $1`, childID); err != nil || parent != agent.ID {
				t.Errorf("the child's parent task = %d (%v), want the agent %d", parent, err, agent.ID)
			}
		})
	}
}
