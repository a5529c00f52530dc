package llm_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/worker/llm"
)

// TestTokensPerMinute: a request reserves its prompt's estimate and max-tokens; once answered
// its reservation becomes its usage, so calls that could not all reserve within the minute
// all go. A request that reserves more than the limit fails unsent.
func TestTokensPerMinute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClock()
	c := b.clientOn(t, clock, func(p *llm.Provider) { p.TokensPerMinute = 100 })
	prompt := strings.Repeat("x", 40) // 10 tokens by the estimate; 40 more of max-tokens
	for i := range 10 {
		// Without the usage replacing the reservation the third would wait for the minute,
		// on a clock that does not move.
		if _, err := c.Generate(b.ctx, llm.Request{Prompt: prompt, MaxTokens: 40}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, err := c.Generate(b.ctx, llm.Request{Prompt: "too big", MaxTokens: 99})
	var e *llm.Error
	if !errors.As(err, &e) || e.Class != llm.ClassBadRequest || !strings.Contains(err.Error(), "more than the provider's tokens-per-minute, 100") {
		t.Fatalf("a request of 101 tokens under 100 a minute: %v, want a bad request", err)
	}
	if n := b.srv.Calls("too big"); n != 0 {
		t.Errorf("server saw %d calls of the request over the limit, want 0", n)
	}
}

// signalWriter is a log that signals each line containing what.
type signalWriter struct {
	what string
	seen chan struct{}
}

func (w signalWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.what) {
		select {
		case w.seen <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// TestAdmissionWaitsForTheDatabase: while the database cannot be reached a request of a
// limited provider is not sent; it is asked again with backoff, and sent once the database
// answers.
func TestAdmissionWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, dsn := daotest.New(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	db, err := dao.Open(b.ctx, u.String(), 4, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	retried := signalWriter{what: "could not ask the database to admit a model request; retrying", seen: make(chan struct{}, 1)}
	c, err := llm.New("limited", llm.Provider{Type: llm.ProviderOpenAI, BaseURL: b.srv.BaseURL(), Model: "m", RequestsPerMinute: 100},
		llm.Options{Limits: db, Log: zerolog.New(retried)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Generate(b.ctx, llm.Request{Prompt: "before"}); err != nil {
		t.Fatal(err)
	}

	proxy.Cut()
	proxy.Reset()
	done := b.generate(b.ctx, c, "while cut off")
	for range 2 {
		select {
		case <-retried.seen:
		case <-time.After(20 * time.Second):
			t.Fatal("the call did not retry its admission twice within 20s of the database going")
		}
	}
	if n := b.srv.Calls("while cut off"); n != 0 {
		t.Fatalf("server saw %d calls while the database was gone, want 0", n)
	}
	proxy.Heal()
	if err := ended(t, done); err != nil {
		t.Fatal(err)
	}
	if n := b.srv.Calls("while cut off"); n != 1 {
		t.Errorf("server saw %d calls once the database was back, want 1", n)
	}
}

// TestUnlimitedProviderGoesWithoutTheDatabase: a provider without limits asks the database
// only whether another worker's 429 holds it back; while the database cannot be reached its
// requests go, since there are no limits to keep.
func TestUnlimitedProviderGoesWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, dsn := daotest.New(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	db, err := dao.Open(b.ctx, u.String(), 4, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	unread := signalWriter{what: "could not read whether the provider is held back", seen: make(chan struct{}, 1)}
	c, err := llm.New("unlimited", llm.Provider{Type: llm.ProviderOpenAI, BaseURL: b.srv.BaseURL(), Model: "m"},
		llm.Options{Limits: db, Log: zerolog.New(unread)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Generate(b.ctx, llm.Request{Prompt: "before"}); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	proxy.Reset()
	if err := ended(t, b.generate(b.ctx, c, "while cut off")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-unread.seen:
	default:
		t.Error("the call went without saying it could not read the provider's block")
	}
	if n := b.srv.Calls("while cut off"); n != 1 {
		t.Errorf("server saw %d calls while the database was gone, want 1", n)
	}
}

// TestAdmissionRefusedIsNotSent: a database that refuses the admission's statement (here its
// table is gone) fails the call at once, unsent and not retried.
func TestAdmissionRefusedIsNotSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db, _ := daotest.New(t)
	if _, err := db.SQL().Exec(`DROP TABLE llm_start`); err != nil {
		t.Fatal(err)
	}
	c, err := llm.New("limited", llm.Provider{Type: llm.ProviderOpenAI, BaseURL: b.srv.BaseURL(), Model: "m", TokensPerMinute: 1000},
		llm.Options{Limits: db, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Generate(b.ctx, llm.Request{Prompt: "unadmitted"})
	var e *llm.Error
	if !errors.As(err, &e) || e.Class != llm.ClassAdmission || e.Attempts != 1 || !strings.Contains(err.Error(), "llm_start") {
		t.Fatalf("error = %v, want an admission error naming the statement's fault, after 1 attempt", err)
	}
	if n := b.srv.Calls("unadmitted"); n != 0 {
		t.Errorf("server saw %d calls, want 0", n)
	}
}

// TestRetryAfterDateBlocksTheProvider: a 429 whose Retry-After is an HTTP date holds back the
// provider's other calls until then, not only the call that got it.
func TestRetryAfterDateBlocksTheProvider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC))
	b.srv.Fail("dated", 429, 1, clock.Now().Add(3*time.Second).Format(http.TimeFormat))
	c := b.clientOn(t, clock, func(p *llm.Provider) { p.RequestsPerMinute = 1000 })
	rejected := b.generate(b.ctx, c, "dated")
	waitingOn(t, clock) // the 429 is in; its call waits out the Retry-After
	other := b.generate(b.ctx, c, "other")
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal("the other call did not wait")
	}
	clock.Advance(3*time.Second - time.Millisecond)
	if n := b.srv.Calls("other"); n != 0 {
		t.Fatalf("server saw %d other calls before the Retry-After date, want 0", n)
	}
	clock.Advance(time.Millisecond)
	for _, done := range []<-chan error{rejected, other} {
		if err := ended(t, done); err != nil {
			t.Fatal(err)
		}
	}
	if n, m := b.srv.Calls("dated"), b.srv.Calls("other"); n != 2 || m != 1 {
		t.Errorf("server saw %d dated and %d other calls, want 2 and 1", n, m)
	}
}

// lateOnce is the cluster's limits with the first admission answered late: the clock moves
// past half the admission margin while it is under way, as on a loaded machine.
type lateOnce struct {
	*dao.DB
	clock *clockwork.FakeClock
	late  bool
}

func (l *lateOnce) LLMAdmitIfUnderLimits(ctx context.Context, provider string, lim dao.LLMLimits, tokens int) (dao.LLMAdmission, error) {
	a, err := l.DB.LLMAdmitIfUnderLimits(ctx, provider, lim, tokens)
	if !l.late {
		l.late = true
		l.clock.Advance(llm.AdmissionMargin)
	}
	return a, err
}

// TestLateAdmissionGivesItsTokensBack: an admission that came back too late to be used is
// asked again; the start it made stays counted among the requests, but its reservation goes,
// so the window holds the tokens the one request sent used, not those of an unsent one too.
func TestLateAdmissionGivesItsTokensBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db, _ := daotest.New(t)
	clock := clockwork.NewFakeClock()
	c, err := llm.New("late", llm.Provider{Type: llm.ProviderOpenAI, BaseURL: b.srv.BaseURL(), Model: "m", TokensPerMinute: 1000},
		llm.Options{Limits: &lateOnce{DB: db, clock: clock}, Clock: clock, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Generate(b.ctx, llm.Request{Prompt: "late one", MaxTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.srv.Calls("late one"); n != 1 {
		t.Fatalf("server saw %d calls, want 1", n)
	}
	var requests, tokens int
	if err := db.SQL().QueryRow(`SELECT requests, tokens FROM llm_limit WHERE provider = 'late'`).Scan(&requests, &tokens); err != nil {
		t.Fatal(err)
	}
	if requests != 2 {
		t.Errorf("the window counts %d requests, want 2: the late start and the one sent", requests)
	}
	if want := resp.Usage.TotalTokens; tokens != want {
		t.Errorf("the window holds %d tokens, want the sent request's usage, %d", tokens, want)
	}
}
