package master

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
)

// SetNotifyDefault stores rules as the default notify rules (those of the workflows without
// their own and of the cluster's events), retrying with a backoff from 1 s up to 30 s until
// it succeeds or ctx ends, as SetPoolLimits does and for the same reason. It returns nil
// either way.
func SetNotifyDefault(ctx context.Context, db *dao.DB, rules []dao.NotifyRule, log zerolog.Logger) error {
	wait := time.Second
	for {
		err := db.Tx(ctx, func(q *dao.Queries) error { return q.NotifyDefaultReplace(ctx, rules) })
		if err == nil {
			log.Info().Int("rules", len(rules)).Msg("default notify rules set")
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Warn().Err(err).Dur("retry_in", wait).Msg("could not set the default notify rules; retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}
