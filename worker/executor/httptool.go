package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/zksched/zksched/notify"
	"github.com/zksched/zksched/workflow"
)

// HTTPTools is what the http tools of a worker's agents may do: worker.http-tools.
type HTTPTools struct {
	// Allow are the base URLs a tool's url must start with; none refuses every http tool.
	Allow []string
	// Client sends the requests: notify.OutboundClient, which follows no redirect and,
	// unless told otherwise, refuses private targets when it connects.
	Client *http.Client
	// ResponseLimit is how many bytes of an answer's body the model is given.
	ResponseLimit int
}

// errHTTPToolConfig is an http tool its worker's config does not let run: the task fails,
// since the model can do nothing about it.
var errHTTPToolConfig = errors.New("http tool refused by the worker's config")

// allowed reports whether raw, an http tool's URL, starts with one of the allowed bases: the
// same scheme and host (and port), and a path under the base's, compared after both are
// cleaned, so that ".." cannot climb out of it.
func (h HTTPTools) allowed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" {
		return false
	}
	for _, b := range h.Allow {
		base, err := url.Parse(b)
		if err != nil || !strings.EqualFold(base.Scheme, u.Scheme) || !strings.EqualFold(base.Host, u.Host) {
			continue
		}
		prefix := strings.TrimSuffix(cleanPath(base.EscapedPath()), "/")
		path := cleanPath(u.EscapedPath())
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return true
		}
	}
	return false
}

// cleanPath cleans an escaped URL path, keeping its trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	trail := strings.HasSuffix(p, "/")
	segs := strings.Split(p, "/")
	var out []string
	for _, s := range segs {
		switch s {
		case "", ".":
		case "..", "%2e%2e", "%2E%2E", ".%2e", "%2e.":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	c := "/" + strings.Join(out, "/")
	if trail && c != "/" {
		c += "/"
	}
	return c
}

// checkHTTPTool returns an error if the worker's config does not let tool run.
func (e Agent) checkHTTPTool(tool workflow.Tool) error {
	if !e.HTTP.allowed(tool.URL) {
		allow := strings.Join(e.HTTP.Allow, ", ")
		if allow == "" {
			allow = "empty"
		}
		return fmt.Errorf("%w: the url %s of tool %s is under none of worker.http-tools.allow (%s)",
			errHTTPToolConfig, tool.URL, tool.Name, allow)
	}
	return nil
}

// runHTTPTool sends call c of an http tool: the arguments as the query (GET, DELETE) or a
// JSON body, the call's id as its Idempotency-Key. The answer's status and body (cut at the
// response limit) are the result; a status of 400 or more is the tool failing.
func (e Agent) runHTTPTool(ctx context.Context, t Task, tool workflow.Tool, c ToolCall, args map[string]any, log io.Writer) (Result, string) {
	method := tool.Method
	if method == "" {
		method = http.MethodPost
	}
	target := tool.URL
	var body io.Reader
	if method == http.MethodGet || method == http.MethodDelete {
		u, _ := url.Parse(tool.URL)
		q := u.Query()
		keys := make([]string, 0, len(args))
		for k := range args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			q.Set(k, argText(args[k]))
		}
		u.RawQuery = q.Encode()
		target = u.String()
	} else {
		raw := c.Arguments
		if strings.TrimSpace(raw) == "" {
			raw = "{}"
		}
		body = bytes.NewReader([]byte(raw))
	}
	timeout := toolTimeout(tool)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, target, body)
	if err != nil {
		return Result{Err: fmt.Errorf("%w: %v", errHTTPToolConfig, err)}, ""
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", c.ID)
	req.Header.Set("User-Agent", "zksched-agent")
	env := envMap(e.Shell.BaseEnv)
	for k, v := range tool.Headers {
		req.Header.Set(k, os.Expand(v, func(name string) string { return env[name] }))
	}
	fmt.Fprintf(log, "%s %s\n", method, target)
	client := e.HTTP.Client
	if client == nil {
		client = notify.OutboundClient(timeout, false)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Result{Stopped: true}, ""
		}
		if errors.Is(err, notify.ErrPrivateTarget) {
			return Result{Err: fmt.Errorf("%w: %s resolves to a loopback, link-local or metadata address, which "+
				"worker.http-tools.allow-private-targets: true would allow", errHTTPToolConfig, req.URL.Host)}, ""
		}
		return Result{Err: fmt.Errorf("the request failed: %v", err)}, ""
	}
	defer resp.Body.Close()
	limit := e.HTTP.ResponseLimit
	if limit <= 0 {
		limit = toolResultLimit
	}
	buf := &cappedBuffer{limit: limit}
	if _, err := io.Copy(buf, resp.Body); err != nil && ctx.Err() == nil {
		return Result{Err: fmt.Errorf("reading the answer: %v", err)}, ""
	}
	out := fmt.Sprintf("HTTP %s\n%s", resp.Status, buf.text())
	fmt.Fprintf(log, "answered %s, %d bytes\n", resp.Status, buf.total)
	if resp.StatusCode >= 300 {
		return Result{Err: fmt.Errorf("the answer was %s", resp.Status)}, out
	}
	return Result{}, out
}

// envMap reads a list of NAME=value variables; nil for the worker's own environment.
func envMap(env []string) map[string]string {
	if env == nil {
		env = TaskEnv(os.Environ(), nil, nil)
	}
	out := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// toolTimeout is the bound of one call of tool.
func toolTimeout(tool workflow.Tool) time.Duration {
	if tool.Timeout > 0 {
		return time.Duration(tool.Timeout)
	}
	return workflow.DefaultToolTimeout
}
