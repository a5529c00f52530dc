package llm

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/tmc/langchaingo/llms"
)

// Offline is the model of the offline provider type. It calls nothing: its answer is derived
// from the prompt alone — the prompt's length, its most frequent longer words and a digest —
// so the same prompt always gets the same answer, different prompts get different ones, and
// the answer says it is offline. Usage counts words as tokens. It is for the demo, tests and
// trying workflows without a model server.
//
// Offered tools, it calls each of them once, in the order offered, one call a turn, with
// arguments made from each tool's schema (see OfflineArguments); once every tool has been
// called it answers as above, over the prompt and the tools' results.
type Offline struct{}

// GenerateContent implements llms.Model.
func (Offline) GenerateContent(ctx context.Context, msgs []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var opts llms.CallOptions
	for _, o := range options {
		o(&opts)
	}
	var system, prompt strings.Builder
	called := 0
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p := p.(type) {
			case llms.TextContent:
				if m.Role == llms.ChatMessageTypeSystem {
					system.WriteString(p.Text)
				} else {
					prompt.WriteString(p.Text)
				}
			case llms.ToolCall:
				called++
			case llms.ToolCallResponse:
				prompt.WriteString("\n" + p.Content)
			}
		}
	}
	promptTokens := len(strings.Fields(system.String())) + len(strings.Fields(prompt.String()))
	choice := &llms.ContentChoice{StopReason: "stop"}
	if called < len(opts.Tools) && opts.Tools[called].Function != nil {
		fn := opts.Tools[called].Function
		args, _ := json.Marshal(OfflineArguments(fn.Parameters))
		choice.StopReason = "tool_calls"
		choice.ToolCalls = []llms.ToolCall{{ID: fmt.Sprintf("call_%d", called+1), Type: "function",
			FunctionCall: &llms.FunctionCall{Name: fn.Name, Arguments: string(args)}}}
		choice.Content = ""
	} else {
		choice.Content = OfflineAnswer(prompt.String())
	}
	completionTokens := len(strings.Fields(choice.Content)) + 3*len(choice.ToolCalls)
	choice.GenerationInfo = map[string]any{"PromptTokens": promptTokens, "CompletionTokens": completionTokens,
		"TotalTokens": promptTokens + completionTokens}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{choice}}, nil
}

// OfflineArguments are the arguments the offline model calls a tool with, made from the JSON
// Schema of its arguments: each property gets its default, else its first enum value, else
// its first example, else a value of its type ("offline", 1, true, [], {}).
func OfflineArguments(schema any) map[string]any {
	out := map[string]any{}
	s, _ := schema.(map[string]any)
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		prop, _ := p.(map[string]any)
		if v, ok := prop["default"]; ok {
			out[name] = v
			continue
		}
		if e, ok := prop["enum"].([]any); ok && len(e) > 0 {
			out[name] = e[0]
			continue
		}
		if e, ok := prop["examples"].([]any); ok && len(e) > 0 {
			out[name] = e[0]
			continue
		}
		switch prop["type"] {
		case "integer", "number":
			out[name] = 1
		case "boolean":
			out[name] = true
		case "array":
			out[name] = []any{}
		case "object":
			out[name] = map[string]any{}
		default:
			out[name] = "offline"
		}
	}
	return out
}

// Call implements llms.Model.
func (o Offline) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, o, prompt, options...)
}

// OfflineAnswer is the offline provider's answer to prompt, for example
// "[offline model] 42 words; key terms: failover, scheduler, zookeeper (digest 3f2a9c1b)".
func OfflineAnswer(prompt string) string {
	words := strings.FieldsFunc(strings.ToLower(prompt), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	counts := map[string]int{}
	for _, w := range words {
		if len([]rune(w)) >= 5 {
			counts[w]++
		}
	}
	terms := make([]string, 0, len(counts))
	for w := range counts {
		terms = append(terms, w)
	}
	slices.SortFunc(terms, func(a, b string) int {
		return cmp.Or(counts[b]-counts[a], strings.Compare(a, b))
	})
	terms = terms[:min(len(terms), 6)]
	sum := sha256.Sum256([]byte(prompt))
	key := "none"
	if len(terms) > 0 {
		key = strings.Join(terms, ", ")
	}
	return fmt.Sprintf("[offline model] %d words; key terms: %s (digest %s)", len(words), key, hex.EncodeToString(sum[:4]))
}
