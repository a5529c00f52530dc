package dao_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

var minute = dao.LLMLimits{Window: time.Minute}

// admit asks for the admission of a request of tokens tokens to provider under limits.
func (b *testBundle) admit(t *testing.T, provider string, limits dao.LLMLimits, tokens int) dao.LLMAdmission {
	t.Helper()
	a, err := b.db.LLMAdmitIfUnderLimits(b.ctx, provider, limits, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if a.Admitted != (a.StartID != 0) || a.Admitted && a.Wait() != 0 {
		t.Fatalf("admission %+v: a start id with admission alone, and no wait", a)
	}
	return a
}

// llmCounts returns provider's counts in llm_limit and what its rows in llm_start add up to:
// they must agree.
func (b *testBundle) llmCounts(t *testing.T, provider string) (requests, tokens int) {
	t.Helper()
	var got struct {
		Requests, Tokens, LogRequests, LogTokens int
	}
	if err := b.db.SQL().Get(&got, `SELECT l.requests, l.tokens,
		(SELECT count(*) FROM llm_start WHERE provider = l.provider) AS logrequests,
		(SELECT coalesce(sum(tokens), 0) FROM llm_start WHERE provider = l.provider) AS logtokens
		FROM llm_limit l WHERE provider = $1`, provider); err != nil {
		t.Fatal(err)
	}
	if got.Requests != got.LogRequests || got.Tokens != got.LogTokens {
		t.Fatalf("llm_limit counts %d requests, %d tokens of %s; its starts add up to %d, %d", got.Requests, got.Tokens,
			provider, got.LogRequests, got.LogTokens)
	}
	return got.Requests, got.Tokens
}

// age moves provider's starts d into the past: the database's clock moving on by d, as far
// as the window is concerned.
func (b *testBundle) age(t *testing.T, provider string, d time.Duration) {
	t.Helper()
	if _, err := b.db.SQL().Exec(`UPDATE llm_start SET started_at = started_at - $2 * interval '1 millisecond'
		WHERE provider = $1`, provider, d.Milliseconds()); err != nil {
		t.Fatal(err)
	}
}

func within(t *testing.T, what string, got, lo, hi time.Duration) {
	t.Helper()
	if got < lo || got > hi {
		t.Errorf("%s = %v, want within [%v, %v]", what, got, lo, hi)
	}
}

// TestLLMAdmitCapsRequests: the window holds limit starts; the next waits until the oldest
// leaves it, by the database's clock, and is admitted then; what left is deleted.
func TestLLMAdmitCapsRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lim := dao.LLMLimits{Requests: 3, Window: time.Minute}
	ids := map[int64]bool{}
	for i := range 3 {
		a := b.admit(t, "p", lim, 0)
		if !a.Admitted || ids[a.StartID] {
			t.Fatalf("request %d: %+v, want admitted with a start of its own", i+1, a)
		}
		ids[a.StartID] = true
		b.age(t, "p", 10*time.Second) // the three started 30 s, 20 s and 10 s ago
	}
	a := b.admit(t, "p", lim, 0)
	if a.Admitted {
		t.Fatal("the fourth request of the minute was admitted")
	}
	within(t, "wait of the fourth", a.Wait(), 29*time.Second, 30*time.Second)
	if n, _ := b.llmCounts(t, "p"); n != 3 {
		t.Errorf("%d starts counted, want 3", n)
	}
	// Another provider has a window of its own.
	if a := b.admit(t, "q", lim, 0); !a.Admitted {
		t.Error("provider q was refused for p's starts")
	}

	b.age(t, "p", 30*time.Second) // the oldest has left the window
	if a := b.admit(t, "p", lim, 0); !a.Admitted {
		t.Fatalf("a request after the oldest start left the window: %+v, want admitted", a)
	}
	if n, _ := b.llmCounts(t, "p"); n != 3 {
		t.Errorf("%d starts left in the log, want 3: the one that left is deleted", n)
	}
	a = b.admit(t, "p", lim, 0)
	within(t, "wait after the second-oldest", a.Wait(), 9*time.Second, 10*time.Second)
}

