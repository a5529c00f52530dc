package e2e

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/soak"
)

var (
	soakDuration = flag.Duration("soak.duration", 0,
		"how long TestSoak's nemesis runs (default: $ZKSCHED_SOAK_DURATION, else 40s)")
	soakSeed   = flag.Int64("soak.seed", 0, "TestSoak's seed, to replay a schedule (default: $ZKSCHED_SOAK_SEED, else random)")
	soakDetail = flag.Bool("soak.detail", false, "TestSoak logs its fault log and node exits even when it passes")
	soakFaults = flag.String("soak.faults", "",
		"TestSoak's fault kinds, comma-separated (default: $ZKSCHED_SOAK_FAULTS, else all)")
)

// TestSoak is the randomized fault soak (internal/soak): a cluster of real processes under a
// seeded nemesis, judged by the history of what ran. It runs for 40 s by default, about
// a minute and a half with the setup and the drain; longer with -soak.duration or
// ZKSCHED_SOAK_DURATION. Its seed is logged first and with every failure:
// -soak.seed or ZKSCHED_SOAK_SEED replays the schedule.
//
// It does not run in parallel: the suite's parallel tests wait until it has ended, so its
// timing (2 s sessions on two cores) is not starved by theirs.
func TestSoak(t *testing.T) {
	// Seeds stay short to type; a billion of them is variety enough.
	cfg := soak.Config{Duration: 40 * time.Second, Seed: time.Now().UnixNano() % 1e9, Logf: t.Logf}
	if v := os.Getenv("ZKSCHED_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ZKSCHED_SOAK_DURATION=%q: %v", v, err)
		}
		cfg.Duration = d
	}
	if *soakDuration > 0 {
		cfg.Duration = *soakDuration
	}
	if v := os.Getenv("ZKSCHED_SOAK_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("ZKSCHED_SOAK_SEED=%q: %v", v, err)
		}
		cfg.Seed = s
	}
	if *soakSeed != 0 {
		cfg.Seed = *soakSeed
	}
	faults := os.Getenv("ZKSCHED_SOAK_FAULTS")
	if *soakFaults != "" {
		faults = *soakFaults
	}
	if faults != "" {
		cfg.Kinds = strings.Split(faults, ",")
	}
	cfg.Detail = *soakDetail
	t.Logf("soak: seed %d (replay with -soak.seed=%d or ZKSCHED_SOAK_SEED=%d)", cfg.Seed, cfg.Seed, cfg.Seed)
	res := soak.Run(t, cfg)
	t.Logf("%s", res)
	if res.Detail != "" {
		t.Logf("%s", res.Detail)
	}
	if len(res.Anomalies) > 0 {
		t.Errorf("soak: seed %d: %d anomal(ies); replay with -soak.seed=%d:\n%s", res.Seed, len(res.Anomalies), res.Seed,
			strings.Join(res.Anomalies, "\n"))
	}
}
