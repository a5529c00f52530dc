package llmtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// anthropicAPI is Anthropic's Messages API (POST …/messages), as strict as Anthropic about
// the conversation's shape: the turns alternate, user first; an assistant turn's tool_use
// blocks are answered, each, by a tool_result block of the user turn after it, and a
// tool_result answers a tool_use of the turn before.
var anthropicAPI = api{
	read:       readAnthropic,
	authorized: func(s *Server, r *http.Request) bool { return r.Header.Get("X-Api-Key") == s.Key },
	answer: func(w http.ResponseWriter, c conversation, answer string, call int, tool offered, promptTokens, completionTokens int) {
		content := []map[string]any{{"type": "text", "text": answer}}
		stop := "end_turn"
		if call > 0 {
			// Claude says what it is about to do before the call.
			var args map[string]any
			_ = json.Unmarshal([]byte(toolArguments(tool.params)), &args)
			content = []map[string]any{{"type": "text", "text": "I will call " + tool.name + "."},
				{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", call), "name": tool.name, "input": args}}
			stop = "tool_use"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_test", "type": "message", "role": "assistant", "model": c.model,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": promptTokens, "output_tokens": completionTokens},
		})
	},
	writeErr: func(w http.ResponseWriter, status int, retryAfter, msg string) {
		w.Header().Set("Content-Type", "application/json")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": "test_error", "message": msg}})
	},
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func readAnthropic(r *http.Request) (conversation, error) {
	if r.Header.Get("Anthropic-Version") == "" {
		return conversation{}, errors.New("anthropic-version: header is required")
	}
	var req struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return conversation{}, fmt.Errorf("malformed request: %w", err)
	}
	c := conversation{model: req.Model}
	if len(req.System) > 0 {
		c.system = text(req.System)
	}
	var pending []string // the tool_use ids of the last assistant turn
	for i, m := range req.Messages {
		if want := []string{"user", "assistant"}[i%2]; m.Role != want {
			return conversation{}, fmt.Errorf("messages.%d: roles must alternate between \"user\" and \"assistant\", starting with \"user\"; got %q", i, m.Role)
		}
		var blocks []anthropicBlock
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			blocks = []anthropicBlock{{Type: "text", Text: s}}
		} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return conversation{}, fmt.Errorf("messages.%d.content: %w", i, err)
		}
		var texts []string
		var uses []string
		for j, b := range blocks {
			switch b.Type {
			case "text":
				if b.Text == "" {
					return conversation{}, fmt.Errorf("messages.%d.content.%d: text content blocks must be non-empty", i, j)
				}
				texts = append(texts, b.Text)
			case "tool_use":
				if m.Role != "assistant" || b.ID == "" || b.Name == "" || !json.Valid(b.Input) || b.Input[0] != '{' {
					return conversation{}, fmt.Errorf("messages.%d.content.%d: a malformed tool_use", i, j)
				}
				uses = append(uses, b.ID)
			case "tool_result":
				if m.Role != "user" || !slices.Contains(pending, b.ToolUseID) {
					return conversation{}, fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
						"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
				}
				pending = slices.DeleteFunc(pending, func(id string) bool { return id == b.ToolUseID })
				c.results = append(c.results, b.ToolUseID+": "+text(b.Content))
			default:
				return conversation{}, fmt.Errorf("messages.%d.content.%d: unknown block type %q", i, j, b.Type)
			}
		}
		if m.Role == "user" {
			if len(pending) > 0 {
				return conversation{}, fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s",
					i, strings.Join(pending, ", "))
			}
			if c.prompt == "" {
				c.prompt = strings.Join(texts, "")
			}
		}
		c.called += len(uses)
		pending = uses
	}
	for _, t := range req.Tools {
		c.tools = append(c.tools, offered{name: t.Name, params: t.InputSchema})
	}
	return c, nil
}
