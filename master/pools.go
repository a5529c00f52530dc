package master

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/retry"
)

// SetPoolLimits stores limits (pool name → limit) as the pool limits every worker's claims
// obey, retrying with a backoff from 1 s up to 30 s until it succeeds or ctx ends: the schema
// may not be migrated yet when the master starts. It returns nil either way: a master without
// its pool limits set goes on, with the limits stored before.
func SetPoolLimits(ctx context.Context, db *dao.DB, limits map[string]int, log zerolog.Logger) error {
	err := retry.Do(ctx, clockwork.NewRealClock(), startupRetry, func(ctx context.Context) error {
		return db.PoolSetLimits(ctx, limits)
	}, func(err error, _ int, wait time.Duration) {
		log.Warn().Err(err).Dur("retry_in", wait).Msg("could not set the pool limits; retrying")
	})
	if err == nil {
		log.Info().Interface("pools", limits).Msg("pool limits set")
	}
	return nil
}

// startupRetry is the backoff of the master's writes at start-up (SetPoolLimits,
// SetNotifyDefault): 1 s doubling up to 30 s.
var startupRetry = retry.Policy{Initial: time.Second, Max: 30 * time.Second}
