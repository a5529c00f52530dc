// Package mcptest is an MCP server over standard input and output for tests: a test binary
// runs it when its environment names a ledger (Main), and a tool-calling agent's mcp tool
// starts that binary as its server. Its tools: file (appends its text and the call's id to the
// ledger), echo (says its argument back; "fail" is an error result) and forbidden (which a
// test excludes and which must never be called).
package mcptest

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LedgerEnv is the variable that makes a test binary serve (Main) and names the ledger.
const LedgerEnv = "ZKSCHED_TEST_MCP_SERVER"

// Main serves MCP over standard input and output and exits when LedgerEnv is set; otherwise
// it returns at once. A test binary calls it first thing in its TestMain.
func Main() {
	if ledger := os.Getenv(LedgerEnv); ledger != "" {
		os.Exit(Serve(ledger))
	}
}

// Serve serves the test tools over standard input and output until the client closes them.
func Serve(ledger string) int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "zksched-test", Version: "1"}, nil)
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
