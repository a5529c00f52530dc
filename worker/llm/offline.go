package llm

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
type Offline struct{}

// GenerateContent implements llms.Model.
func (Offline) GenerateContent(ctx context.Context, msgs []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var system, prompt strings.Builder
	for _, m := range msgs {
		for _, p := range m.Parts {
			if t, ok := p.(llms.TextContent); ok {
				if m.Role == llms.ChatMessageTypeSystem {
					system.WriteString(t.Text)
				} else {
					prompt.WriteString(t.Text)
				}
			}
		}
	}
	answer := OfflineAnswer(prompt.String())
	promptTokens := len(strings.Fields(system.String())) + len(strings.Fields(prompt.String()))
	completionTokens := len(strings.Fields(answer))
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{
		Content:    answer,
		StopReason: "stop",
		GenerationInfo: map[string]any{"PromptTokens": promptTokens, "CompletionTokens": completionTokens,
			"TotalTokens": promptTokens + completionTokens},
	}}}, nil
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
