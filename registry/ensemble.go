package registry

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Member is one server of the stores the cluster runs on, as `zksched zk nodes` and the
// Cluster page show it: a ZooKeeper server with its Mode (leader, follower, observer,
// standalone, or unreachable), or a PostgreSQL node with its Role (primary, standby, or
// unknown). Note says more of a PostgreSQL node (a synchronous standby); Error says why a
// server could not be read.
type Member struct {
	Address string `json:"address"`
	Mode    string `json:"mode,omitempty"`
	Role    string `json:"role,omitempty"`
	Note    string `json:"note,omitempty"`
	Error   string `json:"error,omitempty"`
}

// The modes of a ZooKeeper server a Member reports; ModeUnreachable is a server that did not
// answer srvr.
const (
	ModeLeader      = "leader"
	ModeFollower    = "follower"
	ModeUnreachable = "unreachable"
)

// serverModeTimeout bounds the srvr exchange with one server: the servers are asked at once,
// so a dead one costs this much of the whole view.
const serverModeTimeout = 2 * time.Second

// Ensemble asks each configured ZooKeeper server for its mode with the srvr four-letter word
// (allowed by every server's default whitelist), all at once; the servers are listed in the
// configured order. A server that does not answer is unreachable, with the error.
func (c *Client) Ensemble(ctx context.Context) []Member {
	return serverModes(ctx, c.cfg.TLS, c.cfg.Servers)
}

func serverModes(ctx context.Context, tlsConfig *tls.Config, servers []string) []Member {
	out := make([]Member, len(servers))
	var wg sync.WaitGroup
	for i, addr := range servers {
		wg.Go(func() {
			mode, err := serverMode(ctx, tlsConfig, addr)
			out[i] = Member{Address: addr, Mode: mode}
			if err != nil {
				out[i].Mode, out[i].Error = ModeUnreachable, err.Error()
			}
		})
	}
	wg.Wait()
	return out
}

// serverMode reads the Mode: line of the server's answer to srvr.
func serverMode(ctx context.Context, tlsConfig *tls.Config, addr string) (string, error) {
	timeout := serverModeTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	conn, err := dialServer(tlsConfig, "tcp", addr, timeout, timeout)
	if err != nil {
		return "", fmt.Errorf("srvr from %s: %w", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return "", fmt.Errorf("srvr from %s: %w", addr, err)
	}
	lines := bufio.NewScanner(conn)
	for lines.Scan() {
		line := lines.Text()
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(mode), nil
		}
		if strings.Contains(line, "not currently serving") {
			return "", fmt.Errorf("srvr from %s: not serving requests (no quorum)", addr)
		}
	}
	if err := lines.Err(); err != nil {
		return "", fmt.Errorf("srvr from %s: %w", addr, err)
	}
	return "", fmt.Errorf("srvr from %s: no Mode in the answer", addr)
}
