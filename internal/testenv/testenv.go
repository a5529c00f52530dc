// Package testenv gives each test its own slice of the local ZooKeeper and PostgreSQL that
// bin/services.sh starts: a ZooKeeper root of its own and a PostgreSQL schema of its own, both
// removed when the test ends, so tests run in parallel and leave nothing behind.
//
// A missing server fails the test with a hint; it never skips. Point the tests elsewhere with
// ZKSCHED_TEST_ZK (host:port[,host:port…]) and ZKSCHED_TEST_DSN.
package testenv

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	_ "github.com/lib/pq" // the PostgreSQL driver
)

const hint = "start the local servers with bin/services.sh start"

// ZKServers returns the ZooKeeper servers the tests use.
func ZKServers() []string {
	if s := os.Getenv("ZKSCHED_TEST_ZK"); s != "" {
		return strings.Split(s, ",")
	}
	return []string{"127.0.0.1:2181"}
}

// BaseDSN returns the DSN of the database the tests make their schemas in: ZKSCHED_TEST_DSN,
// else the database zksched of bin/services.sh (on ZKSCHED_PG_PORT, default 5432) with the
// password that script keeps in its run folder (ZKSCHED_RUN_DIR, default .run/ of this
// checkout), as `bin/services.sh env` gives it.
func BaseDSN() string {
	if s := os.Getenv("ZKSCHED_TEST_DSN"); s != "" {
		return s
	}
	port := os.Getenv("ZKSCHED_PG_PORT")
	if port == "" {
		port = "5432"
	}
	u := url.URL{Scheme: "postgres", User: url.User("zksched"), Host: "127.0.0.1:" + port, Path: "/zksched", RawQuery: "sslmode=disable"}
	// Without the file the DSN has no password, and the server's refusal says what is wrong.
	if pw, err := os.ReadFile(filepath.Join(runDir(), "zksched-db-password")); err == nil {
		u.User = url.UserPassword("zksched", strings.TrimSpace(string(pw)))
	}
	return u.String()
}

// runDir is bin/services.sh's run folder: ZKSCHED_RUN_DIR, else .run/ at the top of the
// checkout this package was built from.
func runDir() string {
	if d := os.Getenv("ZKSCHED_RUN_DIR"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", ".run")
}

// Name returns a short random name with the given prefix, safe for znodes and SQL identifiers.
func Name(prefix string) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + hex.EncodeToString(b)
}

// ZK is a test's slice of ZooKeeper.
type ZK struct {
	Servers []string
	// Root is the test's own registry root, e.g. /zksched-test-3fa2c1d09b7e.
	Root string
}

// ZKUser and ZKPassword are the digest credential tests protect their ZooKeeper roots with
// (registry.auth-file); the cleanup of ZooKeeper authenticates with it.
const (
	ZKUser     = "zksched-test"
	ZKPassword = "test-secret-0f3a"
)

// ZKAuthFile writes ZKUser:ZKPassword to a file of the test's temporary directory, as
// registry.auth-file wants it, and returns its path.
func ZKAuthFile(t testing.TB) string {
	t.Helper()
	p := path.Join(t.TempDir(), "zk-auth")
	if err := os.WriteFile(p, []byte(ZKUser+":"+ZKPassword+"\n"), 0o600); err != nil {
		t.Fatalf("testenv: write %s: %v", p, err)
	}
	return p
}

// ZooKeeper gives the test a fresh ZooKeeper root, deleted with everything under it when the
// test ends.
func ZooKeeper(t testing.TB) ZK {
	t.Helper()
	root := "/" + Name("zksched-test-")
	conn := dialZK(t)
	if _, err := conn.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		conn.Close()
		t.Fatalf("testenv: create %s: %v", root, err)
	}
	conn.Close()
	t.Cleanup(func() {
		c := dialZK(t)
		defer c.Close()
		// A test may have protected its root with the test credentials.
		if err := c.AddAuth("digest", []byte(ZKUser+":"+ZKPassword)); err != nil {
			t.Errorf("testenv: authenticate to delete %s: %v", root, err)
		}
		if err := DeleteTree(c, root); err != nil {
			t.Errorf("testenv: delete %s: %v", root, err)
		}
	})
	return ZK{Servers: ZKServers(), Root: root}
}

// DialZK opens a ZooKeeper session for a test's own inspection and fails the test if there is
// none within 10 s. The connection is closed when the test ends.
func DialZK(t testing.TB) *zk.Conn {
	t.Helper()
	return DialZKServers(t, ZKServers())
}

// DialZKServers is DialZK to the given servers, such as a test's own ensemble.
func DialZKServers(t testing.TB, servers []string) *zk.Conn {
	t.Helper()
	c := dialZKServers(t, servers)
	t.Cleanup(c.Close)
	return c
}

func dialZK(t testing.TB) *zk.Conn {
	t.Helper()
	return dialZKServers(t, ZKServers())
}

func dialZKServers(t testing.TB, servers []string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(servers, 10*time.Second, zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatalf("testenv: zookeeper %v: %v (%s)", servers, err, hint)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() { // drain, so the library never blocks on a full channel
					for range events {
					}
				}()
				return conn
			}
		case <-deadline:
			conn.Close()
			t.Fatalf("testenv: no zookeeper session with %v within 10s (%s)", servers, hint)
		}
	}
}

// DeleteTree deletes p and everything below it; a missing p is not an error.
func DeleteTree(c *zk.Conn, p string) error {
	children, _, err := c.Children(p)
	if err == zk.ErrNoNode {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ch := range children {
		if err := DeleteTree(c, path.Join(p, ch)); err != nil {
			return err
		}
	}
	if err := c.Delete(p, -1); err != nil && err != zk.ErrNoNode {
		return err
	}
	return nil
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// PG is a test's slice of PostgreSQL.
type PG struct {
	// DSN connects to the test database with search_path set to Schema, so unqualified names
	// (and the migrations) land in the test's own schema.
	DSN    string
	Schema string
}

// Postgres gives the test a fresh, empty schema, dropped with everything in it when the test
// ends. The caller migrates it.
func Postgres(t testing.TB) PG {
	t.Helper()
	schema := Name("t_")
	admin := openAdmin(t)
	defer admin.Close()
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("testenv: create schema: %v", err)
	}
	t.Cleanup(func() {
		a := openAdmin(t)
		defer a.Close()
		if _, err := a.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("testenv: drop schema %s: %v", schema, err)
		}
	})
	return PG{DSN: WithSearchPath(BaseDSN(), schema), Schema: schema}
}

// WithSearchPath returns dsn with its search_path set to schema.
func WithSearchPath(dsn, schema string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(fmt.Sprintf("testenv: bad DSN %q: %v", dsn, err))
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func openAdmin(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", BaseDSN())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		t.Fatalf("testenv: postgresql %s: %v (%s)", BaseDSN(), err, hint)
	}
	return db
}
