package tracing_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/zksched/zksched/internal/otlptest"
	"github.com/zksched/zksched/tracing"
)

type testBundle struct {
	recv   *otlptest.Receiver
	tracer *tracing.Tracer
}

// setup starts a receiver and a Tracer exporting to it over OTLP/HTTP.
func setup(t *testing.T) *testBundle {
	t.Helper()
	recv := otlptest.New(t)
	cfg := defaultConfig
	cfg.Enabled, cfg.Endpoint = true, recv.Endpoint()
	tr, err := tracing.New(context.Background(), cfg, tracing.Options{Node: "127.0.0.1:5679_1", Role: "worker", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return &testBundle{recv: recv, tracer: tr}
}

func (b *testBundle) flush(t *testing.T) {
	t.Helper()
	if err := b.tracer.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func byName(spans []otlptest.Span) map[string]otlptest.Span {
	out := map[string]otlptest.Span{}
	for _, s := range spans {
		out[s.Name] = s
	}
	return out
}

func TestTraceparentsSampleByRatio(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ratio    float64
		min, max int // sampled of 1000
	}{{0, 0, 0}, {1, 1000, 1000}, {0.5, 400, 600}} {
		next := tracing.Traceparents(tc.ratio)
		sampled, seen := 0, map[string]bool{}
		for range 1000 {
			tp := next()
			sc, ok := tracing.Parse(tp)
			if !ok {
				t.Fatalf("ratio %v: Parse(%q) failed", tc.ratio, tp)
			}
			if got := tracing.Format(sc); got != tp {
				t.Fatalf("Format(Parse(%q)) = %q", tp, got)
			}
			if seen[sc.TraceID().String()] {
				t.Fatalf("trace id %s twice", sc.TraceID())
			}
			seen[sc.TraceID().String()] = true
			if sc.IsSampled() {
				sampled++
			}
		}
		if sampled < tc.min || sampled > tc.max {
			t.Errorf("ratio %v: %d of 1000 sampled, want %d..%d", tc.ratio, sampled, tc.min, tc.max)
		}
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, tp := range []string{
		"",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-02",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
		"00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
	} {
		if sc, ok := tracing.Parse(tp); ok {
			t.Errorf("Parse(%q) = %v, want refused", tp, sc)
		}
	}
}

func TestAttemptSpanIDIsAHashOfTheAttempt(t *testing.T) {
	t.Parallel()
	sc, _ := tracing.Parse(tracing.Traceparents(1)())
	tid := sc.TraceID()
	a := tracing.AttemptSpanID(tid, 7, 1)
	if !a.IsValid() || a != tracing.AttemptSpanID(tid, 7, 1) {
		t.Fatalf("AttemptSpanID(7, 1) = %s, then %s", a, tracing.AttemptSpanID(tid, 7, 1))
	}
	for _, other := range []trace.SpanID{tracing.AttemptSpanID(tid, 7, 2), tracing.AttemptSpanID(tid, 8, 1)} {
		if other == a {
			t.Errorf("two attempts share span id %s", a)
		}
	}
}

// TestSpansKeepTheirPresetIDs emits a trace as its processes do: the instance's span, an
// attempt with a model call under it, and an attempt failed over, and checks the ids the
// collector sees are those every process derives from the stored traceparent.
func TestSpansKeepTheirPresetIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tp := tracing.Traceparents(1)()
	root, _ := tracing.Parse(tp)
	tid := root.TraceID().String()
	t0 := time.Now().Add(-time.Minute)

	info := tracing.AttemptInfo{WorkflowInstance: 3, Task: 11, Name: "ask", Type: "llm", Attempt: 2, Worker: "w1"}
	ctx, att := b.tracer.StartAttempt(context.Background(), tp, info, t0.Add(time.Second))
	attemptID := tracing.AttemptSpanID(root.TraceID(), 11, 2).String()
	if got, want := tracing.Traceparent(ctx), "00-"+tid+"-"+attemptID+"-01"; got != want {
		t.Errorf("the attempt's traceparent = %s, want %s", got, want)
	}
	chat := tracing.StartChat(ctx, "openai", "test", "m1")
	if chat == nil {
		t.Fatal("no chat span under a recorded attempt")
	}
	chat.End(12, 3, nil, "")
	tracing.StartTool(ctx, "deploy", "zk-11-2-1", 2).End(true, "the tool failed: exit status 3")
	exit := 0
	att.End("succeeded", &exit, "", t0.Add(2*time.Second))
	b.tracer.EmitAttempt(context.Background(), tracing.FinishedAttempt{
		AttemptInfo: tracing.AttemptInfo{WorkflowInstance: 3, Task: 12, Name: "sleep", Type: "shell", Attempt: 1, Worker: "w0"},
		Traceparent: tp, Outcome: "failed_over", Error: "worker lost; failed over", StartedAt: t0, EndedAt: t0.Add(3 * time.Second)})
	b.tracer.EmitInstance(context.Background(), tracing.Instance{ID: 3, Workflow: "wf", Version: 1, Traceparent: tp,
		State: "failed", Error: "tasks did not succeed", CreatedAt: t0, EndedAt: t0.Add(4 * time.Second)})
	b.flush(t)

	spans := byName(b.recv.Wait(t, 10*time.Second, "5 spans", func(s []otlptest.Span) bool { return len(s) >= 5 }))
	for name, s := range spans {
		if s.TraceID != tid {
			t.Errorf("%s: trace %s, want %s", name, s.TraceID, tid)
		}
		if s.Service != "zksched-worker" {
			t.Errorf("%s: service %q", name, s.Service)
		}
	}
	wf := spans["workflow wf"]
	if wf.SpanID != root.SpanID().String() || wf.ParentSpanID != "" {
		t.Errorf("instance span %s under %q, want %s under none", wf.SpanID, wf.ParentSpanID, root.SpanID())
	}
	if wf.Status != "error" || wf.Attrs["zksched.workflow_instance.state"] != "failed" || !wf.Start.Equal(t0) {
		t.Errorf("instance span = %+v", wf)
	}
	ask := spans["task ask"]
	if ask.SpanID != attemptID || ask.ParentSpanID != wf.SpanID {
		t.Errorf("attempt span %s under %s, want %s under %s", ask.SpanID, ask.ParentSpanID, attemptID, wf.SpanID)
	}
	if ask.Attrs["zksched.worker"] != "w1" || ask.Attrs["zksched.attempt"] != int64(2) ||
		ask.Attrs["zksched.attempt.outcome"] != "succeeded" || ask.Attrs["zksched.attempt.failover"] != false || ask.Status != "ok" {
		t.Errorf("attempt span = %+v", ask)
	}
	c := spans["chat m1"]
	if c.ParentSpanID != attemptID || c.SpanID == attemptID {
		t.Errorf("chat span %s under %s, want its own id under %s", c.SpanID, c.ParentSpanID, attemptID)
	}
	for k, want := range map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
		"gen_ai.system": "openai", "gen_ai.request.model": "m1", "gen_ai.usage.input_tokens": int64(12),
		"gen_ai.usage.output_tokens": int64(3)} {
		if c.Attrs[k] != want {
			t.Errorf("chat span %s = %v, want %v", k, c.Attrs[k], want)
		}
	}
	tool := spans["execute_tool deploy"]
	if tool.ParentSpanID != attemptID || tool.Status != "error" {
		t.Errorf("tool span under %s, status %s; want under %s, error", tool.ParentSpanID, tool.Status, attemptID)
	}
	for k, want := range map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "deploy",
		"gen_ai.tool.call.id": "zk-11-2-1", "zksched.agent.turn": int64(2), "error.type": "tool_error"} {
		if tool.Attrs[k] != want {
			t.Errorf("tool span %s = %v, want %v", k, tool.Attrs[k], want)
		}
	}
	lost := spans["task sleep"]
	if lost.SpanID != tracing.AttemptSpanID(root.TraceID(), 12, 1).String() || lost.ParentSpanID != wf.SpanID {
		t.Errorf("failed-over span %s under %s", lost.SpanID, lost.ParentSpanID)
	}
	if lost.Attrs["zksched.attempt.outcome"] != "failed_over" || lost.Attrs["zksched.attempt.failover"] != true ||
		lost.Attrs["zksched.worker"] != "w0" || lost.Status != "error" {
		t.Errorf("failed-over span = %+v", lost)
	}
}

