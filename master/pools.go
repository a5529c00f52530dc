package master

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
)

// SetPoolLimits stores limits (pool name → limit) as the pool limits every worker's claims
// obey, retrying with a backoff from 1 s up to 30 s until it succeeds or ctx ends: the schema
// may not be migrated yet when the master starts. It returns nil either way: a master without
// its pool limits set goes on, with the limits stored before.
func SetPoolLimits(ctx context.Context, db *dao.DB, limits map[string]int, log zerolog.Logger) error {
	wait := time.Second
	for {
		err := db.PoolSetLimits(ctx, limits)
		if err == nil {
			log.Info().Interface("pools", limits).Msg("pool limits set")
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Warn().Err(err).Dur("retry_in", wait).Msg("could not set the pool limits; retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}
