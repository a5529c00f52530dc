package llm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/retry"
)

// Limits is where the providers' requests-per-minute and tokens-per-minute are kept: the
// cluster's database (*dao.DB), where every worker's requests count together. Each request
// of a limited provider is admitted there before it is sent (LLMAdmitIfUnderLimits), its
// reserved tokens are replaced by its usage once it is answered (LLMStartSetTokens), and a
// 429 with Retry-After blocks the provider for every worker until then (LLMLimitBlock). A
// provider without limits is only asked whether it is blocked (LLMBlockedFor).
type Limits interface {
	LLMAdmitIfUnderLimits(ctx context.Context, provider string, limits dao.LLMLimits, tokens int) (dao.LLMAdmission, error)
	LLMStartSetTokens(ctx context.Context, startID int64, tokens int) error
	LLMLimitBlock(ctx context.Context, provider string, d time.Duration) error
	LLMBlockedFor(ctx context.Context, provider string) (time.Duration, error)
}

// AdmissionMargin is added to the window a provider's limits are counted over. A start is
// stamped by the database's clock when its worker asks; the request reaches the provider a
// little later, and later by a different amount each time, so two requests admitted a window
// apart could arrive at the provider less than a window apart. An admission that took more
// than half the margin to come back is not used (see admit), which leaves the other half for
// the way from the worker to the provider.
const AdmissionMargin = time.Second

// admissionRetry is the backoff of an admission while the database cannot be reached: 100 ms
// doubling up to 5 s.
var admissionRetry = retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}

// admissionTry bounds one admission statement; a database that does not answer within it is
// treated as one that is down.
const admissionTry = 10 * time.Second

// limiter admits the requests of one client under its provider's limits.
type limiter struct {
	provider string
	store    Limits
	// shared is set when store is the cluster's: the window then has AdmissionMargin added,
	// a late admission is not used, and waits get jitter.
	shared bool
	// blockOnly is set when the provider has no limits: its requests only wait out a block
	// another worker's 429 has set.
	blockOnly bool
	limits    dao.LLMLimits
	// recheck bounds a wait for tokens: a 60th of the window.
	recheck time.Duration
	clock   clockwork.Clock
	// asking lets one call of the client at a time ask for admission: the others queue in
	// the process, not at the provider's row, so a full window is asked again by each
	// worker once when room is due, not by each of its waiting calls.
	asking chan struct{}
	// waited, if set, is told how long each admitted request waited.
	waited func(provider string, d time.Duration)
	log    zerolog.Logger
}

// newLimiter returns the limiter of provider: on opts.Limits, or alone in memory without it.
func newLimiter(provider string, pc Provider, opts Options, clock clockwork.Clock) *limiter {
	l := &limiter{provider: provider, store: opts.Limits, shared: opts.Limits != nil, clock: clock,
		asking: make(chan struct{}, 1), waited: opts.AdmissionWaited, log: opts.Log,
		limits: dao.LLMLimits{Requests: pc.RequestsPerMinute, Tokens: pc.TokensPerMinute, Window: opts.Window}}
	if l.limits.Window <= 0 {
		l.limits.Window = time.Minute
	}
	l.recheck = l.limits.Window / 60
	l.blockOnly = l.limits.Requests == 0 && l.limits.Tokens == 0
	if l.shared {
		l.limits.Window += AdmissionMargin
	} else {
		l.store = &localLimits{clock: clock, epoch: clock.Now()}
	}
	return l
}

