package master

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/retry"
)

// SetNotifyDefault stores rules as the default notify rules (those of the workflows without
// their own and of the cluster's events), retrying with a backoff from 1 s up to 30 s until
// it succeeds or ctx ends, as SetPoolLimits does and for the same reason. It returns nil
// either way.
func SetNotifyDefault(ctx context.Context, db *dao.DB, rules []dao.NotifyRule, log zerolog.Logger) error {
	err := retry.Do(ctx, clockwork.NewRealClock(), startupRetry, func(ctx context.Context) error {
		return db.Tx(ctx, func(q *dao.Queries) error { return q.NotifyDefaultReplace(ctx, rules) })
	}, func(err error, _ int, wait time.Duration) {
		log.Warn().Err(err).Dur("retry_in", wait).Msg("could not set the default notify rules; retrying")
	})
	if err == nil {
		log.Info().Int("rules", len(rules)).Msg("default notify rules set")
	}
	return nil
}
