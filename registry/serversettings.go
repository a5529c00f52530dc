package registry

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// serverSettings is what a ZooKeeper server tells of its timing settings through the conf
// four-letter word. A zero field was not reported: a standalone server has no syncLimit.
type serverSettings struct {
	TickTime          time.Duration
	SyncLimit         int
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
}

// errNotAllowed is a four-letter word the server's 4lw.commands.whitelist leaves out (by
// default only srvr is allowed).
var errNotAllowed = errors.New("not in the server's 4lw.commands.whitelist")

// readServerSettings asks the server at addr for its settings with the conf four-letter word.
func readServerSettings(tlsConfig *tls.Config, addr string, timeout time.Duration) (serverSettings, error) {
	conn, err := dialServer(tlsConfig, "tcp", addr, timeout, timeout)
	if err != nil {
		return serverSettings{}, fmt.Errorf("conf from %s: %w", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("conf")); err != nil {
		return serverSettings{}, fmt.Errorf("conf from %s: %w", addr, err)
	}
	var sc serverSettings
	lines := bufio.NewScanner(conn)
	for lines.Scan() {
		line := lines.Text()
		if strings.Contains(line, "not in the whitelist") {
			return serverSettings{}, fmt.Errorf("conf from %s: %w", addr, errNotAllowed)
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			continue
		}
		switch k {
		case "tickTime":
			sc.TickTime = time.Duration(n) * time.Millisecond
		case "syncLimit":
			sc.SyncLimit = n
		case "minSessionTimeout":
			sc.MinSessionTimeout = time.Duration(n) * time.Millisecond
		case "maxSessionTimeout":
			sc.MaxSessionTimeout = time.Duration(n) * time.Millisecond
		}
	}
	if err := lines.Err(); err != nil {
		return serverSettings{}, fmt.Errorf("conf from %s: %w", addr, err)
	}
	if sc.TickTime == 0 {
		return serverSettings{}, fmt.Errorf("conf from %s: no tickTime in the answer", addr)
	}
	return sc, nil
}

// minSessionTimeout is the shortest session timeout that rides out a frozen or lost leader
// of an ensemble: its followers give up on it after syncLimit × tickTime, then elect and sync
// a new one, which renews the sessions; until then nothing that goes through the leader (a
// write, a sync, the Client's probe) is answered. Twice the first part leaves room for the
// rest. Zero for a standalone server.
func (s serverSettings) minSessionTimeout() time.Duration {
	return 2 * time.Duration(s.SyncLimit) * s.TickTime
}

// checkServers reads every server's settings and warns about a session timeout that the
// ensemble cannot keep: one the servers changed, and one shorter than twice a leader's
// timeout (serverSettings.minSessionTimeout). A server that does not answer conf is skipped with a
// debug line: the check helps, it is not required.
func (c *Client) checkServers() {
	defer c.wg.Done()
	asked, granted := c.cfg.SessionTimeout, c.SessionTimeout()
	if granted != asked {
		c.log.Warn().Dur("session_timeout", asked).Dur("negotiated_session_timeout", granted).
			Msg("zookeeper granted another session timeout than registry.session-timeout; the node's watchdog uses the granted one")
	}
	confs := make([]serverSettings, len(c.cfg.Servers))
	errs := make([]error, len(c.cfg.Servers))
	var wg sync.WaitGroup
	for i, addr := range c.cfg.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			confs[i], errs[i] = readServerSettings(c.cfg.TLS, addr, 2*time.Second)
		}()
	}
	wg.Wait()
	var short []string // servers whose settings want a longer timeout
	var worst serverSettings
	for i, addr := range c.cfg.Servers {
		if errs[i] != nil {
			c.log.Debug().Err(errs[i]).Str("server", addr).Msg("cannot read the zookeeper server's settings; not checking the session timeout against them")
			continue
		}
		if want := confs[i].minSessionTimeout(); granted < want {
			short = append(short, addr)
			if want > worst.minSessionTimeout() {
				worst = confs[i]
			}
		}
	}
	if len(short) > 0 {
		c.log.Warn().Strs("servers", short).Dur("session_timeout", granted).Dur("tick_time", worst.TickTime).
			Int("sync_limit", worst.SyncLimit).Dur("want_at_least", worst.minSessionTimeout()).
			Msg("session timeout shorter than 2 × syncLimit × tickTime of the zookeeper servers: a frozen or lost zookeeper leader can expire every session; raise registry.session-timeout")
	}
	c.log.Debug().Int("servers", len(c.cfg.Servers)).Msg("checked the session timeout against the zookeeper servers' settings")
}
