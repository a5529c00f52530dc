package e2e

// The fault test of tool calls that wait for a person's approval: the leader master killed
// with kill -9 while approvals and a rejection are given.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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

// approvalAgent is the YAML of an agent task name, after start, that the test model makes
// call its one tool, name too, which needs a person's approval and appends "name CALL-ID" to
// ledger.
func approvalAgent(name, prompt, ledger string) string {
	return fmt.Sprintf(`  - name: %[1]s
    type: agent
    provider: test
    depends-on: [start]
    prompt: %[2]s
    env: {LEDGER: %[3]q}
    tools:
      - {name: %[1]s, description: 'Does it, once approved.', type: shell, approve: true, command: 'echo "%[1]s $ZKSCHED_TOOL_CALL_ID" >> "$LEDGER"; echo done'}
`, name, prompt, ledger)
}

// Three tool calls wait for approval, each in an agent of a workflow the leader master claimed,
// on a worker of one slot that runs another workflow meanwhile: they hold no slot. The leader
// is killed with kill -9 while `zksched signal --server` approves deploy and rejects drop
// through it, and the other master, started before, takes the workflow over; restart is
// approved by `zksched signal` on the database while no master leads. A signal that got no
// answer is sent again, to the other master, which applies it (the first was lost) or refuses
// it (it was not). Each approved tool runs exactly once, the rejected one never, and the model
// is sent each turn once, its rejected call answered with the reviewer's reason.
func TestFaultToolApprovalWhileLeaderKilled(t *testing.T) {
	srv := llmtest.New(t)
	srv.Key = "sk-approval"
	f := setupPauseFault(t, srv)
	ledger := filepath.Join(t.TempDir(), "ledger")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(uiToken), 0o600); err != nil {
		t.Fatal(err)
	}
	m1 := f.startMaster(t, "master-1")
	m1.WaitLog(t, 30*time.Second, `"message":"became the leader"`)
	w1 := f.startWorker(t, "worker-1", 1)
	prompts := map[string]string{"deploy": "Roll out release 7", "restart": "Restart the cache", "drop": "Drop the old table"}
	wf := f.submitFile(t, fmt.Sprintf(`
name: tool-approval-failover
tasks:
  - {name: start, type: shell, command: %q}
%s%s%s  - {name: publish, type: shell, depends-on: [deploy, restart, drop], command: %q}
`, f.rec.Command("true"), approvalAgent("deploy", prompts["deploy"], ledger), approvalAgent("restart", prompts["restart"], ledger),
		approvalAgent("drop", prompts["drop"], ledger), f.rec.Command(`test -n "$ZKSCHED_UPSTREAM_deploy_OUTPUT"`)))

	agents := map[string]dao.TaskInstance{}
	waitUntil(t, 90*time.Second, "the three agents to wait for approval", func() bool {
		for _, ti := range f.taskList(t, wf) {
			if prompts[ti.Name] != "" && ti.State == dao.TaskWaiting {
				agents[ti.Name] = ti
			}
		}
		return len(agents) == 3
	})
	for name, ti := range agents {
		if ti.PausedStep == nil || *ti.PausedStep != "tool-approval:1.1" {
			t.Fatalf("%s = %+v; want it waiting at tool-approval:1.1", name, ti)
		}
	}
	if got := readLedger(t, ledger); len(got) != 0 {
		t.Fatalf("ledger %q before any approval; want nothing run", got)
	}
	// The worker's one slot is free: another workflow runs on it while the calls wait.
	other := f.submit(t, "meanwhile", task{name: "meanwhile", body: "true"})
	waitUntil(t, 60*time.Second, "the other workflow's task to run on the one slot", func() bool {
		return f.taskList(t, other)[0].State == dao.TaskSucceeded
	})
	if got := f.attempts(t, f.taskList(t, other)[0].ID); len(got) != 1 || got[0] != "succeeded@"+w1.id {
		t.Errorf("the other task's attempts %v; want it run on worker-1", got)
	}
	for name, ti := range agents {
		if now := f.task(t, ti.ID); now.State != dao.TaskWaiting {
			t.Fatalf("%s is %s while the other task ran; want it still waiting", name, now.State)
		}
	}
	// The leader claimed the workflow when start ended; with nothing but waits left, it may
	// have released it already, for whichever master sees a wait end.
	if owner := f.owner(t, wf); owner != m1.id && owner != "" {
		t.Fatalf("workflow %d is owned by %q; the scenario needs the leader %s owning it, or nobody", wf, owner, m1.id)
	}
	m2 := f.startMaster(t, "master-2")
	base1 := fmt.Sprintf("http://127.0.0.1:%d", m1.Port)
	base2 := fmt.Sprintf("http://127.0.0.1:%d", m2.Port)

	// How long a signal through the leader takes (one it refuses: the other task has ended),
	// so that the kill lands while the signals are under way, near their answers: each may be
	// applied and answered, or applied and not answered, or lost.
	began := time.Now()
	if out, code := f.Run("signal", strconv.FormatInt(f.taskList(t, other)[0].ID, 10), "--server", base1, "--token-file", tokenFile); code == 0 || !strings.Contains(out, "409") {
		t.Fatalf("signal of an ended task through master-1: exit %d\n%s\nwant it refused (409)", code, out)
	}
	roundTrip := time.Since(began)
	type sent struct {
		name, text string
		fail       bool
		out        string
		code       int
	}
	signals := []*sent{{name: "deploy", text: "go ahead"}, {name: "drop", text: "not in business hours", fail: true}}
	signal := func(s *sent, via ...string) (string, int) {
		args := []string{"signal", strconv.FormatInt(agents[s.name].ID, 10), "--output", s.text}
		if s.fail {
			args = append(args, "--fail")
		}
		return f.Run(append(args, via...)...)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, s := range signals {
		wg.Go(func() {
			<-start
			s.out, s.code = signal(s, "--server", base1, "--token-file", tokenFile)
		})
	}
	var faultAt time.Time
	wg.Go(func() {
		<-start
		time.Sleep(roundTrip * 9 / 10)
		faultAt = time.Now()
		if err := m1.Signal(syscall.SIGKILL); err != nil {
			t.Error(err)
		}
	})
	close(start)
	wg.Wait()

	// No master leads until master-1's session expires: restart is approved meanwhile, on the
	// database.
	if out, code := f.Run("signal", strconv.FormatInt(agents["restart"].ID, 10), "--output", "fine by me"); code != 0 ||
		!strings.Contains(out, "its tool call 1.1 is approved: it runs") {
		t.Fatalf("signal of restart while the leader is dead: exit %d\n%s", code, out)
	}
	for _, s := range signals {
		out, code := signal(s, "--server", base2, "--token-file", tokenFile)
		t.Logf("signal of %s to the dying leader: exit %d %q; again to master-2: exit %d %q", s.name, s.code, s.out, code, out)
		refused := code != 0 && strings.Contains(out, "409")
		switch {
		case s.code == 0 && !refused:
			t.Errorf("signal of %s again, after the leader had applied it: exit %d\n%s\nwant it refused (409)", s.name, code, out)
		case s.code != 0 && code != 0 && !refused:
			t.Errorf("signal of %s again, after no answer: exit %d\n%s\nwant it applied or refused (409)", s.name, code, out)
		}
	}

	history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf, other}, FaultAt: faultAt})
	if owner := f.owner(t, wf); owner != m2.id {
		t.Errorf("workflow %d is owned by %q; want master-2, the survivor, to have finished it", wf, owner)
	}
	want := []string{fmt.Sprintf("deploy zk-%d-1-1", agents["deploy"].ID), fmt.Sprintf("restart zk-%d-1-1", agents["restart"].ID)}
	got := readLedger(t, ledger)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("ledger %q; want %q: each approved call run once, the rejected one never", got, want)
	}
	rejected := "a reviewer rejected this call, so it did not run: not in business hours"
	for name, ti := range agents {
		ti := f.task(t, ti.ID)
		if want := llmtest.Answer(prompts[name]); ti.State != dao.TaskSucceeded || deref(ti.Output) != want {
			t.Errorf("%s = %s, output %q; want succeeded with %q", name, ti.State, deref(ti.Output), want)
		}
		if got := f.attempts(t, ti.ID); len(got) != 2 || got[0] != "paused@"+w1.id || got[1] != "succeeded@"+w1.id || ti.FailoverCount != 0 {
			t.Errorf("%s attempts %v, failover_count %d; want paused, then succeeded, never failed over", name, got, ti.FailoverCount)
		}
		if n := srv.Calls(prompts[name]); n != 2 {
			t.Errorf("the model got %d requests of %s, want 2: the call, then the answer", n, name)
		}
		turns, calls, results := f.agentLoop(t, ti.ID)
		if s := strings.Join(turns, ","); s != "1@1,2@2" {
			t.Errorf("%s turns %s; want the call answered before the pause, the answer after", name, s)
		}
		if want := fmt.Sprintf("1.1 %s ended starts=1 ended-by=2", name); strings.Join(calls, "|") != want {
			t.Errorf("%s calls %v; want %s", name, calls, want)
		}
		wantResult := "done"
		if name == "drop" {
			wantResult = rejected
		}
		if results[name] != wantResult {
			t.Errorf("%s's call result %q; want %q", name, results[name], wantResult)
		}
	}
	if !slices.Contains(srv.ToolResults(), "call_1: "+rejected) {
		t.Errorf("the model was never told of the rejection: tool results %q", srv.ToolResults())
	}
	events, _, err := f.db.AuditList(context.Background(), dao.AuditFilter{Action: dao.AuditTaskSignal}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	applied := map[string]int{}
	for _, ev := range events {
		if ev.Outcome == dao.AuditOK {
			applied[ev.Target]++
		}
	}
	for name, ti := range agents {
		if n := applied[fmt.Sprintf("task-instance/%d", ti.ID)]; n != 1 {
			t.Errorf("%s has %d applied signals in the audit log, want 1", name, n)
		}
	}
	// The task page's conversation names who gave each word: the API's token user, or the
	// command line's user on the database.
	reviewers := map[string]string{"deploy": "admin", "drop": "admin", "restart": "cli:"}
	for name, ti := range agents {
		var page struct {
			AgentLoop struct {
				Turns []struct {
					Calls []struct {
						Review   string `json:"review"`
						Reviewer string `json:"reviewer"`
					} `json:"tool_calls"`
				} `json:"turns"`
			} `json:"agent_loop"`
		}
		r := call(t, &http.Client{Timeout: 10 * time.Second}, "GET", fmt.Sprintf("%s/api/v1/task-instances/%d", base2, ti.ID), "", bearer(uiToken)...)
		if err := json.Unmarshal([]byte(r.body), &page); r.status != http.StatusOK || err != nil {
			t.Fatalf("the task of %s from master-2: %d %v\n%s", name, r.status, err, r.body)
		}
		if turns := page.AgentLoop.Turns; len(turns) != 2 || len(turns[0].Calls) != 1 || !strings.HasPrefix(turns[0].Calls[0].Reviewer, reviewers[name]) {
			t.Errorf("%s's conversation %+v; want its call's reviewer %s…", name, turns, reviewers[name])
		}
	}
}