// TestLLMAdmitCapsTokens: reservations count until a call's usage replaces them; a start that
// has left the window cannot be corrected back into it.
func TestLLMAdmitCapsTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lim := dao.LLMLimits{Tokens: 100, Window: time.Minute}
	first := b.admit(t, "p", lim, 40)
	b.age(t, "p", 20*time.Second)
	second := b.admit(t, "p", lim, 40)
	if !first.Admitted || !second.Admitted {
		t.Fatalf("40 + 40 tokens of 100: %+v, %+v; want both admitted", first, second)
	}
	a := b.admit(t, "p", lim, 40)
	if a.Admitted {
		t.Fatal("40 + 40 + 40 tokens admitted under 100")
	}
	within(t, "wait for the first's 40 tokens", a.Wait(), 39*time.Second, 40*time.Second)
	if a.TokensMillis == 0 || a.RequestsMillis != 0 || a.BlockedMillis != 0 {
		t.Errorf("refused %+v: want a wait for tokens alone", a)
	}
	// 70 tokens: the second and the excess of 30 are both needed gone.
	if a := b.admit(t, "p", lim, 70); a.Admitted || a.Wait() < 59*time.Second {
		t.Fatalf("70 tokens over 80 held: %+v, want a wait for both starts, nearly the minute", a)
	}

	// The first call used 10 tokens: 10 + 40 + 40 fit.
	if err := b.db.LLMStartSetTokens(b.ctx, first.StartID, 10); err != nil {
		t.Fatal(err)
	}
	if a := b.admit(t, "p", lim, 40); !a.Admitted {
		t.Fatalf("after the correction: %+v, want admitted", a)
	}
	if _, tok := b.llmCounts(t, "p"); tok != 90 {
		t.Errorf("%d tokens counted, want 90", tok)
	}
	// The first leaves the window; a late correction of it changes nothing.
	b.age(t, "p", 41*time.Second)
	if a := b.admit(t, "p", lim, 10); !a.Admitted {
		t.Fatalf("%+v, want admitted once the first start left", a)
	}
	if err := b.db.LLMStartSetTokens(b.ctx, first.StartID, 1000); err != nil {
		t.Fatal(err)
	}
	if _, tok := b.llmCounts(t, "p"); tok != 90 {
		t.Errorf("%d tokens counted, want 90 (40 + 40 + 10)", tok)
	}
}

// TestLLMLimitBlock: a block holds back every admission to its provider until it ends, a
// shorter one does not shorten it, and other providers go on.
func TestLLMLimitBlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.db.LLMLimitBlock(b.ctx, "p", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.db.LLMLimitBlock(b.ctx, "p", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	a := b.admit(t, "p", minute, 0)
	if a.Admitted {
		t.Fatal("admitted while blocked")
	}
	for provider, want := range map[string]time.Duration{"p": 30 * time.Second, "q": 0} {
		d, err := b.db.LLMBlockedFor(b.ctx, provider)
		if err != nil {
			t.Fatal(err)
		}
		within(t, "block read of "+provider, d, max(0, want-time.Second), want)
	}
	within(t, "wait of a blocked provider", a.Wait(), 29*time.Second, 30*time.Second)
	if a.BlockedMillis == 0 || a.RequestsMillis != 0 || a.TokensMillis != 0 {
		t.Errorf("refused %+v: want a wait for the block alone", a)
	}
	if a := b.admit(t, "q", minute, 0); !a.Admitted {
		t.Error("provider q held back by p's block")
	}
	if _, err := b.db.SQL().Exec(`UPDATE llm_limit SET blocked_until = statement_timestamp() - interval '1 ms' WHERE provider = 'p'`); err != nil {
		t.Fatal(err)
	}
	if a := b.admit(t, "p", minute, 0); !a.Admitted {
		t.Errorf("%+v, want admitted once the block has passed", a)
	}
	if d, err := b.db.LLMBlockedFor(b.ctx, "p"); err != nil || d != 0 {
		t.Errorf("block read once it has passed: %v, %v; want 0", d, err)
	}
}

// TestLLMAdmitConcurrent: many callers at once, as many workers' calls are, admit exactly the
// limit, while corrections run beside them; the counts stay those of the log.
func TestLLMAdmitConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lim := dao.LLMLimits{Requests: 25, Tokens: 1_000_000, Window: time.Minute}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10 {
				a, err := b.db.LLMAdmitIfUnderLimits(b.ctx, "p", lim, 100)
				if err != nil {
					t.Error(err)
					return
				}
				if a.Admitted {
					admitted.Add(1)
					if err := b.db.LLMStartSetTokens(b.ctx, a.StartID, 7); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 25 {
		t.Errorf("%d of 160 concurrent requests admitted, want the limit, 25", n)
	}
	if req, tok := b.llmCounts(t, "p"); req != 25 || tok != 25*7 {
		t.Errorf("counted %d requests, %d tokens; want 25, %d", req, tok, 25*7)
	}
}

// TestLLMAdmitDeletesInBatches: a log left long unread (a provider idle for a while) is
// deleted a batch per admission; an admission the leftovers refuse waits for nothing.
func TestLLMAdmitDeletesInBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.db.SQL().Exec(`
		INSERT INTO llm_start (provider, started_at, tokens)
		SELECT 'p', now() - interval '1 hour' + n * interval '1 ms', 1 FROM generate_series(1, 2500) n;
		INSERT INTO llm_limit (provider, requests, tokens) VALUES ('p', 2500, 2500)`); err != nil {
		t.Fatal(err)
	}
	lim := dao.LLMLimits{Requests: 400, Window: time.Minute}
	for i, wantLeft := range []int{1500, 500} {
		a := b.admit(t, "p", lim, 0)
		if a.Admitted || a.Wait() != 0 {
			t.Fatalf("admission %d with %d expired starts left: %+v, want refused with no wait", i+1, wantLeft, a)
		}
		if n, _ := b.llmCounts(t, "p"); n != wantLeft {
			t.Fatalf("after admission %d: %d starts left, want %d", i+1, n, wantLeft)
		}
	}
	if a := b.admit(t, "p", lim, 0); !a.Admitted {
		t.Fatalf("%+v, want admitted once the old starts are gone", a)
	}
	if n, _ := b.llmCounts(t, "p"); n != 1 {
		t.Errorf("%d starts in the log, want the one just admitted", n)
	}
}
