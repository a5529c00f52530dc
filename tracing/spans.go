package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The attributes of zksched's spans (the GenAI ones are the semantic conventions', in chat.go).
const (
	AttrWorkflow         = attribute.Key("zksched.workflow.name")
	AttrWorkflowVersion  = attribute.Key("zksched.workflow.version")
	AttrWorkflowInstance = attribute.Key("zksched.workflow_instance.id")
	AttrWorkflowState    = attribute.Key("zksched.workflow_instance.state")
	AttrTaskInstance     = attribute.Key("zksched.task_instance.id")
	AttrTask             = attribute.Key("zksched.task.name")
	AttrTaskType         = attribute.Key("zksched.task.type")
	AttrAttempt          = attribute.Key("zksched.attempt")
	AttrWorker           = attribute.Key("zksched.worker")
	AttrOutcome          = attribute.Key("zksched.attempt.outcome")
	// AttrFailover is true on the span of an attempt ended by the failover of its worker.
	AttrFailover = attribute.Key("zksched.attempt.failover")
	AttrExitCode = attribute.Key("zksched.attempt.exit_code")
)

// OutcomeFailedOver is the outcome of an attempt whose worker was lost (dao.OutcomeFailedOver).
const OutcomeFailedOver = "failed_over"

// AttemptInfo is what an attempt's span says of it.
type AttemptInfo struct {
	WorkflowInstance int64
	Task             int64
	Name             string
	Type             string
	Attempt          int
	Worker           string
}

func (a AttemptInfo) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{AttrWorkflowInstance.Int64(a.WorkflowInstance), AttrTaskInstance.Int64(a.Task),
		AttrTask.String(a.Name), AttrTaskType.String(a.Type), AttrAttempt.Int(a.Attempt), AttrWorker.String(a.Worker)}
}

// Attempt is the span of an attempt running on this worker.
type Attempt struct {
	span trace.Span
}

// StartAttempt starts the span of attempt a of an instance whose trace is traceparent, at
// time at, and returns ctx carrying it: the model calls under it become its children, and
// Traceparent(ctx) names it for a shell task. For an unsampled trace ctx carries the
// attempt's span context alone, so a shell task still passes on the decision not to sample,
// and the Attempt is nil. Without tracing or a traceparent, ctx is returned as it is.
func (t *Tracer) StartAttempt(ctx context.Context, traceparent string, a AttemptInfo, at time.Time) (context.Context, *Attempt) {
	if t == nil {
		return ctx, nil
	}
	parent, ok := Parse(traceparent)
	if !ok {
		return ctx, nil
	}
	sc := attemptContext(parent, a)
	if !parent.IsSampled() {
		return trace.ContextWithSpanContext(ctx, sc), nil
	}
	span := t.start(ctx, "task "+a.Name, sc, parent, at, a.attrs()...)
	return trace.ContextWithSpan(ctx, span), &Attempt{span: span}
}

// attemptContext is the span context of attempt a of the instance whose span is parent.
func attemptContext(parent trace.SpanContext, a AttemptInfo) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: parent.TraceID(),
		SpanID: AttemptSpanID(parent.TraceID(), a.Task, a.Attempt), TraceFlags: parent.TraceFlags()})
}

// End ends the attempt's span at time at with its outcome (a dao.Outcome), its process's exit
// code if any and its error. Call it only once the attempt's end is recorded: an attempt
// whose result was refused was closed by someone else, who emits its span.
func (a *Attempt) End(outcome string, exitCode *int, errMsg string, at time.Time) {
	if a == nil {
		return
	}
	a.span.SetAttributes(outcomeAttrs(outcome, exitCode)...)
	code, desc := outcomeStatus(outcome, errMsg)
	a.span.SetStatus(code, desc)
	a.span.End(trace.WithTimestamp(at))
}

func outcomeAttrs(outcome string, exitCode *int) []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrOutcome.String(outcome), AttrFailover.Bool(outcome == OutcomeFailedOver)}
	if exitCode != nil {
		attrs = append(attrs, AttrExitCode.Int(*exitCode))
	}
	return attrs
}

// outcomeStatus is the span status of an attempt's outcome: an error for every end that is
// not a success nor a pause or hand-back that the task goes on from.
func outcomeStatus(outcome, errMsg string) (codes.Code, string) {
	switch outcome {
	case "succeeded":
		return codes.Ok, ""
	case "paused", "handed_back", "interrupted":
		return codes.Unset, ""
	}
	if errMsg == "" {
		errMsg = outcome
	}
	return codes.Error, errMsg
}

// FinishedAttempt is an attempt ended elsewhere than on its worker (a failover), for EmitAttempt.
type FinishedAttempt struct {
	AttemptInfo
	// Traceparent is its instance's.
	Traceparent string
	Outcome     string
	Error       string
	StartedAt   time.Time
	EndedAt     time.Time
}

// EmitAttempt emits the span of an attempt its worker could not end, with the id its worker
// would have given it: the failover's, which the worker's lost process never emits.
func (t *Tracer) EmitAttempt(ctx context.Context, a FinishedAttempt) {
	if t == nil {
		return
	}
	parent, ok := Parse(a.Traceparent)
	if !ok || !parent.IsSampled() {
		return
	}
	span := t.start(ctx, "task "+a.Name, attemptContext(parent, a.AttemptInfo), parent, a.StartedAt, a.attrs()...)
	(&Attempt{span: span}).End(a.Outcome, nil, a.Error, a.EndedAt)
}

// Instance is an ended workflow instance, for EmitInstance.
type Instance struct {
	ID          int64
	Workflow    string
	Version     int
	Traceparent string
	State       string
	Error       string
	CreatedAt   time.Time
	EndedAt     time.Time
}

// EmitInstance emits the span of an ended workflow instance, the root of its trace: from its
// submission to its end, its state as its status.
func (t *Tracer) EmitInstance(ctx context.Context, i Instance) {
	if t == nil {
		return
	}
	sc, ok := Parse(i.Traceparent)
	if !ok || !sc.IsSampled() {
		return
	}
	span := t.start(ctx, "workflow "+i.Workflow, sc, trace.SpanContext{}, i.CreatedAt,
		AttrWorkflow.String(i.Workflow), AttrWorkflowVersion.Int(i.Version), AttrWorkflowInstance.Int64(i.ID),
		AttrWorkflowState.String(i.State))
	switch i.State {
	case "succeeded":
		span.SetStatus(codes.Ok, "")
	default:
		msg := i.Error
		if msg == "" {
			msg = i.State
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End(trace.WithTimestamp(i.EndedAt))
}
