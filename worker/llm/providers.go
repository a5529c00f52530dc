package llm

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/zksched/zksched/internal/retry"
)

// Defaults of the provider keys left at zero.
const (
	// DefaultTimeout bounds one request when the provider's timeout is 0.
	DefaultTimeout = 2 * time.Minute
	// DefaultMaxAttempts is how often a call is tried when the provider's max-attempts is 0.
	DefaultMaxAttempts = 5
	// DefaultOllamaURL is where an ollama provider without a base-url looks.
	DefaultOllamaURL = "http://127.0.0.1:11434"
	// DefaultOpenAIURL is the base URL of an openai provider without a base-url.
	DefaultOpenAIURL = "https://api.openai.com/v1"
)

// Values of [Provider.Type].
const (
	// ProviderOpenAI is any server that speaks OpenAI's chat completions API.
	ProviderOpenAI = "openai"
	// ProviderOllama is an Ollama server.
	ProviderOllama = "ollama"
	// ProviderAnthropic is Anthropic's messages API.
	ProviderAnthropic = "anthropic"
	// ProviderOffline is the built-in [Offline] model: it calls no model.
	ProviderOffline = "offline"
)

// Provider is one model provider as a worker's config gives it (conf.Provider, which
// documents each key and converts to it field for field).
type Provider struct {
	// Type is [ProviderOpenAI], [ProviderOllama], [ProviderAnthropic] or [ProviderOffline].
	Type string
	// BaseURL is the API's base URL; empty is the provider's own service (for ollama,
	// [DefaultOllamaURL]).
	BaseURL string
	// Model is the model name sent with each request.
	Model string
	// APIKeyEnv names the environment variable that holds the API key; empty sends none.
	APIKeyEnv string
	// Timeout bounds one request; 0 is [DefaultTimeout].
	Timeout time.Duration
	// RequestsPerMinute caps the requests of all the workers together in a window; 0 is
	// no cap.
	RequestsPerMinute int
	// TokensPerMinute caps the tokens of all the workers' requests together in a window;
	// 0 is no cap.
	TokensPerMinute int
	// MaxConcurrent caps this worker's requests in flight; 0 is no cap.
	MaxConcurrent int
	// MaxAttempts is how often one call is tried; 0 is [DefaultMaxAttempts].
	MaxAttempts int
	// InputPrice and OutputPrice are the prices of a million prompt and completion tokens;
	// 0 is unknown.
	InputPrice  float64
	OutputPrice float64
}

// Options tune the clients of Providers.
type Options struct {
	// Getenv reads API key variables; nil means os.Getenv.
	Getenv func(string) string
	// Backoff is the first pause between tries of a call, doubled each try up to
	// MaxBackoff, with jitter. Zero means 500 ms and 30 s; tests shorten them.
	Backoff, MaxBackoff time.Duration
	Log                 zerolog.Logger
	// Clock is the time source of the pauses between tries and of the waits for admission;
	// nil is the real clock.
	Clock clockwork.Clock
	// Limits keeps requests-per-minute and tokens-per-minute for the whole cluster: the
	// cluster's database, which also holds every worker's requests to a provider back after
	// a 429 with Retry-After, whether the provider has limits or not. Nil keeps the limits
	// for each client alone, in memory, by Clock (a process without the database: tests,
	// benchmarks), and a 429 holds back only the call that got it.
	Limits Limits
	// Window is the period requests-per-minute and tokens-per-minute count over. Zero means a
	// minute; tests shorten it.
	Window time.Duration
	// AdmissionWaited, if set, is told how long each request of a limited provider waited
	// for its admission.
	AdmissionWaited func(provider string, d time.Duration)
}

// Providers builds and keeps one Client per configured provider.
type Providers struct {
	cfg  map[string]Provider
	opts Options

	mu      sync.Mutex
	clients map[string]*Client
}

// NewProviders returns the providers of cfg (llm.providers). Clients are built at first
// use, so a provider that cannot be built fails only the tasks that name it.
func NewProviders(cfg map[string]Provider, opts Options) *Providers {
	return &Providers{cfg: cfg, opts: opts, clients: map[string]*Client{}}
}

