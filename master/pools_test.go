package master

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao/daotest"
)

func TestSetPoolLimitsStoresTheLimits(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	SetPoolLimits(ctx, db, map[string]int{"llm": 2, "idle": 5}, zerolog.Nop())
	pools, err := db.PoolList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, p := range pools {
		if p.MaxRunning != nil {
			got[p.Name] = *p.MaxRunning
		}
	}
	if got["llm"] != 2 || got["idle"] != 5 {
		t.Errorf("pool limits %v, want llm 2 and idle 5", got)
	}
}

func TestSetPoolLimitsStopsWithItsContext(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A failed write retries until ctx ends: with ctx already done it returns at once.
	SetPoolLimits(ctx, db, map[string]int{"llm": 2}, zerolog.Nop())
}