// admit waits until a request of tokens tokens is admitted, and returns its start. It waits
// for as long as the database says, and while the database cannot be reached it tries again
// with backoff: a request is never sent without an admission. It returns ctx's error when
// ctx ends first, and an *Error when the database refuses the statement itself.
func (l *limiter) admit(ctx context.Context, tokens int) (int64, error) {
	if l.blockOnly {
		return 0, l.unblocked(ctx)
	}
	if l.limits.Tokens > 0 && tokens > l.limits.Tokens {
		return 0, &Error{Provider: l.provider, Class: ClassBadRequest, Msg: fmt.Sprintf(
			"the request reserves %d tokens (its prompt's estimate and max-tokens), more than the provider's tokens-per-minute, %d",
			tokens, l.limits.Tokens)}
	}
	began := l.clock.Now()
	select {
	case l.asking <- struct{}{}:
		defer func() { <-l.asking }()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	backoff := admissionRetry.Backoff()
	for {
		asked := l.clock.Now()
		actx, cancel := context.WithTimeout(ctx, admissionTry)
		a, err := l.store.LLMAdmitIfUnderLimits(actx, l.provider, l.limits, tokens)
		unanswered := actx.Err() != nil
		cancel()
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case err != nil && !unanswered && !dao.IsUnavailable(err):
			return 0, &Error{Provider: l.provider, Class: ClassAdmission, Msg: err.Error(), Err: err}
		case err != nil:
			wait = backoff.Next()
			l.log.Warn().Err(err).Str("provider", l.provider).Dur("retry_in", wait).
				Msg("could not ask the database to admit a model request; retrying")
		case a.Admitted && (!l.shared || l.clock.Since(asked) <= AdmissionMargin/2):
			if l.waited != nil {
				l.waited(l.provider, l.clock.Since(began))
			}
			return a.StartID, nil
		case a.Admitted:
			// Too late to be sure of the margin: ask again. The start stays counted, which
			// errs on the provider's side, but without its tokens: no request was sent for
			// them, and a reservation left in place would hold the window fuller than any
			// usage for a whole window.
			l.release(a.StartID)
			continue
		default:
			// Tokens may come back sooner than the database can know: the calls in flight
			// give back what they reserved beyond their usage when they end.
			wait = max(time.Duration(max(a.BlockedMillis, a.RequestsMillis))*time.Millisecond,
				min(time.Duration(a.TokensMillis)*time.Millisecond, l.recheck))
			if l.shared {
				// Waiters of other workers were told the same moment: a little jitter
				// spreads their asks.
				wait += rand.N(wait/20 + time.Millisecond)
			}
		}
		if err := retry.Sleep(ctx, l.clock, wait, nil); err != nil {
			return 0, err
		}
	}
}

// unblocked waits until the provider is not held back by a block. There are no limits to
// keep: when the database cannot say, the request goes, and the provider's own 429 is
// honoured by the call that gets it.
func (l *limiter) unblocked(ctx context.Context) error {
	began := l.clock.Now()
	defer func() {
		if l.waited != nil && ctx.Err() == nil {
			l.waited(l.provider, l.clock.Since(began))
		}
	}()
	for {
		actx, cancel := context.WithTimeout(ctx, admissionTry)
		wait, err := l.store.LLMBlockedFor(actx, l.provider)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			l.log.Warn().Err(err).Str("provider", l.provider).
				Msg("could not read whether the provider is held back by another worker's 429; sending")
			return nil
		case wait <= 0:
			return nil
		}
		if l.shared {
			wait += rand.N(wait/20 + time.Millisecond)
		}
		if err := retry.Sleep(ctx, l.clock, wait, nil); err != nil {
			return err
		}
	}
}

// settle replaces a start's reserved tokens by those its call used, when the provider said.
// It is tried once: a reservation left in place only holds the window a little fuller.
func (l *limiter) settle(start int64, used int) {
	if used <= 0 {
		return
	}
	l.setTokens(start, used)
}

// release gives back the tokens of a start whose request was not sent.
func (l *limiter) release(start int64) { l.setTokens(start, 0) }

func (l *limiter) setTokens(start int64, used int) {
	if l.limits.Tokens == 0 || start == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), admissionTry)
	defer cancel()
	if err := l.store.LLMStartSetTokens(ctx, start, used); err != nil {
		l.log.Warn().Err(err).Str("provider", l.provider).Msg("could not replace a model request's reserved tokens by its usage")
	}
}

