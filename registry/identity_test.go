package registry

import (
	"encoding/json"
	"sort"
	"testing"
	"time"
)

func TestIdentityRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host  string
		port  int
		start time.Time
		want  string
	}{
		{"10.0.0.5", 5680, time.UnixMilli(1763802000123), "10.0.0.5:5680_1763802000123"},
		{"worker-3.example.com", 1234, time.UnixMilli(1), "worker-3.example.com:1234_1"},
		{"::1", 5680, time.UnixMilli(1763802000123), "::1:5680_1763802000123"},
		{"host_with_underscore", 0, time.UnixMilli(42), "host_with_underscore:0_42"},
	}
	for _, tt := range tests {
		got := Identity(tt.host, tt.port, tt.start)
		if got != tt.want {
			t.Errorf("Identity(%q, %d, %v) = %q, want %q", tt.host, tt.port, tt.start, got, tt.want)
		}
		host, port, start, err := ParseIdentity(got)
		if err != nil || host != tt.host || port != tt.port || !start.Equal(tt.start) {
			t.Errorf("ParseIdentity(%q) = %q, %d, %v, %v; want %q, %d, %v, nil", got, host, port, start, err, tt.host, tt.port, tt.start)
		}
	}
}

func TestIdentityDropsSubMillisecond(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	_, _, got, err := ParseIdentity(Identity("h", 1, start))
	if want := start.Truncate(time.Millisecond); err != nil || !got.Equal(want) {
		t.Fatalf("start = %v, %v; want %v", got, err, want)
	}
}

func TestParseIdentityRejects(t *testing.T) {
	t.Parallel()
	for _, id := range []string{
		"", "10.0.0.5:5680", "10.0.0.5_1763802000123", ":5680_1763802000123",
		"10.0.0.5:port_1763802000123", "10.0.0.5:70000_1763802000123", "10.0.0.5:5680_soon", "10.0.0.5:5680_-5",
	} {
		if h, p, s, err := ParseIdentity(id); err == nil {
			t.Errorf("ParseIdentity(%q) = %q, %d, %v, nil; want an error", id, h, p, s)
		}
	}
}

// jsonKeys returns the sorted keys of a JSON object.
func jsonKeys(t *testing.T, data []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, data)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestFenceRecordJSONFields(t *testing.T) {
	t.Parallel()
	done := time.Now()
	data, err := json.Marshal(FenceRecord{ID: "a:1_2", Role: RoleWorker, FinishedAt: &done, Phase: PhaseFinished})
	if err != nil {
		t.Fatal(err)
	}
	got := jsonKeys(t, data)
	want := []string{"fencedAt", "finishedAt", "id", "leader", "lostAt", "phase", "role", "tasksRequeued", "workflowsReleased"}
	if !equalStrings(got, want) {
		t.Fatalf("FenceRecord JSON keys = %v, want %v", got, want)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
