package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/internal/otlptest"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/tracing"
)

// traceEnv turns tracing on in every process, exporting to recv, with sample-ratio ratio.
func traceEnv(recv *otlptest.Receiver, ratio string) []string {
	return []string{"ZKSCHED_TRACING_ENABLED=true", "ZKSCHED_TRACING_ENDPOINT=" + recv.Endpoint(),
		"ZKSCHED_TRACING_SAMPLE_RATIO=" + ratio}
}

// traceparentOf reads the traceparent stored with workflow instance id.
func (e *e2e) traceparentOf(t *testing.T, id int64) string {
	t.Helper()
	var tps []string
	if err := e.db.SQL().Select(&tps, `SELECT traceparent FROM trace_context WHERE workflow_instance_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if len(tps) == 0 {
		return ""
	}
	return tps[0]
}

// TestTraceOfAWorkflowAcrossProcesses runs a workflow on a real master and two workers with
// tracing on, exporting to a test collector: a shell task that prints its TRACEPARENT, a
// task that fails once and is retried, an llm task against the fake model server, and a long
// task whose first worker is killed with kill -9 so that it fails over to the second. Every
// span the three processes send belongs to the one trace stored with the instance: the
// instance's span (from the master, once it ended) over an attempt span per attempt, named
// as its worker named it in TRACEPARENT; the retried task has two, failed then succeeded; the
// lost attempt has one from the master with outcome failed_over; the model call is a GenAI
// span under its attempt.
func TestTraceOfAWorkflowAcrossProcesses(t *testing.T) {
	t.Parallel()
	recv := otlptest.New(t)
	srv := llmtest.New(t)
	srv.Key = "sk-trace"
	e := setupE2E(t, nil, "", append(traceEnv(recv, "1"), llmEnv(srv)...)...)
	e.Master("master")
	w1 := e.Worker("worker-1")
	wfFile := e.file(t, "traced.yaml", `
name: traced
tasks:
  - {name: echo, type: shell, command: 'echo "$TRACEPARENT"'}
  - {name: flaky, type: shell, command: 'if [ "$ZKSCHED_ATTEMPT" = 1 ]; then exit 7; fi; echo ok', retries: 1, retry-interval: 100ms}
  - {name: ask, type: llm, provider: test, prompt: say hello}
  - {name: long, type: shell, command: 'if [ "$ZKSCHED_ATTEMPT" = 1 ]; then sleep 60; fi; echo done'}
`)
	if out, code := e.Run("submit", wfFile); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	tp := e.traceparentOf(t, 1)
	root, ok := tracing.Parse(tp)
	if !ok || !root.IsSampled() {
		t.Fatalf("instance 1 stored traceparent %q, want a sampled one", tp)
	}
	tid := root.TraceID()
	waitUntil(t, 30*time.Second, "all but the long task to end, the long one running", func() bool {
		ts := e.tasks(t, 1)
		return ts["echo"].State == dao.TaskSucceeded && ts["flaky"].State == dao.TaskSucceeded &&
			ts["ask"].State == dao.TaskSucceeded && ts["long"].State == dao.TaskRunning
	})
	// Worker-1's spans are exported before it is killed: what its batch held would die with it.
	recv.Wait(t, 20*time.Second, "worker-1's attempt and model spans", func(s []otlptest.Span) bool { return len(s) >= 5 })
	w1ID := w1.ID(t, time.Second)
	if err := w1.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w1.Wait(t, 10*time.Second)
	w2 := e.Worker("worker-2")
	waitUntil(t, 60*time.Second, "the instance to end", func() bool {
		wf, err := e.db.WorkflowGet(context.Background(), 1)
		return err == nil && wf.State.Terminal()
	})
	spans := recv.Wait(t, 30*time.Second, "the instance's span and both attempts of the long task", func(s []otlptest.Span) bool {
		n := 0
		for _, sp := range s {
			if sp.Name == "workflow traced" || sp.Name == "task long" {
				n++
			}
		}
		return n == 3
	})
	ts := e.tasks(t, 1)

	var wf otlptest.Span
	attempts := map[string][]otlptest.Span{}
	var chats []otlptest.Span
	for _, s := range spans {
		if s.TraceID != tid.String() {
			t.Errorf("span %s of trace %s, want %s", s.Name, s.TraceID, tid)
		}
		switch {
		case s.Name == "workflow traced":
			wf = s
		case strings.HasPrefix(s.Name, "task "):
			name := strings.TrimPrefix(s.Name, "task ")
			attempts[name] = append(attempts[name], s)
			a := int(s.Attrs["zksched.attempt"].(int64))
			if want := tracing.AttemptSpanID(tid, ts[name].ID, a).String(); s.SpanID != want {
				t.Errorf("%s attempt %d: span id %s, want %s", name, a, s.SpanID, want)
			}
			if s.ParentSpanID != root.SpanID().String() {
				t.Errorf("%s attempt %d: parent %s, want the instance's span %s", name, a, s.ParentSpanID, root.SpanID())
			}
		case strings.HasPrefix(s.Name, "chat "):
			chats = append(chats, s)
		default:
			t.Errorf("unexpected span %q", s.Name)
		}
	}
	if wf.SpanID != root.SpanID().String() || wf.ParentSpanID != "" || wf.Status != "ok" || wf.Service != "zksched-master" {
		t.Errorf("instance span = %+v, want id %s, no parent, ok, from the master", wf, root.SpanID())
	}

	outcomes := func(name string) string {
		var out []string
		for a := 1; a <= len(attempts[name]); a++ {
			for _, s := range attempts[name] {
				if s.Attrs["zksched.attempt"] == int64(a) {
					out = append(out, s.Attrs["zksched.attempt.outcome"].(string)+"@"+s.Attrs["zksched.worker"].(string))
				}
			}
		}
		return strings.Join(out, ",")
	}
	w2ID := w2.ID(t, time.Second)
	for name, want := range map[string]string{
		"echo":  "succeeded@" + w1ID,
		"flaky": "failed@" + w1ID + ",succeeded@" + w1ID,
		"ask":   "succeeded@" + w1ID,
		"long":  "failed_over@" + w1ID + ",succeeded@" + w2ID,
	} {
		if got := outcomes(name); got != want {
			t.Errorf("%s attempt spans: %s, want %s", name, got, want)
		}
	}
	for _, s := range attempts["flaky"] {
		if s.Attrs["zksched.attempt"] == int64(1) && (s.Attrs["zksched.attempt.exit_code"] != int64(7) || s.Status != "error") {
			t.Errorf("flaky's failed attempt span = %+v, want exit code 7 and an error status", s)
		}
	}
	for _, s := range attempts["long"] {
		lost := s.Attrs["zksched.attempt"] == int64(1)
		if s.Attrs["zksched.attempt.failover"] != lost {
			t.Errorf("long attempt %v: failover %v", s.Attrs["zksched.attempt"], s.Attrs["zksched.attempt.failover"])
		}
		if lost && s.Service != "zksched-master" {
			t.Errorf("the failed-over attempt's span came from %s, want the master that emits the failover's", s.Service)
		}
	}

	if out := ts["echo"].Output; out == nil || *out != "00-"+tid.String()+"-"+tracing.AttemptSpanID(tid, ts["echo"].ID, 1).String()+"-01" {
		t.Errorf("the shell task saw TRACEPARENT %v, want its attempt's span, sampled", out)
	}
	if len(chats) != 1 {
		t.Fatalf("%d chat spans, want 1", len(chats))
	}
	c := chats[0]
	if c.Name != "chat test-model" || c.ParentSpanID != tracing.AttemptSpanID(tid, ts["ask"].ID, 1).String() {
		t.Errorf("chat span %q under %s, want chat test-model under ask's attempt", c.Name, c.ParentSpanID)
	}
	for k, want := range map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
		"gen_ai.request.model": "test-model", "gen_ai.usage.input_tokens": int64(2), "gen_ai.usage.output_tokens": int64(4)} {
		if c.Attrs[k] != want {
			t.Errorf("chat span %s = %v, want %v", k, c.Attrs[k], want)
		}
	}
	if recv.BadRequests() != 0 {
		t.Errorf("%d exports could not be decoded", recv.BadRequests())
	}
}

// TestTraceSampledOutSendsNothing: with sample-ratio 0 an instance still stores its trace
// context, not sampled, and its shell task passes that on in TRACEPARENT, but no process
// sends a span of it: not while it runs, not when it ends, not when the nodes stop and
// flush what they hold.
func TestTraceSampledOutSendsNothing(t *testing.T) {
	t.Parallel()
	recv := otlptest.New(t)
	e := setupE2E(t, nil, "", traceEnv(recv, "0")...)
	m := e.Master("master")
	w := e.Worker("worker")
	out, code := e.Run("submit", "--wait", e.file(t, "unsampled.yaml", `
name: unsampled
tasks:
  - {name: echo, type: shell, command: 'echo "$TRACEPARENT"'}
  - {name: after, type: shell, depends-on: [echo], command: 'echo after'}
`))
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	tp := e.traceparentOf(t, 1)
	sc, ok := tracing.Parse(tp)
	if !ok || sc.IsSampled() {
		t.Fatalf("stored traceparent %q, want one not sampled", tp)
	}
	echo := e.tasks(t, 1)["echo"]
	if want := "00-" + sc.TraceID().String() + "-" + tracing.AttemptSpanID(sc.TraceID(), echo.ID, 1).String() + "-00"; echo.Output == nil || *echo.Output != want {
		t.Errorf("the shell task saw TRACEPARENT %v, want %s", echo.Output, want)
	}
	var queued int
	if err := e.db.SQL().Get(&queued, `SELECT count(*) FROM trace_outbox`); err != nil || queued != 0 {
		t.Errorf("trace outbox holds %d rows (%v), want none for an unsampled instance", queued, err)
	}
	for _, p := range []*testcluster.Proc{w, m} {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	if code := w.Wait(t, 20*time.Second); code != 0 {
		t.Errorf("worker exit %d", code)
	}
	if code := m.Wait(t, 20*time.Second); code != 0 {
		t.Errorf("master exit %d", code)
	}
	if s := recv.Spans(); len(s) != 0 {
		t.Errorf("received %d spans of an unsampled trace: %+v", len(s), s)
	}
}

// TestTracingOffStoresNothing: with tracing off (the default) an instance is stored without a
// trace context and its shell task gets no TRACEPARENT.
func TestTracingOffStoresNothing(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	e.Master("master")
	e.Worker("worker")
	out, code := e.Run("submit", "--wait", e.file(t, "off.yaml", `
name: off
tasks:
  - {name: echo, type: shell, command: 'echo "[$TRACEPARENT]"'}
`))
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	if tp := e.traceparentOf(t, 1); tp != "" {
		t.Errorf("stored traceparent %q with tracing off", tp)
	}
	if o := e.tasks(t, 1)["echo"].Output; o == nil || *o != "[]" {
		t.Errorf("the shell task saw TRACEPARENT %v, want none", o)
	}
}
