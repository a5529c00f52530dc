package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zksched/zksched/workflow"
)

// mcpTestServer is an MCP server over standard input and output with the tools file (appends
// its text to ledger, with the call id the client gave), echo and forbidden.
func mcpTestServer(ledger string) int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	type fileArgs struct {
		Text string `json:"text" jsonschema:"the line to write"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "file", Description: "writes a line"}, func(ctx context.Context, req *mcp.CallToolRequest, in fileArgs) (*mcp.CallToolResult, any, error) {
		f, err := os.OpenFile(ledger, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		fmt.Fprintf(f, "file %s %v\n", in.Text, req.Params.Meta["zksched/tool-call-id"])
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + in.Text}}}, nil, nil
	})
	type echoArgs struct {
		Say string `json:"say"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "says it back"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Say}}, IsError: in.Say == "fail"}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "forbidden", Description: "must never be offered"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("forbidden was called")
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

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
			Command: fmt.Sprintf("ZKSCHED_TEST_MCP_SERVER=%s exec -a mcp-server-of-%s %s", ledger, ledger, self)}}}, Loop: store}
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
