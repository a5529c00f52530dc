// Package otlptest is an OpenTelemetry collector for tests: an HTTP server that takes OTLP/HTTP
// trace exports (protobuf ExportTraceServiceRequest, as the SDK's otlptracehttp sends them)
// at /v1/traces, decodes them and keeps their spans for the test to look at.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one span received, its ids in hex.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Service is its resource's service.name.
	Service string
	Attrs   map[string]any
	// Status is "ok", "error" or "unset"; StatusMessage its description.
	Status        string
	StatusMessage string
	Start, End    time.Time
}

// Receiver is a test collector.
type Receiver struct {
	*httptest.Server

	mu     sync.Mutex
	spans  []Span
	got    chan struct{} // a token after each export received
	errors int
}

// New starts a Receiver, closed when the test ends.
func New(t testing.TB) *Receiver {
	r := &Receiver{got: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(r.handle))
	t.Cleanup(r.Close)
	return r
}

// Endpoint is the receiver's base URL, for tracing.endpoint or OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) Endpoint() string { return r.URL }

// Spans returns every span received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// BadRequests counts the exports that could not be decoded.
func (r *Receiver) BadRequests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errors
}

// Wait waits until cond holds of the spans received, checking at each export, for up to d;
// it fails the test, naming what it waited for, if it never does.
func (r *Receiver) Wait(t testing.TB, d time.Duration, what string, cond func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		if spans := r.Spans(); cond(spans) {
			return spans
		}
		select {
		case <-r.got:
		case <-deadline.C:
			t.Fatalf("otlptest: %s: not after %v; %d spans received", what, d, len(r.Spans()))
		}
	}
}

func (r *Receiver) handle(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			r.bad(w)
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	var msg collectortrace.ExportTraceServiceRequest
	if err != nil || proto.Unmarshal(raw, &msg) != nil {
		r.bad(w)
		return
	}
	var got []Span
	for _, rs := range msg.ResourceSpans {
		service, _ := attrs(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, span(s, service))
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) bad(w http.ResponseWriter) {
	r.mu.Lock()
	r.errors++
	r.mu.Unlock()
	http.Error(w, "bad export", http.StatusBadRequest)
}

func span(s *tracepb.Span, service string) Span {
	status := "unset"
	switch s.GetStatus().GetCode() {
	case tracepb.Status_STATUS_CODE_OK:
		status = "ok"
	case tracepb.Status_STATUS_CODE_ERROR:
		status = "error"
	}
	return Span{TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
		ParentSpanID: hex.EncodeToString(s.ParentSpanId), Name: s.Name, Service: service, Attrs: attrs(s.Attributes),
		Status: status, StatusMessage: s.GetStatus().GetMessage(),
		Start: time.Unix(0, int64(s.StartTimeUnixNano)), End: time.Unix(0, int64(s.EndTimeUnixNano))}
}

// attrs are OTLP attributes as Go values: string, int64, float64, bool.
func attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			out[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_BoolValue:
			out[kv.Key] = v.BoolValue
		}
	}
	return out
}
