package soak

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// sensorTargets are the conditions soak-sense's sensors wait for, which the workload makes
// true: a file that appears once, at a time the workload draws, and the answer of an HTTP
// server on loopback, which says "ready" for a run's key once the workload has made that
// key ready. Each is recorded the moment before it turns true, so a sensor that succeeded
// earlier, or timed out when it had already been true, is seen (judgeSensors).
type sensorTargets struct {
	// file is the file sensor's path; the workers run on this host and see it.
	file string
	// url is the http sensor's address: a JSON object of the ready keys, each "ready".
	url string

	mu sync.Mutex
	// fileAt is when file was created; zero while it is not.
	fileAt time.Time
	// readyAt is when each key was made ready.
	readyAt map[string]time.Time
}

// newSensorTargets starts the HTTP server of the sensors, on loopback until the test ends,
// and picks the file's path in a temporary directory.
func newSensorTargets(t testing.TB) *sensorTargets {
	s := &sensorTargets{file: filepath.Join(t.TempDir(), "sensor-ready"), readyAt: map[string]time.Time{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		ready := make(map[string]string, len(s.readyAt))
		for k := range s.readyAt {
			ready[k] = "ready"
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ready)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/ready"
	return s
}

// createFile creates the file sensor's file, once.
func (s *sensorTargets) createFile() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.fileAt.IsZero() {
		return nil
	}
	s.fileAt = time.Now()
	return os.WriteFile(s.file, []byte("ready\n"), 0o644)
}

// makeReady makes key ready in the HTTP server's answers.
func (s *sensorTargets) makeReady(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.readyAt[key]; !ok {
		s.readyAt[key] = time.Now()
	}
}

// times returns when the file was created (zero if never) and when each key was made ready.
func (s *sensorTargets) times() (fileAt time.Time, readyAt map[string]time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	readyAt = make(map[string]time.Time, len(s.readyAt))
	for k, at := range s.readyAt {
		readyAt[k] = at
	}
	return s.fileAt, readyAt
}
