// Package connpool opens dao's pools of connections to PostgreSQL: the pool the statements
// run on, which waits for the database to answer (Open), and the pools that connect at their
// first use, with run-time parameters of their own if need be (OpenLazy): the task claims'
// and the notifier's single connection.
package connpool

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/jonboulle/clockwork"
	"github.com/lib/pq"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/internal/retry"
)

// Options shape a pool.
type Options struct {
	// MaxConns bounds the pool's connections, open and idle.
	MaxConns int
	// IdleTime closes a connection idle this long; 0 keeps it.
	IdleTime time.Duration
	// Params are run-time parameters (key, value) that each connection sets as it connects.
	Params [][2]string
	// ReplyLimit, unless 0, is how long a statement sent may wait for the server's reply
	// before it fails and its connection is dropped (see replyDialer).
	ReplyLimit time.Duration
}

// Open opens a pool of connections to dsn and waits until PostgreSQL answers,
// retrying with a growing interval (1 s doubling to 30 s) and logging each failure, so a node
// started before its database comes up starts working once it does. It returns early only
// when ctx ends or dsn is malformed.
func Open(ctx context.Context, dsn string, o Options, log zerolog.Logger) (*sqlx.DB, error) {
	db, err := OpenLazy(dsn, o)
	if err != nil {
		return nil, err
	}
	var last error
	err = retry.Do(ctx, clockwork.NewRealClock(), openRetry, func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		last = db.PingContext(pctx)
		return last
	}, func(err error, attempt int, wait time.Duration) {
		log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", wait).Msg("postgresql not reachable, retrying")
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to postgresql: %w (last error: %v)", err, last)
	}
	return db, nil
}

// openRetry is Open's backoff: 1 s doubling up to 30 s.
var openRetry = retry.Policy{Initial: time.Second, Max: 30 * time.Second}

// OpenLazy opens a pool of connections to dsn, which connect at their first use.
func OpenLazy(dsn string, o Options) (*sqlx.DB, error) {
	dsn = WithConnectTimeout(dsn)
	dsn = WithReadWrite(dsn)
	for _, kv := range o.Params {
		dsn = withParam(dsn, kv[0], kv[1])
	}
	c, err := pq.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("database dsn: %w", err)
	}
	var db *sqlx.DB
	if o.ReplyLimit > 0 {
		c.Dialer(replyDialer{limit: o.ReplyLimit})
		db = sqlx.NewDb(sql.OpenDB(c), "postgres")
	} else if db, err = sqlx.Open("postgres", dsn); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db.SetMaxOpenConns(o.MaxConns)
	db.SetMaxIdleConns(o.MaxConns)
	db.SetConnMaxIdleTime(o.IdleTime)
	return db, nil
}

// withParam sets a run-time parameter in dsn (a URL or key=value pairs), which lib/pq sends
// to the server when it connects.
func withParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value
}

// WithConnectTimeout bounds connection establishment at 5 s unless the DSN says otherwise:
// without it lib/pq waits forever on a server that accepts TCP but never answers, and the
// retry loop of Open (and every reconnect) would hang with it. Open and OpenLazy apply it.
func WithConnectTimeout(dsn string) string {
	if strings.Contains(dsn, "connect_timeout") {
		return dsn
	}
	return withParam(dsn, "connect_timeout", "5")
}

// WithReadWrite makes a DSN that names several hosts connect only to one that takes writes
// (target_session_attrs=read-write), unless it says otherwise: lib/pq's default, any, would
// settle on the first host that answers, a standby as well, where every statement of a node
// fails. A DSN of one host is left as it is. Open and OpenLazy apply it.
func WithReadWrite(dsn string) string {
	if strings.Contains(dsn, "target_session_attrs") || !multiHost(dsn) {
		return dsn
	}
	return withParam(dsn, "target_session_attrs", "read-write")
}

// multiHost reports whether dsn names more than one host: a URL's host list, or host= (or
// hostaddr=) with commas in a key=value string.
func multiHost(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return strings.Contains(u.Host, ",") || strings.Contains(u.Query().Get("host"), ",")
	}
	for _, f := range strings.Fields(dsn) {
		k, v, _ := strings.Cut(f, "=")
		if (k == "host" || k == "hostaddr") && strings.Contains(v, ",") {
			return true
		}
	}
	return false
}
