package dao_test

import (
	"context"
	"slices"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestClusterSettings: the workers' providers are read as one list, each name once; a
// worker's row is replaced by its next start; the masters' tracing reads back; with no row,
// ok says so, and the command line falls back to its own config.
func TestClusterSettings(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	if _, ok, err := db.SettingProviders(ctx); err != nil || ok {
		t.Fatalf("SettingProviders on an empty table = ok %v, %v; want none", ok, err)
	}
	if _, ok, err := db.SettingTracingGet(ctx); err != nil || ok {
		t.Fatalf("SettingTracingGet on an empty table = ok %v, %v; want none", ok, err)
	}
	for name, providers := range map[string][]string{"h1:5679": {"main", "demo"}, "h2:5679": {"local", "main"}} {
		if err := db.SettingPut(ctx, dao.SettingProvidersPrefix+name, providers); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SettingPut(ctx, dao.SettingProvidersPrefix+"h2:5679", []string{"main"}); err != nil {
		t.Fatal(err)
	}
	names, ok, err := db.SettingProviders(ctx)
	if err != nil || !ok || !slices.Equal(names, []string{"demo", "main"}) {
		t.Errorf("SettingProviders = %v, %v, %v; want demo and main (h2 restarted without local)", names, ok, err)
	}
	if err := db.SettingPut(ctx, dao.SettingTracing, dao.TracingSetting{SampleRatio: 0.25}); err != nil {
		t.Fatal(err)
	}
	if tr, ok, err := db.SettingTracingGet(ctx); err != nil || !ok || tr.SampleRatio != 0.25 {
		t.Errorf("SettingTracingGet = %+v, %v, %v; want 0.25", tr, ok, err)
	}
	if err := db.PoolSetLimits(ctx, map[string]int{"openai": 4}); err != nil {
		t.Fatal(err)
	}
	if pools, ok, err := db.PoolNamesLimited(ctx); err != nil || !ok || !slices.Equal(pools, []string{"openai"}) {
		t.Errorf("PoolNamesLimited = %v, %v, %v; want openai", pools, ok, err)
	}
}
