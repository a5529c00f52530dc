package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

// cliRun is one finished `zksched` command: its exit code and its two outputs.
type cliRun struct {
	code           int
	stdout, stderr string
}

func (r cliRun) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// json decodes stdout into v.
func (r cliRun) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r)
	}
}

// command returns `zksched args…` with the cluster's environment plus env, its outputs
// going to the buffers given.
func (e *e2e) command(env []string, stdout, stderr *syncBuffer, args ...string) *exec.Cmd {
	cmd := exec.Command(e.Bin, args...)
	cmd.Env = append(append(append([]string{}, os.Environ()...), e.Env...), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd
}

// cli runs `zksched args…` to its end with the cluster's environment plus env.
func (e *e2e) cli(t *testing.T, env []string, args ...string) cliRun {
	t.Helper()
	var stdout, stderr syncBuffer
	err := e.command(env, &stdout, &stderr, args...).Run()
	r := cliRun{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run zksched %v: %v", args, err)
	}
	return r
}

// syncBuffer is a buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// usersFile writes a users file with a user of each role and returns it and the tokens by
// role.
func usersFile(t *testing.T, dir string) (string, map[string]string) {
	t.Helper()
	tokens := map[string]string{}
	var lines []string
	for _, role := range []string{"viewer", "operator", "admin"} {
		token, line, err := newUserLine(role+"-user", role)
		if err != nil {
			t.Fatal(err)
		}
		tokens[role] = token
		lines = append(lines, line)
	}
	path := filepath.Join(dir, "users")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, tokens
}

// tokenFile writes token to a file of its own and returns the file.
func tokenFile(t *testing.T, dir, name, token string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInstanceCommands runs status, logs, kill, rerun, stop and signal on a running workflow,
// each on the database and through a master's API (--server with --token-file, and
// ZKSCHED_SERVER with ZKSCHED_TOKEN): the same JSON both ways, the roles of the API enforced
// by the master, conflicts and unknown ids told apart, and an audit row of each change.
func TestInstanceCommands(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	users, tokens := usersFile(t, e.dir)
	master := e.Master("master", "ZKSCHED_API_USERS_FILE="+users)
	e.Worker("worker")
	server := fmt.Sprintf("http://127.0.0.1:%d", master.Port)
	viewer := tokenFile(t, e.dir, "viewer.token", tokens["viewer"])
	operator := tokenFile(t, e.dir, "operator.token", tokens["operator"])
	// The ways to reach the instances, as a command's flags and its environment.
	type via struct {
		name  string
		flags []string
		env   []string
	}
	db := via{name: "database"}
	api := via{name: "api", flags: []string{"--server", server, "--token-file", operator}}
	apiEnv := via{name: "api by environment", env: []string{"ZKSCHED_SERVER=" + server, "ZKSCHED_TOKEN=" + tokens["operator"]}}
	run := func(v via, args ...string) cliRun {
		t.Helper()
		// The via's flags go before the instance id, the args' own wherever they are.
		return e.cli(t, v.env, append(args[:1:1], append(append([]string{}, v.flags...), args[1:]...)...)...)
	}
	ok := func(v via, args ...string) cliRun {
		t.Helper()
		r := run(v, args...)
		if r.code != 0 {
			t.Fatalf("%s, %v: %s", v.name, args, r)
		}
		return r
	}

	go1 := filepath.Join(e.dir, "go")
	if r := e.cli(t, nil, "submit", e.file(t, "child.yaml", "name: cli-child\ntasks:\n  - {name: hold, type: wait, timeout: 1h}\n")); r.code != 0 {
		t.Fatalf("submit child: %s", r)
	}
	r := e.cli(t, nil, "submit", e.file(t, "cli.yaml", fmt.Sprintf(`
name: cli
tasks:
  - {name: talk, type: shell, command: 'echo one; while [ ! -f %s ]; do sleep 0.05; done; echo two; echo three'}
  - {name: boom, type: shell, command: 'echo bad; exit 3'}
  - {name: review, type: wait, timeout: 1h}
  - {name: hang, type: shell, command: 'sleep 300'}
  - {name: sub, type: workflow, workflow: cli-child}
`, go1)))
	wf, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
	if r.code != 0 || err != nil {
		t.Fatalf("submit: %s", r)
	}
	var ts map[string]dao.TaskInstance
	waitUntil(t, 60*time.Second, "talk and hang running, boom failed, review and sub waiting", func() bool {
		ts = e.tasks(t, wf)
		return ts["talk"].State == dao.TaskRunning && ts["hang"].State == dao.TaskRunning && ts["boom"].State == dao.TaskFailed &&
			ts["review"].State == dao.TaskWaiting && ts["sub"].State == dao.TaskWaiting
	})
	id := func(name string) string { return strconv.FormatInt(ts[name].ID, 10) }
	wfID := strconv.FormatInt(wf, 10)

	// status: the same JSON from the database and from the API.
	var st, stAPI, stEnv statusJSON
	ok(db, "status", wfID, "--json").json(t, &st)
	ok(api, "status", "--json", wfID).json(t, &stAPI)
	ok(apiEnv, "status", wfID, "--json").json(t, &stEnv)
	if !reflect.DeepEqual(st, stAPI) || !reflect.DeepEqual(st, stEnv) {
		t.Errorf("status differs:\ndatabase %+v\napi      %+v\napi env  %+v", st, stAPI, stEnv)
	}
	// status --json shows a task with every field of the API's task view.
	var raw struct{ Tasks []map[string]any }
	ok(db, "status", wfID, "--json").json(t, &raw)
	for _, task := range raw.Tasks {
		if task["name"] != "boom" {
			continue
		}
		for _, key := range []string{"workflow_name", "priority", "worker_group", "max_retries", "params", "output", "exit_code", "next_attempt_at", "output_truncated"} {
			if _, ok := task[key]; !ok {
				t.Errorf("status --json's task lacks the API's %s: %v", key, task)
			}
		}
		if task["exit_code"] != 3.0 {
			t.Errorf("status --json's boom: exit_code %v, want 3", task["exit_code"])
		}
	}
	byName := map[string]taskStatusJSON{}
	for _, ts := range st.Tasks {
		byName[ts.Name] = ts
	}
	if st.ID != wf || st.State != dao.WorkflowRunning || st.WorkflowName != "cli" || len(st.Tasks) != 5 {
		t.Errorf("status = %+v", st)
	}
	if b := byName["boom"]; b.State != dao.TaskFailed || b.Attempt != 1 || b.WorkerID == nil || b.Error == nil {
		t.Errorf("boom = %+v; want failed at attempt 1 on a worker with an error", b)
	}
	if h := byName["hang"]; h.State != dao.TaskRunning || h.WorkerID == nil || !strings.Contains(*h.WorkerID, "127.0.0.1:") {
		t.Errorf("hang = %+v; want running on the worker", h)
	}
	child := byName["sub"].ChildWorkflowInstanceID
	if child == nil {
		t.Fatalf("sub = %+v; want its child instance", byName["sub"])
	}
	waiting := map[string]string{}
	for _, w := range st.Waiting {
		waiting[w.Name] = w.For
	}
	if len(waiting) != 2 || !strings.Contains(waiting["review"], "a signal: zksched signal "+id("review")) ||
		!strings.Contains(waiting["sub"], fmt.Sprintf("its child, workflow instance %d", *child)) {
		t.Errorf("waiting = %+v; want review for a signal, sub for its child", st.Waiting)
	}
	var cst statusJSON
	ok(api, "status", strconv.FormatInt(*child, 10), "--json").json(t, &cst)
	if cst.ParentWorkflowInstanceID == nil || *cst.ParentWorkflowInstanceID != wf || cst.ParentTaskInstanceID == nil ||
		*cst.ParentTaskInstanceID != ts["sub"].ID {
		t.Errorf("the child's status = %+v; want its parent %d and task %d", cst, wf, ts["sub"].ID)
	}
	text := ok(db, "status", wfID).stdout
	for _, want := range []string{"workflow instance " + wfID + ": cli version 1, running", "exit status 3", "waiting:",
		"review (task instance " + id("review") + ") waits for a signal", fmt.Sprintf("child: workflow instance %d", *child)} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}

	// logs --follow on each side prints every line and ends when the attempt ends.
	var follows []*exec.Cmd
	var outs []*syncBuffer
	for _, v := range []via{db, api} {
		for _, asJSON := range []bool{false, true} {
			args := []string{"logs", "--follow", id("talk")}
			if asJSON {
				args = append(args, "--json")
			}
			var stdout, stderr syncBuffer
			cmd := e.command(v.env, &stdout, &stderr, append(args, v.flags...)...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			follows, outs = append(follows, cmd), append(outs, &stdout)
		}
	}
	waitUntil(t, 30*time.Second, "every follower to print the first line", func() bool {
		for _, o := range outs {
			if !strings.Contains(o.String(), "one") {
				return false
			}
		}
		return true
	})
	if err := os.WriteFile(go1, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range follows {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("logs --follow %d: %v\n%s", i, err, outs[i])
			}
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("logs --follow %d did not end with the attempt:\n%s", i, outs[i])
		}
		got := outs[i].String()
		if i%2 == 1 {
			// JSON: one object a read with new text, the last one no longer running.
			var text strings.Builder
			var last logPart
			dec := json.NewDecoder(strings.NewReader(got))
			for dec.More() {
				if err := dec.Decode(&last); err != nil {
					t.Fatalf("logs --follow --json: %v\n%s", err, got)
				}
				text.WriteString(last.Text)
			}
			if last.Running || last.TaskInstance != ts["talk"].ID || last.Attempt != 1 {
				t.Errorf("last part of logs --follow --json = %+v; want attempt 1 of talk, ended", last)
			}
			got = text.String()
		}
		if got != "one\ntwo\nthree\n" {
			t.Errorf("logs --follow %d printed %q; want the three lines", i, got)
		}
	}
	if r := ok(api, "logs", id("boom"), "--attempt", "1"); r.stdout != "bad\n" {
		t.Errorf("logs of boom through the API = %q", r.stdout)
	}
	if r := ok(db, "logs", "--attempt=1", id("boom")); r.stdout != "bad\n" {
		t.Errorf("logs of boom = %q", r.stdout)
	}
	if r := ok(db, "logs", id("review")); r.stdout != "" || !strings.Contains(r.stderr, "has not run: it is waiting") {
		t.Errorf("logs of a wait task: %s", r)
	}

	// Roles: a viewer reads but cannot kill; without a token nothing is read.
	asViewer := via{name: "viewer", flags: []string{"--server", server, "--token-file", viewer}}
	ok(asViewer, "status", wfID)
	for _, args := range [][]string{{"kill", id("hang")}, {"stop", wfID}, {"rerun", id("boom")}, {"signal", id("review")}} {
		if r := run(asViewer, args...); r.code != 1 || !strings.Contains(r.stderr, "403 Forbidden") || !strings.Contains(r.stderr, "needs the operator role") {
			t.Errorf("viewer %v: %s\nwant refused with the status", args, r)
		}
	}
	if r := run(via{name: "no token", flags: []string{"--server", server}}, "status", wfID); r.code != 1 || !strings.Contains(r.stderr, "401 Unauthorized") {
		t.Errorf("status without a token: %s", r)
	}

	// kill through the API, then again on each side: a conflict.
	var k killJSON
	ok(api, "kill", id("hang"), "--json").json(t, &k)
	if k.TaskInstance != ts["hang"].ID || k.State != dao.TaskRunning || k.Worker == nil || k.Attempt != 1 {
		t.Errorf("kill --json = %+v; want asked of its worker", k)
	}
	waitUntil(t, 30*time.Second, "hang to be killed", func() bool { return e.tasks(t, wf)["hang"].State == dao.TaskKilled })
	for _, v := range []via{db, api} {
		if r := run(v, "kill", id("hang")); r.code != 1 || !strings.Contains(r.stderr, "cannot kill task instance "+id("hang")+": it is killed") {
			t.Errorf("%s: second kill: %s\nwant the conflict", v.name, r)
		}
	}

	// rerun of a task on the database, then of the workflow through the API.
	if r := ok(db, "rerun", id("boom")); !strings.Contains(r.stdout, "task instances "+id("boom")+" queued again") {
		t.Errorf("rerun: %s", r)
	}
	waitUntil(t, 30*time.Second, "boom to fail again", func() bool {
		b := e.tasks(t, wf)["boom"]
		return b.State == dao.TaskFailed && b.Attempt == 2
	})
	var rr rerunJSON
	ok(apiEnv, "rerun", "--workflow", wfID, "--json").json(t, &rr)
	if rr.WorkflowInstance != wf || len(rr.Requeued) != 2 {
		t.Errorf("rerun --workflow --json = %+v; want boom and hang queued again", rr)
	}
	if r := run(db, "rerun", id("talk")); r.code != 1 || !strings.Contains(r.stderr, "cannot rerun task instance "+id("talk")+": it is succeeded") {
		t.Errorf("rerun of a succeeded task: %s", r)
	}

	// signal the wait task through the API, then stop the workflow on the database.
	var sg signalJSON
	ok(api, "signal", "--output", "fine", id("review"), "--json").json(t, &sg)
	if sg.State != dao.TaskSucceeded || sg.WorkflowInstance != wf {
		t.Errorf("signal --json = %+v", sg)
	}
	var sp stopJSON
	ok(db, "stop", "--json", wfID).json(t, &sp)
	if sp.WorkflowInstance != wf || sp.State != dao.WorkflowStopped {
		t.Errorf("stop --json = %+v", sp)
	}
	if r := run(api, "stop", wfID); r.code != 1 || !strings.Contains(r.stderr, "409 Conflict") || !strings.Contains(r.stderr, "it is stopped") {
		t.Errorf("second stop through the API: %s", r)
	}

	// Unknown ids: exit 3 on both sides.
	for _, v := range []via{db, api} {
		for _, args := range [][]string{{"status", "99999"}, {"logs", "99999"}, {"kill", "99999"}, {"rerun", "99999"},
			{"rerun", "99999", "--workflow"}, {"stop", "99999"}, {"signal", "99999"}} {
			kind := "task"
			if args[0] == "status" || args[0] == "stop" || len(args) == 3 {
				kind = "workflow"
			}
			if r := run(v, args...); r.code != 3 || !strings.Contains(r.stderr, "no such "+kind+" instance 99999") {
				t.Errorf("%s: %v: %s\nwant exit 3, no such instance", v.name, args, r)
			}
		}
	}

	// Every change made on the database has a row of the command line's; through the API, of
	// the token's user.
	events, _, err := e.db.AuditList(context.Background(), dao.AuditFilter{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range events {
		if ev.Outcome != dao.AuditOK || !strings.HasPrefix(ev.Action, "task.") && !strings.HasPrefix(ev.Action, "workflow.stop") &&
			!strings.HasPrefix(ev.Action, "workflow.rerun") {
			continue
		}
		who := "api:" + ev.Actor
		if strings.HasPrefix(ev.Actor, "cli:") {
			who = "cli"
		}
		got = append(got, who+" "+ev.Action+" "+ev.Target)
	}
	want := []string{
		"cli workflow.stop workflow-instance/" + wfID,
		"api:operator-user task.signal task-instance/" + id("review"),
		"api:operator-user workflow.rerun workflow-instance/" + wfID,
		"cli task.rerun task-instance/" + id("boom"),
		"api:operator-user task.kill task-instance/" + id("hang"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("audit rows of the changes, newest first:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestInstanceCommandsRefuseBadInput: every mistake on the command line is a usage error
// that says what is wrong, before anything is read.
func TestInstanceCommandsRefuseBadInput(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	empty := tokenFile(t, e.dir, "empty", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, `want the id of a workflow instance, got ""`},
		{[]string{"status", "x1"}, `want the id of a workflow instance, got "x1"`},
		{[]string{"status", "1", "2"}, "unexpected arguments [2]"},
		{[]string{"kill", "-3"}, "flag provided but not defined: -3"},
		{[]string{"kill", "--", "-3"}, `want the id of a task instance, got "-3"`},
		{[]string{"logs", "1", "--attempt", "0"}, "--attempt 0: attempts count from 1"},
		{[]string{"logs", "1", "--attempt"}, "flag needs an argument: -attempt"},
		{[]string{"stop", "1", "--server", "ftp://m:1"}, `--server "ftp://m:1": want a master's URL`},
		{[]string{"stop", "1", "--server", "m:5678"}, `want a master's URL, such as http://master-1:5678`},
		{[]string{"rerun", "1", "--server", "http://127.0.0.1:1", "--token-file", empty}, "is empty"},
		{[]string{"rerun", "1", "--server", "http://127.0.0.1:1", "--token-file", "/nonexistent"}, "--token-file: open /nonexistent"},
		{[]string{"rerun", "1", "--token-file", empty}, "--token-file goes with --server"},
	} {
		r := e.cli(t, nil, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "usage: zksched "+tc.args[0]) {
			t.Errorf("%v: %s\nwant a usage error %q", tc.args, r, tc.want)
		}
	}
	if r := e.cli(t, nil, "status", "1", "--server", "http://127.0.0.1:1"); r.code != 1 || !strings.Contains(r.stderr, "master http://127.0.0.1:1") {
		t.Errorf("status of a master not there: %s", r)
	}
}

// TestDocsCommandLine runs the tour of docs/cli.md's command-line section as it is printed,
// in bash, with the master's URL for http://127.0.0.1:5678, against a master that, as the
// quickstart's, generates its token into ~/.local/state/zksched/api-token.
func TestDocsCommandLine(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/cli.md", "The command line", "sh", 1)
	for _, cmd := range []string{"submit", "status", "logs", "kill", "rerun", "stop", "--follow", "--workflow", "--json", "--server"} {
		if !strings.Contains(block, "zksched "+cmd) && !strings.Contains(block, " "+cmd+" ") {
			t.Errorf("the docs' tour does not show %s", cmd)
		}
	}
	e := setupE2E(t, nil, "")
	master := e.Master("master")
	e.Worker("worker")
	script := strings.ReplaceAll(block, "http://127.0.0.1:5678", fmt.Sprintf("http://127.0.0.1:%d", master.Port))
	out, _ := e.docScript(t, script, "HOME="+quickstartHome(t, e))
	for _, want := range []string{"step 1\nstep 2\nstep 3\n", `"text": "step 1\nstep 2\nstep 3\n"`, "queued again",
		"review (task instance", `"state": "stopped"`, ", stopped\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the tour's output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "kill requested") && !strings.Contains(out, "killed before it ran") {
		t.Errorf("the tour's output shows no kill:\n%s", out)
	}
}
