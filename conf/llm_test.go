package conf_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/internal/testenv"
)

func TestLoadLLMAndPools(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
llm:
  providers:
    openai-main:
      type: openai
      model: gpt-4o-mini
      api-key-env: OPENAI_API_KEY
      timeout: 90s
      requests-per-minute: 500
      tokens-per-minute: 200000
      max-concurrent: 8
    local:
      type: ollama
      base-url: http://127.0.0.1:11434
      model: llama3.2
pools:
  openai: 4
`)
	got, err := conf.Load(path, []string{
		// The environment adds a provider, changes one from the file and the demo default,
		// and adds a pool.
		"ZKSCHED_LLM_PROVIDERS_EXTRA_TYPE=anthropic",
		"ZKSCHED_LLM_PROVIDERS_EXTRA_MODEL=claude-sonnet",
		"ZKSCHED_LLM_PROVIDERS_EXTRA_API_KEY_ENV=ANTHROPIC_API_KEY",
		"ZKSCHED_LLM_PROVIDERS_OPENAI_MAIN_MAX_ATTEMPTS=3",
		"ZKSCHED_LLM_PROVIDERS_LOCAL_TOKENS_PER_MINUTE=90000",
		"ZKSCHED_LLM_PROVIDERS_DEMO_TYPE=openai",
		"ZKSCHED_LLM_PROVIDERS_DEMO_BASE_URL=http://127.0.0.1:8000/v1",
		"ZKSCHED_LLM_PROVIDERS_DEMO_MODEL=qwen",
		"ZKSCHED_POOLS_LOCAL=2",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]conf.Provider{
		"openai-main": {Type: "openai", Model: "gpt-4o-mini", APIKeyEnv: "OPENAI_API_KEY", Timeout: 90 * time.Second,
			RequestsPerMinute: 500, TokensPerMinute: 200000, MaxConcurrent: 8, MaxAttempts: 3},
		"local": {Type: "ollama", BaseURL: "http://127.0.0.1:11434", Model: "llama3.2", TokensPerMinute: 90000},
		"extra": {Type: "anthropic", Model: "claude-sonnet", APIKeyEnv: "ANTHROPIC_API_KEY"},
		"demo":  {Type: "openai", BaseURL: "http://127.0.0.1:8000/v1", Model: "qwen"},
	}
	if !reflect.DeepEqual(got.LLM.Providers, want) {
		t.Errorf("providers =\n%+v\nwant\n%+v", got.LLM.Providers, want)
	}
	if want := map[string]int{"openai": 4, "local": 2}; !reflect.DeepEqual(got.Pools, want) {
		t.Errorf("pools = %v, want %v", got.Pools, want)
	}
}

func TestValidateLLMAndPools(t *testing.T) {
	t.Parallel()
	provider := func(p conf.Provider) func(c *conf.Config) {
		return func(c *conf.Config) { c.LLM.Providers["p"] = p }
	}
	tests := []struct {
		name   string
		change func(c *conf.Config)
		want   string // "" for valid
	}{
		{"openai", provider(conf.Provider{Type: "openai", Model: "gpt-4o-mini", APIKeyEnv: "OPENAI_API_KEY"}), ""},
		{"openai-compatible without a key", provider(conf.Provider{Type: "openai", BaseURL: "http://10.0.0.5:8000/v1", Model: "m"}), ""},
		{"unknown type", provider(conf.Provider{Type: "gpt", Model: "m"}), `llm.providers.p.type: "gpt": want one of openai, ollama, anthropic, offline`},
		{"no model", provider(conf.Provider{Type: "ollama"}), "llm.providers.p.model: required for a provider of type ollama"},
		{"a key in place of its variable", provider(conf.Provider{Type: "openai", Model: "m", APIKeyEnv: "sk-abc123"}),
			`llm.providers.p.api-key-env: "sk-abc123" is not an environment variable name (it names the variable holding the key, never the key itself)`},
		{"anthropic without a key", provider(conf.Provider{Type: "anthropic", Model: "m"}), "llm.providers.p.api-key-env: required for a provider of type anthropic"},
		{"ollama with a key", provider(conf.Provider{Type: "ollama", Model: "m", APIKeyEnv: "K"}), "llm.providers.p.api-key-env: an ollama server takes no API key"},
		{"offline with a URL", provider(conf.Provider{Type: "offline", BaseURL: "http://x"}), "llm.providers.p: the offline provider calls no server"},
		{"bad URL", provider(conf.Provider{Type: "openai", Model: "m", BaseURL: "localhost:8000"}), `llm.providers.p.base-url: "localhost:8000" is not an http:// or https:// URL`},
		{"negative timeout", provider(conf.Provider{Type: "offline", Timeout: -time.Second}), "llm.providers.p.timeout: -1s: must not be negative"},
		{"negative rate", provider(conf.Provider{Type: "offline", RequestsPerMinute: -1}), "llm.providers.p.requests-per-minute: -1 is out of range"},
		{"negative token rate", provider(conf.Provider{Type: "offline", TokensPerMinute: -1}), "llm.providers.p.tokens-per-minute: -1 is out of range 0..1000000000"},
		{"token rate too high", provider(conf.Provider{Type: "offline", TokensPerMinute: 1_000_000_001}), "llm.providers.p.tokens-per-minute: 1000000001 is out of range"},
		{"both rates", provider(conf.Provider{Type: "openai", Model: "m", RequestsPerMinute: 500, TokensPerMinute: 200_000}), ""},
		{"too many attempts", provider(conf.Provider{Type: "offline", MaxAttempts: 101}), "llm.providers.p.max-attempts: 101 is out of range 0..100"},
		{"provider name", func(c *conf.Config) { c.LLM.Providers["a b"] = conf.Provider{Type: "offline"} }, `llm.providers.a b: "a b": a provider name is`},
		{"pool", func(c *conf.Config) { c.Pools = map[string]int{"openai": 4} }, ""},
		{"pool of zero", func(c *conf.Config) { c.Pools = map[string]int{"openai": 0} }, "pools.openai: 0 is out of range 1..100000"},
		{"pool name", func(c *conf.Config) { c.Pools = map[string]int{"a/b": 1} }, `pools.a/b: "a/b": a pool name is`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := conf.Defaults()
			tt.change(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Errorf("Validate() = nil, want an error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("Validate() = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestDocsLLMLimits: the config block of docs/llm.md loads as it is printed, with the
// cluster-wide limits it shows.
func TestDocsLLMLimits(t *testing.T) {
	t.Parallel()
	const first = "# in the config of the workers"
	block := testenv.DocBlock(t, "docs/llm.md", "LLM and agent tasks", "yaml", 2)
	if !strings.HasPrefix(block, first) {
		t.Fatalf("docs/llm.md's second yaml block is not the config block (%q):\n%s", first, block)
	}
	got, err := conf.Load(writeConfig(t, block), nil)
	if err != nil {
		t.Fatalf("docs/llm.md's config block: %v", err)
	}
	if p := got.LLM.Providers["main"]; p.RequestsPerMinute != 500 || p.TokensPerMinute != 200000 {
		t.Errorf("main loads as %+v, want requests-per-minute 500 and tokens-per-minute 200000", p)
	}
}