// block holds every worker's requests to the provider back for d.
func (l *limiter) block(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), admissionTry)
	defer cancel()
	if err := l.store.LLMLimitBlock(ctx, l.provider, d); err != nil {
		l.log.Warn().Err(err).Str("provider", l.provider).Dur("retry_after", d).
			Msg("could not hold the provider back for every worker after its 429")
	}
}

// estimateTokens is what a request reserves of tokens-per-minute before it is sent: its
// prompts' length in bytes divided by four, rounded up (the usual rule for English text and
// the OpenAI tokenizers; langchaingo's own counter downloads its encodings at run time), and
// the completion's cap when the task sets max-tokens. The reservation is replaced by the
// usage the provider reports once it answers.
func estimateTokens(req Request) int {
	return (len(req.System)+len(req.Prompt)+historyChars(req.History)+toolsChars(req.Tools)+3)/4 + req.MaxTokens
}

// localLimits keeps the limits of one client alone, in memory and on its clock, by the
// rules of the database's statements: what a client built without the cluster's database
// uses (tests and benchmarks).
type localLimits struct {
	clock clockwork.Clock
	epoch time.Time

	mu      sync.Mutex
	starts  []localStart // oldest first
	tokens  int          // the starts' tokens
	blocked time.Duration
	lastID  int64
}

// localStart is a start at an offset from epoch: plain integers rather than time.Time
// values, which hold a pointer the garbage collector would scan across a log of a million.
type localStart struct {
	id     int64
	at     time.Duration
	tokens int
}

// LLMAdmitIfUnderLimits implements Limits.
func (m *localLimits) LLMAdmitIfUnderLimits(_ context.Context, _ string, lim dao.LLMLimits, tokens int) (dao.LLMAdmission, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Since(m.epoch)
	for len(m.starts) > 0 && m.starts[0].at <= now-lim.Window {
		m.tokens -= m.starts[0].tokens
		m.starts = m.starts[1:]
	}
	var a dao.LLMAdmission
	if now < m.blocked {
		a.BlockedMillis = millis(m.blocked - now)
	}
	if n := len(m.starts); lim.Requests > 0 && n >= lim.Requests {
		a.RequestsMillis = millis(m.starts[n-lim.Requests].at + lim.Window - now)
	}
	if excess := m.tokens + tokens - lim.Tokens; lim.Tokens > 0 && excess > 0 {
		freed, until := 0, now+lim.Window
		for _, s := range m.starts {
			if freed += s.tokens; freed >= excess {
				until = s.at + lim.Window
				break
			}
		}
		a.TokensMillis = millis(until - now)
	}
	if a.Wait() > 0 {
		return a, nil
	}
	m.lastID++
	m.starts = append(m.starts, localStart{id: m.lastID, at: now, tokens: tokens})
	m.tokens += tokens
	return dao.LLMAdmission{Admitted: true, StartID: m.lastID}, nil
}

// LLMStartSetTokens implements Limits.
func (m *localLimits) LLMStartSetTokens(_ context.Context, startID int64, tokens int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.starts) - 1; i >= 0; i-- {
		if s := &m.starts[i]; s.id == startID {
			m.tokens += tokens - s.tokens
			s.tokens = tokens
			break
		}
	}
	return nil
}

// LLMLimitBlock implements Limits.
func (m *localLimits) LLMLimitBlock(_ context.Context, _ string, d time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.blocked = max(m.blocked, m.clock.Since(m.epoch)+d)
	return nil
}

// LLMBlockedFor implements Limits.
func (m *localLimits) LLMBlockedFor(_ context.Context, _ string) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(0, m.blocked-m.clock.Since(m.epoch)), nil
}

// millis is d in whole milliseconds, rounded up: a wait never ends before its moment.
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
