package llm

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// anthropicTurns is the transport of an anthropic provider: it joins the consecutive
// messages of one role in a request's body into one message, so that an answer's text and
// all its tool_use blocks go in one assistant message and the tool_result blocks of all its
// calls in the one user message after it, the shape Anthropic's Messages API documents.
// langchaingo v0.1.14 sends an assistant message's first part only, so the client gives it
// one message a part (Message.messageContents).
type anthropicTurns struct {
	base http.RoundTripper
}

func (t anthropicTurns) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/messages") {
		return t.base.RoundTrip(req)
	}
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	if joined, ok := joinTurns(raw); ok {
		raw = joined
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(raw))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	out.ContentLength = int64(len(raw))
	return t.base.RoundTrip(out)
}

// joinTurns returns body with its consecutive messages of one role joined, and whether
// there were any to join; a body it cannot read is left to the server to refuse.
func joinTurns(body []byte) ([]byte, bool) {
	var req map[string]json.RawMessage
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req["messages"], &msgs) != nil {
		return nil, false
	}
	type turn struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	}
	var turns []turn
	joined := false
	for _, m := range msgs {
		var blocks []json.RawMessage
		if json.Unmarshal(m.Content, &blocks) != nil {
			// A string content is one text block.
			var s string
			if json.Unmarshal(m.Content, &s) != nil {
				return nil, false
			}
			b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
			blocks = []json.RawMessage{b}
		}
		if n := len(turns); n > 0 && turns[n-1].Role == m.Role {
			turns[n-1].Content = append(turns[n-1].Content, blocks...)
			joined = true
			continue
		}
		turns = append(turns, turn{Role: m.Role, Content: blocks})
	}
	if !joined {
		return nil, false
	}
	var err error
	if req["messages"], err = json.Marshal(turns); err != nil {
		return nil, false
	}
	out, err := json.Marshal(req)
	return out, err == nil
}
