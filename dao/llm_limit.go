package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// The cluster-wide limits of model providers (migration 00024): every request a worker sends
// to a provider with requests-per-minute or tokens-per-minute is admitted first by
// LLMAdmitIfUnderLimits, against the starts of every worker in the window; a 429's
// Retry-After blocks the provider for all of them (LLMLimitBlock); a call's actual usage
// replaces its reservation (LLMStartSetTokens).

// LLMLimits are a provider's limits over one window; zero means none.
type LLMLimits struct {
	Requests int
	Tokens   int
	// Window is the period the limits hold over: a minute, plus the margin the caller keeps
	// for the time between an admission and the request's arrival at the provider.
	Window time.Duration
}

// LLMAdmission is the answer to a request for admission.
type LLMAdmission struct {
	// Admitted says the request may be sent now; its start is counted.
	Admitted bool `db:"admitted"`
	// StartID is the admitted start's row, for LLMStartSetTokens; 0 when refused.
	StartID int64 `db:"start_id"`
	// What a refused request waits for, by the database's clock, 0 for what did not refuse
	// it: the provider's block to end, enough of the window's starts to leave it, enough of
	// their tokens to leave it. The last is an upper bound: the starts still in flight give
	// back what they reserved beyond their usage when they end.
	BlockedMillis  int64 `db:"blocked_ms"`
	RequestsMillis int64 `db:"requests_ms"`
	TokensMillis   int64 `db:"tokens_ms"`
}

// Wait is how long until a request refused could be admitted, as far as the database knows.
func (a LLMAdmission) Wait() time.Duration {
	return time.Duration(max(a.BlockedMillis, a.RequestsMillis, a.TokensMillis)) * time.Millisecond
}

// llmAdmitSQL admits a request to a provider if the provider is not blocked and the window
// has room for one more request and its tokens, and counts its start; otherwise it says how
// long to wait. The provider's llm_limit row is locked first; the provider's starts older
// than the window are deleted (at most 1000, none another statement holds) and taken off its
// counts. statement_timestamp() is the one clock: the start is stamped with it, which is no
// later than the moment the lock was granted, so a start is counted from the moment its
// worker asked at the latest (the caller's margin covers the rest).
//
// The wait of a full window is until the oldest starts whose departure makes room have left
// it (each limit's apart): the (requests - limit + 1)-th oldest, or the first at which the oldest starts' tokens
// add up to the excess. A start admitted while this statement waited for the lock is not in
// its snapshot; when it is one of those the room depends on, the wait is the whole window.
//
// $1 provider, $2 requests in the window (0: no limit), $3 tokens in the window (0: no limit),
// $4 the tokens the request reserves, $5 the window in milliseconds.
const llmAdmitSQL = `
WITH locked AS MATERIALIZED (
    SELECT provider, requests, tokens, blocked_until FROM llm_limit WHERE provider = $1::text FOR UPDATE
), expired AS (
    DELETE FROM llm_start s
    USING (SELECT id FROM llm_start
           WHERE provider = $1::text AND started_at <= statement_timestamp() - $5::bigint * interval '1 millisecond'
           ORDER BY provider, started_at LIMIT 1000
           FOR UPDATE SKIP LOCKED) old
    WHERE s.id = old.id
    RETURNING s.id, s.tokens
), decision AS (
    SELECT l.provider, l.blocked_until, g.requests AS left_window,
           l.requests - g.requests AS requests, l.tokens - g.tokens AS tokens,
           (l.blocked_until IS NULL OR l.blocked_until <= statement_timestamp())
               AND ($2::integer = 0 OR l.requests - g.requests < $2::integer)
               AND ($3::bigint = 0 OR l.tokens - g.tokens + $4::integer <= $3::bigint) AS admitted
    FROM locked l,
         (SELECT count(*)::integer AS requests, coalesce(sum(tokens), 0)::bigint AS tokens FROM expired) g
), counted AS (
    UPDATE llm_limit l
    SET requests = d.requests + CASE WHEN d.admitted THEN 1 ELSE 0 END,
        tokens = d.tokens + CASE WHEN d.admitted THEN $4::integer ELSE 0 END
    FROM decision d
    WHERE l.provider = d.provider AND (d.admitted OR d.left_window > 0)
), started AS (
    INSERT INTO llm_start (provider, started_at, tokens)
    SELECT provider, statement_timestamp(), $4::integer FROM decision WHERE admitted
    RETURNING id
), present AS (
    SELECT started_at, row_number() OVER w AS n, sum(tokens) OVER w AS tokens_before
    FROM llm_start
    WHERE provider = $1::text AND id NOT IN (SELECT id FROM expired)
    WINDOW w AS (ORDER BY started_at, id)
)
SELECT d.admitted, coalesce((SELECT id FROM started), 0) AS start_id,
       CASE WHEN NOT d.admitted AND d.blocked_until > statement_timestamp()
           THEN ceil(extract(epoch FROM d.blocked_until - statement_timestamp()) * 1000) ELSE 0 END AS blocked_ms,
       CASE WHEN NOT d.admitted AND $2::integer > 0 AND d.requests >= $2::integer THEN greatest(0, ceil(coalesce(
           (SELECT extract(epoch FROM p.started_at - statement_timestamp()) * 1000 + $5::bigint FROM present p
            WHERE p.n >= d.requests - $2::integer + 1 ORDER BY p.n LIMIT 1), $5::bigint))) ELSE 0 END AS requests_ms,
       CASE WHEN NOT d.admitted AND $3::bigint > 0 AND d.tokens + $4::integer > $3::bigint THEN greatest(0, ceil(coalesce(
           (SELECT extract(epoch FROM p.started_at - statement_timestamp()) * 1000 + $5::bigint FROM present p
            WHERE p.tokens_before >= d.tokens + $4::integer - $3::bigint ORDER BY p.n LIMIT 1), $5::bigint))) ELSE 0 END AS tokens_ms
FROM decision d`

