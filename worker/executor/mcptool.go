package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
)

// mcpServer is an attempt's connection to the server of an mcp tool, and the server's tools
// the declaration lets through, by their names on the server.
type mcpServer struct {
	decl    workflow.Tool
	session *mcp.ClientSession
	tools   map[string]*mcp.Tool
	order   []string
	close   func()
}

// toolbox is what a tool-calling agent may call: its declared tools, and those of its MCP
// servers, connected when first needed (a turn sent to the model, or a call to run) and
// closed when the attempt ends.
type toolbox struct {
	e       Agent
	t       Task
	log     io.Writer
	decls   map[string]workflow.Tool
	servers map[string]*mcpServer
	// signalled holds the task's checkpoints, read at the attempt's start.
	signalled map[string]Checkpoint
}

func newToolbox(e Agent, t Task, log io.Writer) *toolbox {
	tb := &toolbox{e: e, t: t, log: log, decls: map[string]workflow.Tool{}}
	for _, tool := range t.Spec.Tools {
		tb.decls[tool.Name] = tool
	}
	return tb
}

// resolve returns the tool the model's name stands for: a declared tool, or a tool of an mcp
// declaration (its name <decl>__<tool>), with the declaration's policies (idempotent,
// on-interrupted, approve, timeout). Whether the server has that tool is known only once it
// is connected.
func (tb *toolbox) resolve(name string) (workflow.Tool, bool) {
	if tool, ok := tb.decls[name]; ok && tool.Type != workflow.ToolMCP {
		return tool, true
	}
	server, _, ok := strings.Cut(name, "__")
	decl, declared := tb.decls[server]
	if !ok || !declared || decl.Type != workflow.ToolMCP {
		return workflow.Tool{}, false
	}
	tool := decl
	tool.Name = name
	tool.Arguments = nil
	return tool, true
}

// specs returns the tools offered to the model, connecting the MCP servers first.
func (tb *toolbox) specs(ctx context.Context) ([]llm.ToolSpec, error) {
	var out []llm.ToolSpec
	for _, decl := range tb.t.Spec.Tools {
		if decl.Type != workflow.ToolMCP {
			out = append(out, llm.ToolSpec{Name: decl.Name, Description: decl.Description, Parameters: decl.Arguments})
			continue
		}
		srv, err := tb.server(ctx, decl.Name)
		if err != nil {
			return nil, err
		}
		for _, name := range srv.order {
			mt := srv.tools[name]
			params, _ := mt.InputSchema.(map[string]any)
			desc := mt.Description
			if decl.Description != "" {
				desc = decl.Description + ": " + desc
			}
			out = append(out, llm.ToolSpec{Name: workflow.MCPToolName(decl.Name, name), Description: desc, Parameters: params})
		}
	}
	return out, nil
}

// server returns the connection to the server of the mcp declaration decl, connecting it.
func (tb *toolbox) server(ctx context.Context, decl string) (*mcpServer, error) {
	if srv, ok := tb.servers[decl]; ok {
		return srv, nil
	}
	d := tb.decls[decl]
	srv, err := tb.e.connectMCP(ctx, tb.t, d, tb.log)
	if err != nil {
		return nil, fmt.Errorf("mcp tool %s: %w", decl, err)
	}
	if tb.servers == nil {
		tb.servers = map[string]*mcpServer{}
	}
	tb.servers[decl] = srv
	return srv, nil
}

// close ends every MCP server's connection (a stdio server's process with it).
func (tb *toolbox) close() {
	for _, srv := range tb.servers {
		srv.close()
	}
}

// errMCPServer is a server of an mcp tool that could not be reached or listed: the attempt
// fails, the model can do nothing about it.
var errMCPServer = errors.New("the MCP server")

