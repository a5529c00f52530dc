package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The GenAI semantic conventions' attributes of a tool's execution.
const (
	AttrGenAIToolName   = attribute.Key("gen_ai.tool.name")
	AttrGenAIToolCallID = attribute.Key("gen_ai.tool.call.id")
	AttrGenAIToolType   = attribute.Key("gen_ai.tool.type")
	// AttrAgentTurn is the turn of a tool-calling agent that asked for the call.
	AttrAgentTurn = attribute.Key("zksched.agent.turn")
)

// Tool is the span of one tool call's execution.
type Tool struct {
	span trace.Span
}

// StartTool starts the span "execute_tool <name>" of call id, asked for in turn, as a child
// of the span ctx carries (an attempt's); nil, doing nothing, when that span is not recorded.
func StartTool(ctx context.Context, name, id string, turn int) *Tool {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	_, span := parent.TracerProvider().Tracer(scope).Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrGenAIOperation.String("execute_tool"), AttrGenAIToolName.String(name),
			AttrGenAIToolCallID.String(id), AttrGenAIToolType.String("function"), AttrAgentTurn.Int(turn)))
	return &Tool{span: span}
}

// End ends the call's span, failed when the tool failed (errMsg its message).
func (t *Tool) End(failed bool, errMsg string) {
	if t == nil {
		return
	}
	if failed {
		t.span.SetAttributes(AttrErrorType.String("tool_error"))
		t.span.SetStatus(codes.Error, errMsg)
	}
	t.span.End()
}
