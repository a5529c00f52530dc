package master

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
)

// SetPoolLimits stores limits (pool name → limit) as the pool limits every worker's claims
// obey, retrying with a backoff from 1 s up to 30 s until it succeeds or ctx ends: the schema
// may not be migrated yet when the master starts.
func SetPoolLimits(ctx context.Context, db *dao.DB, limits map[string]int, log zerolog.Logger) {
	wait := time.Second
	for {
		err := db.PoolSetLimits(ctx, limits)
		if err == nil {
			log.Info().Interface("pools", limits).Msg("pool limits set")
			return
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn().Err(err).Dur("retry_in", wait).Msg("could not set the pool limits; retrying")
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}
