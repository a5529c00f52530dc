package llm_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/worker/llm"
)

// BenchmarkGenerate is one model call through the client (limits, classification, usage,
// langchaingo's request and response handling) against the local test server. Compare with
// BenchmarkRawHTTP, the same request by hand, for the cost the client adds.
func BenchmarkGenerate(b *testing.B) {
	srv := llmtest.New(b)
	c, err := llm.New("bench", llm.Provider{Type: llm.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "m",
		RequestsPerMinute: 1_000_000, MaxConcurrent: 64}, llm.Options{Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Generate(ctx, llm.Request{System: "be brief", Prompt: "summarise the week in one line"}); err != nil {
			b.Fatal(err)
		}
	}
	n, served := srv.Served()
	b.ReportMetric(float64(served.Microseconds())/float64(n), "server-µs/op")
}

// BenchmarkGenerateClusterLimited is BenchmarkGenerate with the provider's limits kept in
// PostgreSQL: with requests-per-minute each call is admitted by one statement, with
// tokens-per-minute too its usage is recorded by another. The limits are never reached; what
// it measures is their cost.
func BenchmarkGenerateClusterLimited(b *testing.B) {
	for _, bc := range []struct {
		name   string
		tokens int
	}{{"requests", 0}, {"requests+tokens", 1_000_000_000}} {
		b.Run(bc.name, func(b *testing.B) {
			srv := llmtest.New(b)
			db, _ := daotest.New(b)
			c, err := llm.New("bench", llm.Provider{Type: llm.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "m",
				RequestsPerMinute: 1_000_000, TokensPerMinute: bc.tokens, MaxConcurrent: 64}, llm.Options{Log: zerolog.Nop(), Limits: db})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				if _, err := c.Generate(ctx, llm.Request{System: "be brief", Prompt: "summarise the week in one line"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawHTTP posts the same chat completion request with net/http alone.
func BenchmarkRawHTTP(b *testing.B) {
	srv := llmtest.New(b)
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"summarise the week in one line"}]}`)
	client := &http.Client{Timeout: 10 * time.Second}
	for b.Loop() {
		resp, err := client.Post(srv.BaseURL()+"/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		resp.Body.Close()
	}
	n, served := srv.Served()
	b.ReportMetric(float64(served.Microseconds())/float64(n), "server-µs/op")
}