// TestUnsampledTraceEmitsNothing: an instance not sampled where it was submitted gets no span
// anywhere, though its attempts still pass the decision on. The sampled span emitted after
// them, and received alone, shows nothing of theirs was queued.
func TestUnsampledTraceEmitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tp := tracing.Traceparents(0)()
	if !strings.HasSuffix(tp, "-00") {
		t.Fatalf("ratio 0 gave %s", tp)
	}
	ctx, att := b.tracer.StartAttempt(context.Background(), tp, tracing.AttemptInfo{Task: 1, Attempt: 1, Name: "x"}, time.Now())
	if att != nil {
		t.Error("an attempt span for an unsampled trace")
	}
	if got := tracing.Traceparent(ctx); !strings.HasSuffix(got, "-00") || got[36:52] == tp[36:52] {
		t.Errorf("the attempt's traceparent = %q, want its own span id, not sampled", got)
	}
	if tracing.StartChat(ctx, "openai", "p", "m") != nil || tracing.StartTool(ctx, "t", "id", 1) != nil {
		t.Error("a chat or tool span under an unsampled attempt")
	}
	att.End("succeeded", nil, "", time.Now())
	b.tracer.EmitInstance(context.Background(), tracing.Instance{ID: 1, Workflow: "unsampled", Traceparent: tp, State: "succeeded",
		CreatedAt: time.Now(), EndedAt: time.Now()})
	b.tracer.EmitAttempt(context.Background(), tracing.FinishedAttempt{Traceparent: tp, Outcome: "failed_over",
		StartedAt: time.Now(), EndedAt: time.Now()})

	marker := tracing.Traceparents(1)()
	b.tracer.EmitInstance(context.Background(), tracing.Instance{ID: 2, Workflow: "marker", Traceparent: marker, State: "succeeded",
		CreatedAt: time.Now(), EndedAt: time.Now()})
	b.flush(t)
	spans := b.recv.Wait(t, 10*time.Second, "the marker span", func(s []otlptest.Span) bool { return len(s) > 0 })
	if len(spans) != 1 || spans[0].Name != "workflow marker" {
		t.Errorf("received %+v, want the marker alone", spans)
	}
}

