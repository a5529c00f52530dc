// Package llm is the one door of zksched to language models: every call of an llm or agent
// task goes through a Client, which wraps a langchaingo model with what a scheduler needs
// around a slow, rate-limited and paid-for call:
//
//   - errors classified (rate limit, server error, timeout, network, bad request, auth) from
//     the HTTP status the transport saw, not from the library's message strings;
//   - retries of the retryable ones with exponential backoff and full jitter, honouring
//     Retry-After, and never past the task's deadline or its cancellation;
//   - the provider's limits: requests and tokens per minute for the whole cluster (each request
//     admitted by the cluster's database against every worker's requests of the last minute,
//     and a 429's Retry-After holding every worker back; see Limits), and requests in flight
//     per worker;
//   - token usage (prompt, completion, total, and how many requests were sent) for every
//     call.
//
// Providers builds one Client per configured provider, lazily, so a worker whose API key
// variable is unset still starts and fails only the tasks that need that provider, with a
// message naming the variable. The offline provider type is a model of this package that
// calls nothing and answers from the prompt's words.
package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/tmc/langchaingo/llms"

	"github.com/zksched/zksched/internal/retry"
	"github.com/zksched/zksched/tracing"
)

// Request is one model call: a user prompt and an optional system prompt.
type Request struct {
	System string
	Prompt string
	// Temperature is nil for the provider library's default.
	Temperature *float64
	// MaxTokens caps the completion; 0 for the model's default.
	MaxTokens int
	// History is the conversation after Prompt, oldest first: the model's earlier answers
	// and the results of the tools they called.
	History []Message
	// Tools are the tools the model may call; none makes a plain completion.
	Tools []ToolSpec
}

// Response is a model's answer and what it cost.
type Response struct {
	Text string
	// ToolCalls are the calls the model asked for, in its order; none when it answered.
	ToolCalls []ToolCall
	Usage     Usage
}

