package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Traceparents returns what decides the trace of each new workflow instance (dao.TraceStart):
// a new W3C traceparent, with a random trace id, a random span id for the instance's own
// span, and the sampled flag set for a share ratio of the traces. The decision is the SDK's
// TraceIDRatioBased over the trace id, so a collector that samples by ratio too agrees.
func Traceparents(ratio float64) func() string {
	sampler := sdktrace.TraceIDRatioBased(ratio)
	return func() string {
		var tid trace.TraceID
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
		flags := trace.TraceFlags(0)
		if sampler.ShouldSample(sdktrace.SamplingParameters{TraceID: tid}).Decision == sdktrace.RecordAndSample {
			flags = trace.FlagsSampled
		}
		return Format(trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: randomSpanID(), TraceFlags: flags}))
	}
}

// Format is sc as a W3C traceparent: 00-<trace id>-<span id>-<flags>.
func Format(sc trace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// Parse reads a W3C traceparent of version 00; ok is false for anything else, "" included.
func Parse(tp string) (sc trace.SpanContext, ok bool) {
	if len(tp) != 55 || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(tp[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(tp[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags trace.TraceFlags
	switch tp[53:] {
	case "00":
	case "01":
		flags = trace.FlagsSampled
	default:
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}), true
}

// Traceparent is the W3C traceparent of the span ctx carries, "" when it carries none: what a
// shell task gets as TRACEPARENT.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return Format(sc)
}

// AttemptSpanID is the span id of attempt attempt of task instance task in trace tid: a hash
// of the three, so every process names an attempt's span alike without storing it (its
// worker when it ends it, a master when the leader failed it over).
func AttemptSpanID(tid trace.TraceID, task int64, attempt int) trace.SpanID {
	var b [32]byte
	copy(b[:16], tid[:])
	binary.BigEndian.PutUint64(b[16:24], uint64(task))
	binary.BigEndian.PutUint64(b[24:], uint64(attempt))
	sum := sha256.Sum256(b[:])
	var sid trace.SpanID
	copy(sid[:], sum[:8])
	if !sid.IsValid() {
		sid[7] = 1 // all zeros is no span id
	}
	return sid
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// presetIDs is the provider's IDGenerator: the ids a span's context was given beforehand
// (withPresetIDs), otherwise random ones.
type presetIDs struct{}

type presetKey struct{}

type preset struct {
	tid trace.TraceID
	sid trace.SpanID
}

// withPresetIDs makes the next span started in ctx take trace id tid and span id sid.
func withPresetIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, presetKey{}, preset{tid, sid})
}

// NewIDs implements sdktrace.IDGenerator for a span without a parent.
func (presetIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if p, ok := ctx.Value(presetKey{}).(preset); ok {
		return p.tid, p.sid
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, randomSpanID()
}

// NewSpanID implements sdktrace.IDGenerator for a span under a parent of trace tid.
func (presetIDs) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if p, ok := ctx.Value(presetKey{}).(preset); ok && p.tid == tid {
		return p.sid
	}
	return randomSpanID()
}