func TestTracingOffDoesNothing(t *testing.T) {
	t.Parallel()
	tr, err := tracing.New(context.Background(), defaultConfig, tracing.Options{})
	if err != nil || tr != nil {
		t.Fatalf("New with tracing off = %v, %v; want nil, nil", tr, err)
	}
	ctx := context.Background()
	got, att := tr.StartAttempt(ctx, tracing.Traceparents(1)(), tracing.AttemptInfo{}, time.Now())
	if got != ctx || att != nil || tracing.Traceparent(got) != "" {
		t.Errorf("StartAttempt on a nil Tracer = %v, %v", got, att)
	}
	tr.EmitInstance(ctx, tracing.Instance{})
	tr.EmitAttempt(ctx, tracing.FinishedAttempt{})
	if err := tr.Shutdown(ctx); err != nil {
		t.Error(err)
	}
}

// TestCollectorDownNeverBlocks: with a collector that accepts connections and never answers,
// ending spans returns at once (the queue drops what it cannot hold) and a shutdown gives up
// at its deadline.
func TestCollectorDownNeverBlocks(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, unanswered, until the test ends
		}
	}()
	cfg := defaultConfig
	cfg.Enabled, cfg.Endpoint, cfg.QueueSize = true, "http://"+ln.Addr().String(), 16
	tr, err := tracing.New(context.Background(), cfg, tracing.Options{Role: "master", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	tp := tracing.Traceparents(1)()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20000 {
			_, att := tr.StartAttempt(context.Background(), tp, tracing.AttemptInfo{Task: int64(i), Attempt: 1}, time.Now())
			att.End("succeeded", nil, "", time.Now())
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("ending spans blocked on a collector that does not answer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := tr.Shutdown(ctx); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown against a silent collector = %v, want the deadline", err)
	}
}

// defaultConfig is tracing's part of conf.Defaults.
var defaultConfig = tracing.Config{SampleRatio: 1, Headers: map[string]string{}, QueueSize: 2048}