// connectMCP connects to the server of decl and lists its tools: a command is run per
// attempt under the supervisor, like a shell task (contained, its standard error in the
// task's log), a url spoken to over streamable HTTP through the http tools' client, if
// worker.http-tools.allow lets it.
func (e Agent) connectMCP(ctx context.Context, t Task, decl workflow.Tool, log io.Writer) (*mcpServer, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "zksched", Version: "1"}, nil)
	var transport mcp.Transport
	cleanup := func() {}
	if decl.URL != "" {
		if !e.HTTP.allowed(decl.URL) {
			return nil, fmt.Errorf("%w: the url %s is under none of worker.http-tools.allow (%s)", errHTTPToolConfig, decl.URL,
				strings.Join(e.HTTP.Allow, ", "))
		}
		transport = &mcp.StreamableClientTransport{Endpoint: decl.URL, HTTPClient: e.HTTP.Client, MaxRetries: -1,
			DisableStandaloneSSE: true}
	} else {
		sub := t
		sub.Spec = workflow.Task{Name: t.Spec.Name, Type: "shell", Command: decl.Command, Workdir: t.Spec.Workdir, Env: t.Spec.Env}
		sub.stdin = true
		dir, scratch, err := e.Shell.workdir(sub)
		if err != nil {
			return nil, fmt.Errorf("make the server's scratch directory: %w", err)
		}
		cmd, leaf := e.Shell.command(sub, dir, scratch)
		cmd.Stderr = log
		// The supervisor watches the worker's pid, and ends the server when the worker is
		// gone; the parent-death signal is not set, as the thread that starts it does not
		// live as long as the server.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: e.Shell.KillGrace + drainLimit}
		cleanup = func() {
			if leaf != "" {
				if _, err := endCgroup(leaf, drainLimit); err != nil {
					fmt.Fprintf(log, "zksched: end the MCP server's cgroup: %v\n", err)
				}
			}
			if scratch {
				_ = os.RemoveAll(dir)
			}
		}
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("%w did not start or answer: %v", errMCPServer, err)
	}
	srv := &mcpServer{decl: decl, session: session, tools: map[string]*mcp.Tool{},
		close: func() { _ = session.Close(); cleanup() }}
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			srv.close()
			return nil, fmt.Errorf("%w: list its tools: %v", errMCPServer, err)
		}
		if (len(decl.Include) > 0 && !slices.Contains(decl.Include, tool.Name)) || slices.Contains(decl.Exclude, tool.Name) {
			continue
		}
		srv.tools[tool.Name] = tool
		srv.order = append(srv.order, tool.Name)
	}
	fmt.Fprintf(log, "mcp tool %s: connected; its tools: %s\n", decl.Name, strings.Join(srv.order, ", "))
	return srv, nil
}

// runMCPTool calls a tool of an MCP server: its text content is the result, and the server's
// isError the tool failing.
func (e Agent) runMCPTool(ctx context.Context, tb *toolbox, tool workflow.Tool, c ToolCall, args map[string]any, log io.Writer) (Result, string) {
	decl, name, _ := strings.Cut(tool.Name, "__")
	srv, err := tb.server(ctx, decl)
	if err != nil {
		return Result{Err: err}, ""
	}
	if _, ok := srv.tools[name]; !ok {
		return Result{Err: fmt.Errorf("the MCP server of %s has no tool %q (it has: %s)", decl, name, strings.Join(srv.order, ", "))}, ""
	}
	cctx, cancel := context.WithTimeout(ctx, toolTimeout(tool))
	defer cancel()
	res, err := srv.session.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args,
		Meta: mcp.Meta{"zksched/tool-call-id": c.ID}})
	if err != nil {
		if ctx.Err() != nil {
			return Result{Stopped: true}, ""
		}
		return Result{Err: fmt.Errorf("the call failed: %v", err)}, ""
	}
	var b strings.Builder
	for _, content := range res.Content {
		if tc, ok := content.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
			continue
		}
		fmt.Fprintf(&b, "[%T content]", content)
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		b.Write(raw)
	}
	buf := &cappedBuffer{limit: toolResultLimit}
	_, _ = buf.Write([]byte(b.String()))
	if res.IsError {
		return Result{Err: errors.New("the server said the call failed")}, buf.text()
	}
	return Result{}, buf.text()
}
