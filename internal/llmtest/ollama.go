package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// ollamaAPI is Ollama's chat API (POST /api/chat), answering in one piece whether or not the
// request asked for a stream. Like Ollama, it gives its tool calls no ids: a tool's result
// names the tool it answers (tool_name), and must answer a call of the assistant message
// before it. Ollama takes no API key, so Key is not asked for.
var ollamaAPI = api{
	read:       readOllama,
	authorized: func(*Server, *http.Request) bool { return true },
	answer: func(w http.ResponseWriter, c conversation, answer string, call int, tool offered, promptTokens, completionTokens int) {
		msg := map[string]any{"role": "assistant", "content": answer}
		if call > 0 {
			msg = map[string]any{"role": "assistant", "content": "", "tool_calls": []map[string]any{{
				"function": map[string]any{"name": tool.name, "arguments": json.RawMessage(toolArguments(tool.params))}}}}
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"model": c.model, "created_at": time.Now().UTC().Format(time.RFC3339Nano), "message": msg,
			"done": true, "done_reason": "stop", "prompt_eval_count": promptTokens, "eval_count": completionTokens,
		})
	},
	writeErr: func(w http.ResponseWriter, status int, retryAfter, msg string) {
		w.Header().Set("Content-Type", "application/json")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": msg})
	},
}

func readOllama(r *http.Request) (conversation, error) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name      string         `json:"name"`
					Arguments map[string]any `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolName   string `json:"tool_name"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name       string         `json:"name"`
				Parameters map[string]any `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return conversation{}, fmt.Errorf("malformed request: %w", err)
	}
	c := conversation{model: req.Model}
	var called []string // the tools the last assistant message called
	for i, m := range req.Messages {
		switch m.Role {
		case "user":
			if c.prompt == "" {
				c.prompt = m.Content
			}
		case "system":
			c.system = m.Content
		case "assistant":
			called = called[:0]
			for _, tc := range m.ToolCalls {
				called = append(called, tc.Function.Name)
			}
			c.called += len(m.ToolCalls)
		case "tool":
			if !slices.Contains(called, m.ToolName) {
				return conversation{}, fmt.Errorf("messages.%d: a tool result of %q, which the assistant message before did not call", i, m.ToolName)
			}
			id := m.ToolCallID
			if id == "" {
				id = m.ToolName
			}
			c.results = append(c.results, id+": "+m.Content)
		default:
			return conversation{}, fmt.Errorf("messages.%d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		c.tools = append(c.tools, offered{name: t.Function.Name, params: t.Function.Parameters})
	}
	return c, nil
}
