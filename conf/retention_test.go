package conf_test

import (
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/internal/testenv"
)

const day = 24 * time.Hour

func TestRetentionDefaults(t *testing.T) {
	t.Parallel()
	got := conf.Defaults().Retention
	want := conf.Retention{Instances: 30 * day, Logs: 7 * day, FailoverEvents: 90 * day, Fires: 30 * day, AssetEvents: 30 * day,
		Audit: 0, Interval: time.Minute, BatchSize: 500}
	if got != want {
		t.Errorf("Defaults().Retention = %+v, want %+v", got, want)
	}
}

// TestRetentionTakesDays: the periods are written in days, with or without a rest, in the
// file and the environment; seconds serve tests.
func TestRetentionTakesDays(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "retention:\n  instances: 45d\n  logs: 1d12h\n  fires: 90s\n  asset-events: 12h\n  audit: 365d\n  interval: 5s\n  batch-size: 50\n")
	got, err := conf.Load(path, []string{"ZKSCHED_RETENTION_FAILOVER_EVENTS=2d"})
	if err != nil {
		t.Fatal(err)
	}
	want := conf.Retention{Instances: 45 * day, Logs: 36 * time.Hour, FailoverEvents: 2 * day, Fires: 90 * time.Second,
		AssetEvents: 12 * time.Hour, Audit: 365 * day, Interval: 5 * time.Second, BatchSize: 50}
	if got.Retention != want {
		t.Errorf("Retention = %+v, want %+v", got.Retention, want)
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"30d", 30 * day, ""},
		{"0d", 0, ""},
		{"1d12h30m", 36*time.Hour + 30*time.Minute, ""},
		{"-2d", -2 * day, ""},
		{"1m", time.Minute, ""},
		{"1.5h", 90 * time.Minute, ""},
		{"0", 0, ""},
		{"d", 0, `invalid duration "d"`},
		{"1.5d", 0, `invalid duration "1.5d"`},
		{"3 days", 0, `invalid duration "3 days"`},
		{"1d-1h", 0, `invalid duration "1d-1h"`},
		{"1dx", 0, `invalid duration "1dx"`},
		{"7", 0, `invalid duration "7"`},
		{"1d1d", 0, `invalid duration "1d1d"`},
		{"200000d", 0, `duration "200000d" out of range`},
		{"106751d24h", 0, `duration "106751d24h" out of range`},
		{"99999999999999999999d", 0, `duration "99999999999999999999d" out of range`},
	} {
		got, err := conf.ParseDuration(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || err.Error() != tt.err):
			t.Errorf("ParseDuration(%q) = %v, %v; want the error %q", tt.in, got, err, tt.err)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[time.Duration]string{30 * day: "30d", 36 * time.Hour: "36h0m0s", 90 * time.Second: "1m30s", 0: "0s"} {
		if got := conf.FormatDuration(in); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestRetentionRejects(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		yaml   string
		change func(c *conf.Config)
		want   string
	}{
		{name: "bad duration in file", yaml: "retention:\n  instances: 30 days\n",
			want: `zksched.yaml:2: retention.instances: invalid duration "30 days"`},
		{name: "fractional days", yaml: "retention:\n  logs: 0.5d\n", want: `retention.logs: invalid duration "0.5d"`},
		{name: "days out of range", yaml: "retention:\n  audit: 1000000d\n", want: `retention.audit: duration "1000000d" out of range`},
		{name: "negative period", change: func(c *conf.Config) { c.Retention.Fires = -time.Hour },
			want: "conf: retention.fires: -1h0m0s: must not be negative"},
		{name: "logs longer than instances", change: func(c *conf.Config) { c.Retention.Logs = 31 * day },
			want: "conf: retention.logs: 31d is longer than retention.instances (30d): a purged instance takes its logs with it"},
		{name: "zero interval", change: func(c *conf.Config) { c.Retention.Interval = 0 }, want: "conf: retention.interval: 0s: must be positive"},
		{name: "zero batch", change: func(c *conf.Config) { c.Retention.BatchSize = 0 }, want: "conf: retention.batch-size: 0 is out of range 1..100000"},
		{name: "huge batch", change: func(c *conf.Config) { c.Retention.BatchSize = 100001 }, want: "conf: retention.batch-size: 100001 is out of range 1..100000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var err error
			if tt.yaml != "" {
				_, err = conf.Load(writeConfig(t, tt.yaml), nil)
			} else {
				c := conf.Defaults()
				tt.change(&c)
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// Kept for ever, instances may have logs of any period, and logs may be kept as long as
	// their instances.
	for _, r := range []conf.Retention{{Instances: 0, Logs: 400 * day}, {Instances: 7 * day, Logs: 0}, {Instances: 7 * day, Logs: 7 * day}} {
		c := conf.Defaults()
		c.Retention.Instances, c.Retention.Logs = r.Instances, r.Logs
		if err := c.Validate(); err != nil {
			t.Errorf("instances %v, logs %v: %v; want valid", r.Instances, r.Logs, err)
		}
	}
}

// TestDocsRetention: docs/retention.md shows the defaults, loads as it is printed, and its
// environment example works.
func TestDocsRetention(t *testing.T) {
	t.Parallel()
	section := testenv.DocSection(t, "docs/retention.md", "Retention")
	block := testenv.DocBlock(t, "docs/retention.md", "Retention", "yaml", 1)
	got, err := conf.Load(writeConfig(t, block), nil)
	if err != nil {
		t.Fatalf("docs/retention.md's block: %v", err)
	}
	if want := conf.Defaults().Retention; got.Retention != want {
		t.Errorf("docs/retention.md's block loads as %+v, want the defaults %+v", got.Retention, want)
	}
	const env = "ZKSCHED_RETENTION_INSTANCES=14d"
	if !strings.Contains(section, env) {
		t.Fatalf("docs/retention.md lacks %s", env)
	}
	got, err = conf.Load("", []string{env})
	if err != nil || got.Retention.Instances != 14*day {
		t.Errorf("%s: instances %v, %v; want 14 days", env, got.Retention.Instances, err)
	}
}