// Usage is the token usage of one call, or the sum of several. It is stored as JSON with
// the OpenAI field names.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// Calls is how many requests were sent, retries included.
	Calls int `json:"calls"`
	// Cost is what the tokens cost at the provider's input-price and output-price; 0 when
	// they are not configured.
	Cost float64 `json:"cost,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{PromptTokens: u.PromptTokens + v.PromptTokens, CompletionTokens: u.CompletionTokens + v.CompletionTokens,
		TotalTokens: u.TotalTokens + v.TotalTokens, Calls: u.Calls + v.Calls, Cost: u.Cost + v.Cost}
}

// Client calls one provider's model with classification, retries, limits and usage.
type Client struct {
	name string
	// kind is the provider's type ([Provider.Type]), its gen_ai.provider.name.
	kind        string
	model       llms.Model
	modelName   string
	timeout     time.Duration
	maxAttempts int
	backoff     retry.Policy
	callOpts    []llms.CallOption
	limiter     *limiter // nil: no limits, and no cluster database to share a 429 through
	inFlight    chan struct{}
	log         zerolog.Logger
	clock       clockwork.Clock
	// inputPrice and outputPrice are the prices of a million prompt and completion tokens.
	inputPrice, outputPrice float64
}

// Cost is what usage cost at the provider's prices, and whether the prices are known.
func (c *Client) Cost(u Usage) (cost float64, known bool) {
	if c.inputPrice == 0 && c.outputPrice == 0 {
		return 0, false
	}
	return (float64(u.PromptTokens)*c.inputPrice + float64(u.CompletionTokens)*c.outputPrice) / 1e6, true
}

// Name returns the provider's name.
func (c *Client) Name() string { return c.name }

// Model returns the model name requests are sent with ("offline" for the offline provider).
func (c *Client) Model() string { return c.modelName }

// Generate sends req, retrying retryable failures until it succeeds, the attempts are spent,
// or ctx ends. The usage counts every request sent. The error is an *Error, or ctx's cause
// when ctx ended.
func (c *Client) Generate(ctx context.Context, req Request) (Response, error) {
	msgs := make([]llms.MessageContent, 0, 2)
	if req.System != "" {
		msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeSystem, req.System))
	}
	msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeHuman, req.Prompt))
	for _, m := range req.History {
		msgs = append(msgs, m.messageContents(c.kind)...)
	}
	opts := append([]llms.CallOption{}, c.callOpts...)
	if len(req.Tools) > 0 {
		opts = append(opts, llms.WithTools(tools(req.Tools)))
	}
	if req.Temperature != nil {
		opts = append(opts, llms.WithTemperature(*req.Temperature))
	}
	if req.MaxTokens > 0 {
		opts = append(opts, llms.WithMaxTokens(req.MaxTokens))
	}

	reserve := estimateTokens(req)
	var usage Usage
	for attempt := 1; ; attempt++ {
		resp, info, err := c.once(ctx, msgs, opts, reserve)
		if info.sent {
			usage.Calls++
		}
		if err == nil {
			text, u := readResponse(resp)
			u.Calls = usage.Calls
			u.Cost, _ = c.Cost(u)
			return Response{Text: text, ToolCalls: toolCalls(resp), Usage: u}, nil
		}
		if ctx.Err() != nil {
			return Response{Usage: usage}, context.Cause(ctx)
		}
		if e := (*Error)(nil); !info.sent && errors.As(err, &e) {
			// Refused before it was sent: the limits, not the provider, said no.
			e.Attempts = attempt
			return Response{Usage: usage}, e
		}
		e := classify(c.name, err, info)
		e.Attempts = attempt
		if !e.Class.Retryable() || attempt >= c.maxAttempts {
			return Response{Usage: usage}, e
		}
		wait := c.wait(attempt, info.retryAfter)
		// A context's deadline is on the real clock, whatever c.clock is.
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// Waiting would outlast the task: fail now with what the provider said.
			e.Msg += fmt.Sprintf(" (not retried: the task's deadline is nearer than the %v backoff)", wait.Round(time.Millisecond))
			return Response{Usage: usage}, e
		}
		c.log.Warn().Str("provider", c.name).Str("class", string(e.Class)).Int("status", e.Status).Int("attempt", attempt).
			Dur("retry_in", wait).Msg("model call failed; retrying")
		if retry.Sleep(ctx, c.clock, wait, nil) != nil {
			return Response{Usage: usage}, context.Cause(ctx)
		}
	}
}

// once sends one request within the provider's limits and its request timeout; reserve is
// the tokens it holds of tokens-per-minute until its usage is known.
func (c *Client) once(ctx context.Context, msgs []llms.MessageContent, opts []llms.CallOption, reserve int) (*llms.ContentResponse, *callInfo, error) {
	info := &callInfo{}
	if c.inFlight != nil {
		select {
		case c.inFlight <- struct{}{}:
			defer func() { <-c.inFlight }()
		case <-ctx.Done():
			return nil, info, ctx.Err()
		}
	}
	var start int64
	if c.limiter != nil {
		var err error
		if start, err = c.limiter.admit(ctx, reserve); err != nil {
			return nil, info, err
		}
	}
	rctx, cancel := context.WithTimeoutCause(withCallInfo(ctx, info), c.timeout, errRequestTimeout)
	defer cancel()
	info.sent = true
	chat := tracing.StartChat(ctx, c.kind, c.name, c.modelName)
	resp, err := c.model.GenerateContent(rctx, msgs, opts...)
	if err == nil && (resp == nil || len(resp.Choices) == 0) {
		err = errors.New("the model returned no choices")
	}
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(rctx), errRequestTimeout) {
		info.timedOut = true
	}
	c.endChat(chat, resp, info, err)
	if c.limiter != nil {
		if err == nil {
			// A failed request keeps its reservation: the provider may have counted it.
			_, u := readResponse(resp)
			c.limiter.settle(start, u.TotalTokens)
		}
		if info.status == http.StatusTooManyRequests && info.retryAfter > 0 {
			c.limiter.block(min(info.retryAfter, maxRetryAfter))
		}
	}
	return resp, info, err
}

var errRequestTimeout = errors.New("request timeout")

// maxRetryAfter caps the wait a provider's Retry-After may impose on one try, so that an
// absurd value cannot park a task for hours; the task's timeout bounds the whole call.
const maxRetryAfter = time.Minute

// wait is the pause before try attempt+1: the provider's Retry-After when it gave one,
// otherwise exponential backoff with full jitter, so that workers that were rate-limited
// together do not retry together.
func (c *Client) wait(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, maxRetryAfter)
	}
	return c.backoff.Delay(attempt)
}

// endChat ends the span of one request (nil when it is not traced) with its usage or error.
func (c *Client) endChat(chat *tracing.Chat, resp *llms.ContentResponse, info *callInfo, err error) {
	if chat == nil {
		return
	}
	if err != nil {
		chat.End(0, 0, err, string(classify(c.name, err, info).Class))
		return
	}
	_, u := readResponse(resp)
	chat.End(u.PromptTokens, u.CompletionTokens, nil, "")
}

// readResponse returns the response's text and its usage, which the providers report
// under different keys. The text is the choices' together: langchaingo's anthropic model
// returns a choice for each block of the answer (each with the whole usage), the others
// one choice.
func readResponse(resp *llms.ContentResponse) (string, Usage) {
	text := resp.Choices[0].Content
	for _, ch := range resp.Choices[1:] {
		text += ch.Content
	}
	info := resp.Choices[0].GenerationInfo
	var u Usage
	u.PromptTokens = firstInt(info, "PromptTokens", "InputTokens")
	u.CompletionTokens = firstInt(info, "CompletionTokens", "OutputTokens")
	u.TotalTokens = firstInt(info, "TotalTokens")
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return text, u
}

func firstInt(m map[string]any, keys ...string) int {
	for _, k := range keys {
		switch v := m[k].(type) {
		case int:
			return v
		case int32:
			return int(v)
		case int64:
			return int(v)
		case float64:
			return int(v)
		}
	}
	return 0
}

// callInfo is what the transport saw of one request: it travels in the request's context
// so that errors can be classified by HTTP status and Retry-After honoured, whatever message
// the library made of them.
type callInfo struct {
	sent       bool
	status     int
	retryAfter time.Duration
	timedOut   bool
}

type callInfoKey struct{}

func withCallInfo(ctx context.Context, info *callInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

// recordingTransport notes each response's status and Retry-After in the request's
// callInfo; clock reads the time a Retry-After date is counted from.
type recordingTransport struct {
	base  http.RoundTripper
	clock clockwork.Clock
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if info, ok := req.Context().Value(callInfoKey{}).(*callInfo); ok && resp != nil {
		info.status = resp.StatusCode
		info.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), t.clock.Now())
	}
	return resp, err
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var secs int
	if _, err := fmt.Sscanf(v, "%d", &secs); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