// LLMAdmitIfUnderLimits asks for the admission of one request of tokens tokens to provider
// under limits: admitted and counted, or refused with the time to wait. It is one statement,
// run outside any transaction: the provider's row lock is held only while it runs.
func (db *DB) LLMAdmitIfUnderLimits(ctx context.Context, provider string, limits LLMLimits, tokens int) (LLMAdmission, error) {
	var a LLMAdmission
	args := []any{provider, limits.Requests, limits.Tokens, tokens, limits.Window.Milliseconds()}
	err := getHot(ctx, db.Queries, &a, llmAdmitSQL, args...)
	if errors.Is(err, sql.ErrNoRows) {
		// The provider's first admission: its row is made, then asked again.
		if _, err = db.q.ExecContext(ctx, `INSERT INTO llm_limit (provider) VALUES ($1) ON CONFLICT DO NOTHING`, provider); err == nil {
			err = getHot(ctx, db.Queries, &a, llmAdmitSQL, args...)
		}
	}
	if err != nil {
		return LLMAdmission{}, fmt.Errorf("admit a request to provider %q: %w", provider, err)
	}
	return a, nil
}

// LLMStartSetTokens replaces the tokens an admitted start reserved by those its call used,
// in the log and in its provider's count. A start that has left the window already is not
// there any more, and nothing changes. It commits without waiting for the disk: a correction
// that a crash of the database loses leaves the reservation, a window only fuller than it
// need be, and every model call of a provider with tokens-per-minute waits for it.
func (db *DB) LLMStartSetTokens(ctx context.Context, startID int64, tokens int) error {
	_, err := db.q.ExecContext(ctx, `
		WITH async_commit AS (
			SELECT set_config('synchronous_commit', 'off', true)
		), corrected AS (
			UPDATE llm_start s SET tokens = $2
			FROM (SELECT id, tokens FROM llm_start WHERE id = $1 FOR UPDATE) reserved
			WHERE s.id = reserved.id
			RETURNING s.provider, $2 - reserved.tokens AS delta
		)
		UPDATE llm_limit l SET tokens = l.tokens + c.delta
		FROM corrected c, async_commit WHERE l.provider = c.provider AND c.delta <> 0`, startID, tokens)
	if err != nil {
		return fmt.Errorf("set the tokens of model request %d: %w", startID, err)
	}
	return nil
}

// LLMLimitBlock holds back every admission to provider for d from now by the database's
// clock, or longer if it is blocked longer already: the provider answered 429 with
// Retry-After.
func (db *DB) LLMLimitBlock(ctx context.Context, provider string, d time.Duration) error {
	_, err := db.q.ExecContext(ctx, `
		INSERT INTO llm_limit AS l (provider, blocked_until)
		VALUES ($1, statement_timestamp() + $2 * interval '1 millisecond')
		ON CONFLICT (provider) DO UPDATE SET blocked_until = greatest(l.blocked_until, EXCLUDED.blocked_until)`,
		provider, d.Milliseconds())
	if err != nil {
		return fmt.Errorf("block provider %q for %v: %w", provider, d, err)
	}
	return nil
}

// LLMBlockedFor is how long provider is still held back by a 429's Retry-After, by the
// database's clock; 0 when it is not. It reads the provider's row without locking it: what
// the requests of a provider without limits ask before they are sent.
func (db *DB) LLMBlockedFor(ctx context.Context, provider string) (time.Duration, error) {
	var ms int64
	err := sqlx.GetContext(ctx, db.q, &ms, `
		SELECT ceil(extract(epoch FROM blocked_until - statement_timestamp()) * 1000)::bigint
		FROM llm_limit WHERE provider = $1 AND blocked_until > statement_timestamp()`, provider)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read whether provider %q is held back: %w", provider, err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