// Names returns the configured provider names, sorted.
func (p *Providers) Names() []string {
	names := make([]string, 0, len(p.cfg))
	for n := range p.cfg {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Get returns the client of the provider called name. An unknown provider, or one whose API
// key variable is unset, is an *Error of class ClassConfig naming what to fix.
func (p *Providers) Get(name string) (*Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[name]; ok {
		return c, nil
	}
	pc, ok := p.cfg[name]
	if !ok {
		known := "none is configured"
		if names := p.Names(); len(names) > 0 {
			known = "configured: " + strings.Join(names, ", ")
		}
		return nil, &Error{Provider: name, Class: ClassConfig, Msg: fmt.Sprintf(
			"no such provider in this worker's config (llm.providers; %s)", known)}
	}
	c, err := New(name, pc, p.opts)
	if err != nil {
		return nil, err
	}
	p.clients[name] = c
	return c, nil
}

// New builds the client of one provider. The API key is read from the environment variable
// the config names, here and nowhere else; it is never logged.
func New(name string, pc Provider, opts Options) (*Client, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	configErr := func(format string, args ...any) error {
		return &Error{Provider: name, Class: ClassConfig, Msg: fmt.Sprintf(format, args...)}
	}
	var key string
	if pc.APIKeyEnv != "" && pc.Type != ProviderOffline && pc.Type != ProviderOllama {
		if key = getenv(pc.APIKeyEnv); key == "" {
			return nil, configErr("the API key variable %s is not set in the worker's environment (llm.providers.%s.api-key-env)",
				pc.APIKeyEnv, name)
		}
	}
	clock := opts.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	httpClient := &http.Client{Transport: recordingTransport{base: newTransport(), clock: clock}}
	c := &Client{name: name, kind: pc.Type, modelName: pc.Model, timeout: pc.Timeout, maxAttempts: pc.MaxAttempts,
		inputPrice: pc.InputPrice, outputPrice: pc.OutputPrice,
		log: opts.Log, clock: clock}
	var err error
	switch pc.Type {
	case ProviderOpenAI:
		base := pc.BaseURL
		if base == "" {
			base = DefaultOpenAIURL
		} else {
			// Compatible servers (vLLM, llama.cpp, Ollama's /v1) know max_tokens; OpenAI
			// itself has moved to max_completion_tokens.
			c.callOpts = append(c.callOpts, openai.WithLegacyMaxTokensField())
		}
		if key == "" {
			key = "none" // the library insists on a token; a server that needs none ignores it
		}
		c.model, err = openai.New(openai.WithBaseURL(base), openai.WithToken(key), openai.WithModel(pc.Model),
			openai.WithHTTPClient(httpClient))
	case ProviderOllama:
		base := pc.BaseURL
		if base == "" {
			base = DefaultOllamaURL
		}
		c.model, err = newOllamaModel(base, pc.Model, httpClient)
	case ProviderAnthropic:
		httpClient.Transport = anthropicTurns{base: httpClient.Transport}
		aopts := []anthropic.Option{anthropic.WithToken(key), anthropic.WithModel(pc.Model), anthropic.WithHTTPClient(httpClient)}
		if pc.BaseURL != "" {
			aopts = append(aopts, anthropic.WithBaseURL(pc.BaseURL))
		}
		c.model, err = anthropic.New(aopts...)
	case ProviderOffline:
		c.model, c.modelName = Offline{}, "offline"
	default:
		return nil, configErr("unknown provider type %q", pc.Type)
	}
	if err != nil {
		return nil, configErr("%v", err)
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxAttempts <= 0 {
		c.maxAttempts = DefaultMaxAttempts
	}
	c.backoff = retry.Policy{Initial: opts.Backoff, Max: opts.MaxBackoff, FullJitter: true}
	if c.backoff.Initial <= 0 {
		c.backoff.Initial = 500 * time.Millisecond
	}
	if c.backoff.Max < c.backoff.Initial {
		c.backoff.Max = max(30*time.Second, c.backoff.Initial)
	}
	if pc.RequestsPerMinute > 0 || pc.TokensPerMinute > 0 || (opts.Limits != nil && pc.Type != ProviderOffline) {
		// With the cluster's database, a provider without limits still has a limiter: a 429
		// one worker gets holds every worker's requests back. The offline model never
		// answers 429.
		c.limiter = newLimiter(name, pc, opts, c.clock)
	}
	if pc.MaxConcurrent > 0 {
		c.inFlight = make(chan struct{}, pc.MaxConcurrent)
	}
	return c, nil
}

// newTransport is the HTTP transport of one provider: keep-alive connections enough for the
// worker's slots, so a call does not pay a new TCP (and TLS) handshake.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}

var _ llms.Model = Offline{}
