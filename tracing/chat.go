package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The GenAI semantic conventions' attributes of a model call
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/).
const (
	AttrGenAIOperation    = attribute.Key("gen_ai.operation.name")
	AttrGenAIProvider     = attribute.Key("gen_ai.provider.name")
	AttrGenAISystem       = attribute.Key("gen_ai.system") // the provider's older name, which some backends still read
	AttrGenAIRequestModel = attribute.Key("gen_ai.request.model")
	AttrGenAIInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	AttrGenAIOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	AttrErrorType         = attribute.Key("error.type")
	// AttrLLMProvider is the name the worker's config gives the provider (llm.providers).
	AttrLLMProvider = attribute.Key("zksched.llm.provider")
)

// Chat is the span of one model request.
type Chat struct {
	span trace.Span
}

// StartChat starts the span "chat <model>" of one request to a model of provider (its type:
// openai, anthropic, ollama, offline; name is its name in the config), as a child of the span
// ctx carries: an attempt's. It returns nil, doing nothing, when that span is not recorded
// (tracing off, an unsampled trace, no attempt span).
func StartChat(ctx context.Context, provider, name, model string) *Chat {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	_, span := parent.TracerProvider().Tracer(scope).Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrGenAIOperation.String("chat"), AttrGenAIProvider.String(provider),
			AttrGenAISystem.String(provider), AttrGenAIRequestModel.String(model), AttrLLMProvider.String(name)))
	return &Chat{span: span}
}

// End ends the request's span with the tokens it used, or its error and the error's class
// (the worker's classification: rate_limit, server, timeout, …).
func (c *Chat) End(inputTokens, outputTokens int, err error, errType string) {
	if c == nil {
		return
	}
	if err != nil {
		c.span.SetAttributes(AttrErrorType.String(errType))
		c.span.SetStatus(codes.Error, err.Error())
	} else {
		c.span.SetAttributes(AttrGenAIInputTokens.Int(inputTokens), AttrGenAIOutputTokens.Int(outputTokens))
	}
	c.span.End()
}
