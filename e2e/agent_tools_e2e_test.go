package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/mcptest"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// TestToolAgentWithEveryKindOfTool runs a six-turn agent on real processes, the offline model
// calling each of its tools once: a shell tool, an http tool (a server of the test's, allowed
// by the workers' worker.http-tools), a workflow tool (a child instance) and the two tools an
// MCP server (this test binary, mcptest) offers of its three; then it answers.
func TestToolAgentWithEveryKindOfTool(t *testing.T) {
	f := setupFault(t)
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	var mu sync.Mutex
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		requests = append(requests, fmt.Sprintf("%s %s %s %s", r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), body))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"ticket": 7}`)
	}))
	t.Cleanup(srv.Close)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"ZKSCHED_LLM_PROVIDERS_OFFLINE_TYPE=offline", "ZKSCHED_WORKER_HTTP_TOOLS_ALLOW=" + srv.URL + "/api/",
		"ZKSCHED_WORKER_HTTP_TOOLS_ALLOW_PRIVATE_TARGETS=true"}
	f.startMaster(t, "master", env...)
	f.startWorker(t, "worker", 2, env...)
	child, err := workflow.Parse([]byte("name: lookup\nparams: {host: {type: string}}\ntasks:\n" +
		"  - {name: find, type: shell, command: 'echo \"$ZKSCHED_PARAM_host is in rack 4\"'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.Define(context.Background(), f.db, lifecycle.Definition{Spec: child}, time.Now()); err != nil {
		t.Fatal(err)
	}
	wf := f.submitFile(t, fmt.Sprintf(`
name: every-tool
tasks:
  - name: agent
    type: agent
    provider: offline
    prompt: Find db-1, note it, open a ticket and write it down
    env: {LEDGER: %[1]q}
    tools:
      - name: note
        description: Notes a line.
        type: shell
        command: echo "note $ZKSCHED_TOOL_CALL_ID" >> "$LEDGER"; echo noted
      - name: ticket
        description: Opens a ticket.
        type: http
        url: %[2]s/api/tickets
        arguments: {type: object, properties: {title: {type: string, default: db-1 is slow}}}
      - name: find
        description: Finds a host.
        type: workflow
        workflow: lookup
        arguments: {type: object, properties: {host: {type: string, default: db-1}}, required: [host]}
      - name: notes
        description: A notebook.
        type: mcp
        command: %[3]s=%[1]q exec %[4]q
        exclude: [forbidden]
`, ledger, srv.URL, mcptest.LedgerEnv, self))
	agent := f.taskList(t, wf)[0]
	waitUntil(t, 120*time.Second, "the agent to end", func() bool { return f.task(t, agent.ID).State.Terminal() })
	ti := f.task(t, agent.ID)
	if ti.State != dao.TaskSucceeded {
		t.Fatalf("agent %s: %s", ti.State, deref(ti.Error))
	}
	turns, calls, results := f.agentLoop(t, agent.ID)
	if len(turns) != 6 {
		t.Errorf("turns %v, want 6: a call of each of 5 tools, then the answer", turns)
	}
	// The agent waits for find's child on no worker unless the child has ended by the time
	// the call looks: the calls from find on are then ended by the attempt its end queued.
	if ti.Attempt > 2 {
		t.Errorf("the agent took %d attempts; want 1, or 2 if it waited for find's child", ti.Attempt)
	}
	var tools []string
	by := 1
	for _, c := range calls {
		tool := strings.Fields(c)[1]
		if tool == "find" {
			by = ti.Attempt
		}
		if !strings.Contains(c, fmt.Sprintf(" ended starts=1 ended-by=%d", by)) {
			t.Errorf("call %s: want ended once by attempt %d", c, by)
		}
		tools = append(tools, tool)
	}
	if got := strings.Join(tools, ","); got != "note,ticket,find,notes__echo,notes__file" && got != "note,ticket,find,notes__file,notes__echo" {
		t.Errorf("tools called %s", got)
	}
	for tool, want := range map[string]string{"note": "noted", "ticket": "HTTP 201 Created\n{\"ticket\": 7}",
		"find": "db-1 is in rack 4", "notes__echo": "offline", "notes__file": "wrote offline"} {
		if results[tool] != want {
			t.Errorf("%s's result %q, want %q", tool, results[tool], want)
		}
	}
	mu.Lock()
	if len(requests) != 1 || !strings.HasPrefix(requests[0], fmt.Sprintf("POST /api/tickets zk-%d-2-1 ", agent.ID)) {
		t.Errorf("the ticket server saw %q: want one POST with the call id", requests)
	}
	mu.Unlock()
	l := readLedger(t, ledger)
	if len(l) != 2 || l[0] != fmt.Sprintf("note zk-%d-1-1", agent.ID) || !strings.HasPrefix(l[1], "file offline zk-") {
		t.Errorf("ledger %q: want the note and the mcp file once each", l)
	}
}
