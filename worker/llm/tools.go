package llm

import (
	"encoding/json"

	"github.com/tmc/langchaingo/llms"
)

// ToolSpec is a tool offered to the model: its name, what it is for, and the JSON Schema of
// its arguments.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments, an object schema; nil for none.
	Parameters map[string]any
}

// ToolCall is a call of a tool the model asked for.
type ToolCall struct {
	// ID is the provider's id of the call, which the tool's result must name.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments, as the model wrote it (not checked).
	Arguments string `json:"arguments"`
}

// Message is one message of a conversation after its prompt: the model's answer (its text
// and the tool calls it asked for), or a tool's result.
type Message struct {
	// Assistant is true for the model's answer; User for a further message of the user's;
	// neither for a tool's result.
	Assistant bool
	User      bool
	Text      string
	ToolCalls []ToolCall
	// ToolCallID and ToolName name the call a tool's result answers.
	ToolCallID string
	ToolName   string
}

// messageContents is m in langchaingo's form for a provider of type kind.
//
// langchaingo's anthropic conversion reads only the first part of an assistant message, so
// for anthropic an answer that has text and tool calls, or several calls, is sent as one
// message a part; the provider's transport joins them into one turn again
// ([anthropicTurns]).
func (m Message) messageContents(kind string) []llms.MessageContent {
	mc := m.messageContent()
	if kind != ProviderAnthropic || mc.Role != llms.ChatMessageTypeAI {
		return []llms.MessageContent{mc}
	}
	if len(mc.Parts) == 0 {
		// langchaingo would index the absent first part.
		return []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeAI, m.Text)}
	}
	out := make([]llms.MessageContent, len(mc.Parts))
	for i, p := range mc.Parts {
		out[i] = llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{p}}
	}
	return out
}

// messageContent is m in langchaingo's form.
func (m Message) messageContent() llms.MessageContent {
	if m.User {
		return llms.TextParts(llms.ChatMessageTypeHuman, m.Text)
	}
	if !m.Assistant {
		return llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{
			llms.ToolCallResponse{ToolCallID: m.ToolCallID, Name: m.ToolName, Content: m.Text}}}
	}
	var parts []llms.ContentPart
	if m.Text != "" {
		parts = append(parts, llms.TextContent{Text: m.Text})
	}
	for _, c := range m.ToolCalls {
		parts = append(parts, llms.ToolCall{ID: c.ID, Type: "function",
			FunctionCall: &llms.FunctionCall{Name: c.Name, Arguments: c.Arguments}})
	}
	return llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: parts}
}

// tools is specs in langchaingo's form.
func tools(specs []ToolSpec) []llms.Tool {
	out := make([]llms.Tool, len(specs))
	for i, s := range specs {
		params := s.Parameters
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		out[i] = llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: params}}
	}
	return out
}

// toolCalls reads the tool calls of a response. langchaingo's anthropic model returns a
// choice for each block of the answer, its text and each tool_use apart; the others one
// choice with all the calls.
func toolCalls(resp *llms.ContentResponse) []ToolCall {
	var out []ToolCall
	for _, ch := range resp.Choices {
		for _, c := range ch.ToolCalls {
			if c.FunctionCall == nil {
				continue
			}
			out = append(out, ToolCall{ID: c.ID, Name: c.FunctionCall.Name, Arguments: c.FunctionCall.Arguments})
		}
	}
	return out
}

// historyChars is the size of a conversation's messages, for the token estimate.
func historyChars(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Text)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	return n
}

// toolsChars is the size of the tools' definitions, for the token estimate.
func toolsChars(specs []ToolSpec) int {
	n := 0
	for _, s := range specs {
		raw, _ := json.Marshal(s.Parameters)
		n += len(s.Name) + len(s.Description) + len(raw)
	}
	return n
}
