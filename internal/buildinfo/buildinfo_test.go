package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestGet(t *testing.T) {
	t.Parallel()
	vcs := &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-28T21:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	tests := []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  Info
	}{
		{"release", "1.2.0", "fedcba9876543210fedcba9876543210fedcba98", "2026-11-01T10:00:00Z", vcs,
			Info{"1.2.0", "fedcba9876543210fedcba9876543210fedcba98", "2026-11-01T10:00:00Z", "go1.26.8"}},
		{"go build in a checkout", "", "", "", vcs,
			Info{"dev", "0123456789abcdef0123456789abcdef01234567+dirty", "2026-11-28T21:00:00Z", "go1.26.8"}},
		{"go build without vcs", "", "", "", &debug.BuildInfo{GoVersion: "go1.26.8"},
			Info{"dev", "unknown", "unknown", "go1.26.8"}},
	}
	for _, tt := range tests {
		if got := get(tt.version, tt.commit, tt.date, tt.bi); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
