package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pgBin is where Debian's PostgreSQL 15 keeps its programs.
const pgBin = "/usr/lib/postgresql/15/bin"

// PGServer is a PostgreSQL cluster of the test's own, which it may stop and start again: the
// shared server serves the other tests. It is stopped when the test ends, and the end of its
// log is printed if the test failed.
type PGServer struct {
	t    testing.TB
	Dir  string
	Port int
	// DSN connects as the superuser postgres to the database postgres.
	DSN string
}

// NewPGServer creates a cluster (initdb) and starts it on a free port of 127.0.0.1.
func NewPGServer(t testing.TB) *PGServer {
	t.Helper()
	// PostgreSQL runs as the postgres user, who cannot enter the test's own temporary
	// directories: this one is theirs.
	dir, err := os.MkdirTemp("", "zksched-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Getuid() == 0 {
		if out, err := exec.Command("chown", "postgres:", dir).CombinedOutput(); err != nil {
			t.Fatalf("testenv: chown %s: %v\n%s", dir, err, out)
		}
	}
	ports, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	port := ports[0]
	p := &PGServer{t: t, Dir: dir, Port: port,
		DSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	if err := runAsPostgres(filepath.Join(pgBin, "initdb"), "-D", p.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		_ = runAsPostgres(filepath.Join(pgBin, "pg_ctl"), "-D", p.data(), "-m", "immediate", "-w", "stop")
		if t.Failed() {
			out, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			lines := strings.Split(string(out), "\n")
			t.Logf("==== private postgresql ====\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	if err := p.Start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return p
}

func (p *PGServer) data() string { return filepath.Join(p.Dir, "data") }

// Start starts the server and waits until it accepts connections.
func (p *PGServer) Start() error {
	return runAsPostgres(filepath.Join(pgBin, "pg_ctl"), "-D", p.data(), "-l", filepath.Join(p.Dir, "postgres.log"),
		"-o", fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c max_connections=200", p.Port, p.Dir),
		"-w", "-t", "60", "start")
}

// Stop stops the server as a crash would: no checkpoint, recovery at the next start.
func (p *PGServer) Stop() error {
	return runAsPostgres(filepath.Join(pgBin, "pg_ctl"), "-D", p.data(), "-m", "immediate", "-w", "stop")
}

// runAsPostgres runs a PostgreSQL program as the postgres user (it refuses to run as root).
func runAsPostgres(args ...string) error {
	if os.Getuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %w\n%s", args, err, out)
	}
	return nil
}
