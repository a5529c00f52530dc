package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/ollama"
)

// ollamaModel is the model of an ollama provider. Plain chats go through langchaingo's
// ollama model; a chat with tools, or with tool calls and results in its conversation, is
// sent here to Ollama's /api/chat, because langchaingo v0.1.14's ollama model sends no
// tools and refuses tool call and tool result parts. Both read the same options and report
// usage under the same keys.
type ollamaModel struct {
	plain  *ollama.LLM
	url    string // the server's /api/chat
	model  string
	client *http.Client
}

func newOllamaModel(base, model string, client *http.Client) (*ollamaModel, error) {
	plain, err := ollama.New(ollama.WithServerURL(base), ollama.WithModel(model), ollama.WithHTTPClient(client))
	if err != nil {
		return nil, err
	}
	return &ollamaModel{plain: plain, url: strings.TrimSuffix(base, "/") + "/api/chat", model: model, client: client}, nil
}

// Call implements llms.Model.
func (o *ollamaModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, o, prompt, options...)
}

// GenerateContent implements llms.Model.
func (o *ollamaModel) GenerateContent(ctx context.Context, msgs []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var opts llms.CallOptions
	for _, opt := range options {
		opt(&opts)
	}
	if len(opts.Tools) == 0 && !hasToolParts(msgs) {
		return o.plain.GenerateContent(ctx, msgs, options...)
	}
	req, err := o.chatRequest(msgs, opts)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := o.client.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer hresp.Body.Close()
	raw, err := io.ReadAll(hresp.Body)
	if err != nil {
		return nil, err
	}
	var resp ollamaResponse
	if jerr := json.Unmarshal(raw, &resp); hresp.StatusCode >= 400 || resp.Error != "" {
		msg := resp.Error
		if jerr != nil || msg == "" {
			msg = strings.TrimSpace(string(raw))
		}
		return nil, fmt.Errorf("ollama: status %d: %s", hresp.StatusCode, msg)
	} else if jerr != nil {
		return nil, fmt.Errorf("ollama: read the answer: %w", jerr)
	}
	return o.contentResponse(msgs, resp), nil
}

// hasToolParts reports whether msgs hold a tool call or a tool's result.
func hasToolParts(msgs []llms.MessageContent) bool {
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.(type) {
			case llms.ToolCall, llms.ToolCallResponse:
				return true
			}
		}
	}
	return false
}

type ollamaRequest struct {
	Model    string          `json:"model"`
	Messages []ollamaMessage `json:"messages"`
	Tools    []llms.Tool     `json:"tools,omitempty"`
	Stream   bool            `json:"stream"`
	Format   string          `json:"format,omitempty"`
	Options  ollamaOptions   `json:"options"`
}

// ollamaOptions are the options langchaingo's ollama model sends, so that a chat with
// tools samples as one without.
type ollamaOptions struct {
	Temperature float64  `json:"temperature"`
	NumPredict  int      `json:"num_predict,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	TopK        int      `json:"top_k,omitempty"`
	TopP        float64  `json:"top_p,omitempty"`
	Seed        int      `json:"seed,omitempty"`
}

type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
	// ToolName names the tool whose result this is; ToolCallID its call, for the servers
	// that number calls.
	ToolName   string `json:"tool_name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type ollamaResponse struct {
	Message         ollamaMessage `json:"message"`
	DoneReason      string        `json:"done_reason"`
	PromptEvalCount int           `json:"prompt_eval_count"`
	EvalCount       int           `json:"eval_count"`
	Error           string        `json:"error"`
}

func (o *ollamaModel) chatRequest(msgs []llms.MessageContent, opts llms.CallOptions) (ollamaRequest, error) {
	model := o.model
	if opts.Model != "" {
		model = opts.Model
	}
	req := ollamaRequest{Model: model, Tools: opts.Tools, Options: ollamaOptions{Temperature: opts.Temperature,
		NumPredict: opts.MaxTokens, Stop: opts.StopWords, TopK: opts.TopK, TopP: opts.TopP, Seed: opts.Seed}}
	if opts.JSONMode {
		req.Format = "json"
	}
	for _, mc := range msgs {
		m := ollamaMessage{Role: ollamaRole(mc.Role)}
		for _, p := range mc.Parts {
			switch p := p.(type) {
			case llms.TextContent:
				m.Content += p.Text
			case llms.ToolCall:
				if p.FunctionCall == nil {
					continue
				}
				var c ollamaToolCall
				c.ID, c.Function.Name = p.ID, p.FunctionCall.Name
				// Ollama takes the arguments as an object, not as JSON text.
				c.Function.Arguments = json.RawMessage(p.FunctionCall.Arguments)
				if !json.Valid(c.Function.Arguments) {
					c.Function.Arguments = json.RawMessage("{}")
				}
				m.ToolCalls = append(m.ToolCalls, c)
			case llms.ToolCallResponse:
				m.Content += p.Content
				m.ToolName, m.ToolCallID = p.Name, p.ToolCallID
			default:
				return ollamaRequest{}, fmt.Errorf("ollama: a %T part cannot be sent with tools", p)
			}
		}
		req.Messages = append(req.Messages, m)
	}
	return req, nil
}

func ollamaRole(t llms.ChatMessageType) string {
	switch t {
	case llms.ChatMessageTypeSystem:
		return "system"
	case llms.ChatMessageTypeAI:
		return "assistant"
	case llms.ChatMessageTypeTool:
		return "tool"
	}
	return "user"
}

// contentResponse is resp in langchaingo's form. Ollama's tool calls may come without ids;
// such a call gets one counted over the conversation's calls, so that every call of a task
// has its own.
func (o *ollamaModel) contentResponse(msgs []llms.MessageContent, resp ollamaResponse) *llms.ContentResponse {
	earlier := 0
	for _, m := range msgs {
		for _, p := range m.Parts {
			if _, ok := p.(llms.ToolCall); ok {
				earlier++
			}
		}
	}
	ch := &llms.ContentChoice{Content: resp.Message.Content, StopReason: resp.DoneReason, GenerationInfo: map[string]any{
		"PromptTokens": resp.PromptEvalCount, "CompletionTokens": resp.EvalCount,
		"TotalTokens": resp.PromptEvalCount + resp.EvalCount}}
	for i, c := range resp.Message.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", earlier+i+1)
		}
		args := c.Function.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, args); err == nil {
			args = compact.Bytes()
		}
		ch.ToolCalls = append(ch.ToolCalls, llms.ToolCall{ID: id, Type: "function",
			FunctionCall: &llms.FunctionCall{Name: c.Function.Name, Arguments: string(args)}})
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{ch}}
}

var _ llms.Model = (*ollamaModel)(nil)
