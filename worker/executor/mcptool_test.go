package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zksched/zksched/internal/mcptest"
	"github.com/zksched/zksched/workflow"
)

func TestMCPToolOverStdio(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(t.TempDir(), "ledger")
	store := newMemLoop()
	task := Task{ID: 9, Attempt: 1, Spec: workflow.Task{Name: "files", Type: "agent", Provider: "offline", Prompt: "write it down",
		Tools: []workflow.Tool{{Name: "notes", Description: "a notebook", Type: workflow.ToolMCP, Exclude: []string{"forbidden"},
			Command: fmt.Sprintf("%s=%s exec -a mcp-server-of-%s %s", mcptest.LedgerEnv, ledger, ledger, self)}}}, Loop: store}
	var log syncBuffer
	res := Agent{Providers: offlineProviders(), Shell: shell(t)}.Run(context.Background(), task, &log)
	if res.Err != nil {
		t.Fatalf("%v\n%s", res.Err, log.String())
	}
	// The offline model calls each offered tool once, in the server's order.
	got := []string{}
	for _, k := range [][2]int{{1, 1}, {2, 1}} {
		c := store.calls[k]
		got = append(got, fmt.Sprintf("%s=%s", c.Tool, c.Result))
	}
	if strings.Join(got, ",") != "notes__echo=offline,notes__file=wrote offline" && strings.Join(got, ",") != "notes__file=wrote offline,notes__echo=offline" {
		t.Errorf("calls %v\nlog:\n%s", got, log.String())
	}
	if len(store.calls) != 2 {
		t.Errorf("%d calls, want 2: forbidden is excluded", len(store.calls))
	}
	raw, _ := os.ReadFile(ledger)
	if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "file offline zk-9-") {
		t.Errorf("ledger %q: want one line with the call id", raw)
	}
	// The server and its supervisor ended with the attempt.
	if out, err := exec.Command("pgrep", "-f", "mcp-server-of-"+ledger).Output(); err == nil {
		t.Errorf("processes of the MCP server left after the attempt: %s", out)
	}
	if !strings.Contains(log.String(), "mcp tool notes: connected; its tools:") {
		t.Errorf("log:\n%s", log.String())
	}
}
