package registry

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/zksched/zksched/internal/testenv"
)

// has reports whether a log line so far contains substr.
func (s *logSink) has(substr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(s.buf.String(), substr)
}

const shortTimeoutWarning = "session timeout shorter than 2 × syncLimit × tickTime"

// With ZooKeeper's sample timings (tickTime 2 s, syncLimit 5) a frozen leader is given up
// after 10 s: a 10 s session does not survive that, and the client says so when it starts.
func TestWarnsOfSessionTimeoutShorterThanTheEnsembleAllows(t *testing.T) {
	t.Parallel()
	ens := testenv.NewZKEnsemble(t, 3, testenv.ZKEnsembleOptions{
		TickTime: 2 * time.Second, InitLimit: 10, SyncLimit: 5,
		MinSessionTimeout: 4 * time.Second, MaxSessionTimeout: 40 * time.Second,
	})
	got, err := readServerSettings(nil, ens.Addr(0), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := serverSettings{TickTime: 2 * time.Second, SyncLimit: 5, MinSessionTimeout: 4 * time.Second, MaxSessionTimeout: 40 * time.Second}
	if got != want {
		t.Fatalf("readServerSettings = %+v, want %+v", got, want)
	}

	tests := []struct {
		ask               time.Duration
		tooShort, changed bool
	}{
		{10 * time.Second, true, false},
		{20 * time.Second, false, false},
		{time.Second, true, true}, // raised to the servers' minimum, 4 s
	}
	for _, tt := range tests {
		t.Run(tt.ask.String(), func(t *testing.T) {
			t.Parallel()
			log := newLogSink(t)
			b := &testBundle{log: log, zk: testenv.ZK{Servers: ens.Servers(), Root: "/zksched"}}
			cfg := b.config()
			cfg.SessionTimeout = tt.ask
			b.dial(t, cfg)
			log.waitFor(t, "checked the session timeout against the zookeeper servers' settings", 10*time.Second)
			if got := log.has(shortTimeoutWarning) && log.has(`"want_at_least":20000`); got != tt.tooShort {
				t.Errorf("session timeout %v: warned of a too short timeout = %v, want %v", tt.ask, got, tt.tooShort)
			}
			if got := log.has("zookeeper granted another session timeout"); got != tt.changed {
				t.Errorf("session timeout %v: warned of a changed timeout = %v, want %v", tt.ask, got, tt.changed)
			}
		})
	}
}

// A server that does not allow conf (by default only srvr is) is skipped without a warning.
func TestServerSettingsRefusedQuietly(t *testing.T) {
	t.Parallel()
	ens := testenv.NewZKEnsemble(t, 1, testenv.ZKEnsembleOptions{FourLetterWords: "srvr"})
	if _, err := readServerSettings(nil, ens.Addr(0), 2*time.Second); !errors.Is(err, errNotAllowed) {
		t.Fatalf("readServerSettings = %v, want %v", err, errNotAllowed)
	}
	log := newLogSink(t)
	b := &testBundle{log: log, zk: testenv.ZK{Servers: ens.Servers(), Root: "/zksched"}}
	cfg := b.config()
	cfg.Logger = zerolog.New(log).Level(zerolog.DebugLevel)
	b.dial(t, cfg)
	log.waitFor(t, "checked the session timeout against the zookeeper servers' settings", 10*time.Second)
	if !log.has("cannot read the zookeeper server's settings") {
		t.Errorf("no debug line about the refused conf")
	}
	if log.has(`"level":"warn"`) {
		t.Errorf("a warning about a server that refused conf")
	}
}
