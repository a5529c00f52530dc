package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/zksched/zksched/conf"
)

// apiClient acts through a master's HTTP API (/api/v1) as the user of its token: the master
// checks the role and writes the audit row, as for any client of the API.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// apiRequestTimeout bounds one request to a master.
const apiRequestTimeout = 30 * time.Second

// newAPIClient returns a client of the master at server. The token is the content of
// tokenFile, or else of the ZKSCHED_TOKEN variable, or else of the token file a master of
// this user on this machine generated (api-token in the state folder: ZKSCHED_NODE_STATE_DIR,
// else $XDG_STATE_HOME/zksched, else $HOME/.local/state/zksched), so that the user who
// started a master reaches it with no flag. None sends requests without one, which only a
// master with api.allow-unauthenticated serves.
func newAPIClient(server, tokenFile string) (*apiClient, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, usageError{fmt.Errorf("--server %q: want a master's URL, such as http://master-1:5678", server)}
	}
	token := os.Getenv("ZKSCHED_TOKEN")
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, usageError{fmt.Errorf("--token-file: %w", err)}
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, usageError{fmt.Errorf("--token-file %s is empty", tokenFile)}
		}
	}
	if dir := conf.DefaultStateDir(os.Environ()); token == "" && dir != "" {
		// Absent or unreadable (another user's): the master will say 401.
		if b, err := os.ReadFile(conf.GeneratedTokenFile(dir)); err == nil {
			token = strings.TrimSpace(string(b))
		}
	}
	return &apiClient{base: strings.TrimSuffix(u.String(), "/"), token: token, http: &http.Client{Timeout: apiRequestTimeout}}, nil
}

// apiError is an answer of the API that is not a success: its status and its message.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("the master answered %d %s: %s", e.status, http.StatusText(e.status), e.msg)
}

// maxAnswer bounds the answer read from a master: a log read from its first chunk is the
// largest, and a worker caps each attempt's log well below this.
const maxAnswer = 256 << 20

// do sends a request with body (JSON, unless nil) and decodes the answer into out.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("master %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("master %s: read the answer: %w", c.base, err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error.Message == "" {
			e.Error.Message = strings.TrimSpace(string(raw[:min(len(raw), 200)]))
		}
		return &apiError{status: resp.StatusCode, msg: e.Error.Message}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("master %s: %s %s: the answer is not the API's JSON: %w", c.base, method, path, err)
	}
	return nil
}

// notFound turns the API's 404 for an instance into noSuchError. Another 404 (a master too
// old to have the route) stays as it is.
func notFound(err error, kind string, id int64) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound && !strings.HasPrefix(ae.msg, "no API endpoint") {
		_, hint, _ := strings.Cut(ae.msg, "not found: ")
		return noSuchError{kind: kind, id: id, hint: hint}
	}
	return err
}

// statusPage is the API's answer for a workflow instance: its status with a page of its
// tasks, and the cursor of the next page.
type statusPage struct {
	statusJSON
	TasksNext int64 `json:"tasks_next"`
}

// Status reads the instance and all its tasks, a page of the most the API gives at a time
// after another.
func (c *apiClient) Status(ctx context.Context, id int64) (*statusJSON, error) {
	var st *statusJSON
	for after := int64(0); ; {
		var p statusPage
		path := fmt.Sprintf("/api/v1/workflow-instances/%d?limit=1000", id)
		if after > 0 {
			path += fmt.Sprintf("&after=%d", after)
		}
		if err := c.do(ctx, http.MethodGet, path, nil, &p); err != nil {
			return nil, notFound(err, "workflow", id)
		}
		if st == nil {
			st = &p.statusJSON
		} else {
			st.Tasks = append(st.Tasks, p.Tasks...)
		}
		if p.TasksNext == 0 {
			return st, nil
		}
		after = p.TasksNext
	}
}

func (c *apiClient) Attempts(ctx context.Context, id int64) ([]attemptStatusJSON, error) {
	var d struct {
		Attempts []attemptStatusJSON `json:"attempts"`
	}
	err := c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/task-instances/%d", id), nil, &d)
	return d.Attempts, notFound(err, "task", id)
}

func (c *apiClient) Log(ctx context.Context, id int64, attempt, fromSeq int) (logPart, error) {
	q := url.Values{"from_seq": {fmt.Sprint(fromSeq)}}
	if attempt > 0 {
		q.Set("attempt", fmt.Sprint(attempt))
	}
	p := logPart{TaskInstance: id}
	if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/task-instances/%d/log?%s", id, q.Encode()), nil, &p); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusBadRequest {
			return logPart{}, usageError{errors.New(ae.msg)}
		}
		return logPart{}, notFound(err, "task", id)
	}
	return p, nil
}

func (c *apiClient) Kill(ctx context.Context, id int64) (killJSON, error) {
	var k killJSON
	err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/task-instances/%d/kill", id), nil, &k)
	return k, notFound(err, "task", id)
}

func (c *apiClient) RerunTask(ctx context.Context, id int64) (rerunJSON, error) {
	var r rerunJSON
	err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/task-instances/%d/rerun", id), nil, &r)
	return r, notFound(err, "task", id)
}

func (c *apiClient) RerunWorkflow(ctx context.Context, id int64) (rerunJSON, error) {
	var r rerunJSON
	err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/workflow-instances/%d/rerun", id), nil, &r)
	return r, notFound(err, "workflow", id)
}

func (c *apiClient) Stop(ctx context.Context, id int64) (stopJSON, error) {
	var s stopJSON
	err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/workflow-instances/%d/stop", id), nil, &s)
	return s, notFound(err, "workflow", id)
}

func (c *apiClient) Signal(ctx context.Context, id int64, output string, fail bool) (signalJSON, error) {
	var s signalJSON
	body := map[string]any{"output": output, "fail": fail}
	err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/task-instances/%d/signal", id), body, &s)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusBadRequest {
		return s, usageError{errors.New(ae.msg)}
	}
	return s, notFound(err, "task", id)
}
