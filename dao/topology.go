package dao

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// PostgresNode is one PostgreSQL server of the cluster's database and its role.
type PostgresNode struct {
	Address string
	// Role is RolePrimary, RoleStandby or RoleUnknown.
	Role string
	// Note says more when there is more to say: a Patroni member's state when it is not
	// running, a standby's replication state, why the role is unknown.
	Note string
}

// The roles of a PostgresNode.
const (
	RolePrimary = "primary"
	RoleStandby = "standby"
	RoleUnknown = "unknown"
)

// PostgresNodes reads the PostgreSQL servers of the database and their roles: from Patroni's
// REST API when patroniURLs are given (the first that answers GET /cluster; db may then be
// nil), else from the server db reaches (see ReplicationNodes).
func PostgresNodes(ctx context.Context, db *DB, patroniURLs []string) ([]PostgresNode, error) {
	if len(patroniURLs) > 0 {
		return patroniMembers(ctx, patroniURLs)
	}
	return db.ReplicationNodes(ctx)
}

// ReplicationNodes reads the server the pool reaches (pg_is_in_recovery, inet_server_addr)
// and, on a primary, its standbys from pg_stat_replication, which shows a standby's address
// only to a role with pg_read_all_stats.
func (db *DB) ReplicationNodes(ctx context.Context) ([]PostgresNode, error) {
	var self struct {
		Recovery bool    `db:"recovery"`
		Addr     *string `db:"addr"`
		Port     *int    `db:"port"`
	}
	if err := sqlxGet(ctx, db.Queries, &self, `SELECT pg_is_in_recovery() AS recovery,
		host(inet_server_addr()) AS addr, inet_server_port() AS port`); err != nil {
		return nil, fmt.Errorf("read the postgresql server's role: %w", err)
	}
	addr := "local socket"
	if self.Addr != nil && self.Port != nil {
		addr = net.JoinHostPort(*self.Addr, strconv.Itoa(*self.Port))
	}
	if self.Recovery {
		return []PostgresNode{{Address: addr, Role: RoleStandby, Note: "the DSN reaches a standby"}}, nil
	}
	nodes := []PostgresNode{{Address: addr, Role: RolePrimary}}
	var standbys []struct {
		Addr  *string `db:"addr"`
		State *string `db:"state"`
		Sync  *string `db:"sync"`
	}
	if err := sqlxSelect(ctx, db.Queries, &standbys, `SELECT host(client_addr) AS addr, state, sync_state AS sync
		FROM pg_stat_replication ORDER BY client_addr`); err != nil {
		return nil, fmt.Errorf("read pg_stat_replication: %w", err)
	}
	for _, s := range standbys {
		n := PostgresNode{Address: "hidden (needs pg_read_all_stats)", Role: RoleStandby}
		if s.Addr != nil {
			n.Address = *s.Addr
		}
		if s.State != nil && s.Sync != nil {
			n.Note = *s.State + ", " + *s.Sync
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// patroniTimeout bounds one request to a Patroni REST API.
const patroniTimeout = 2 * time.Second

// patroniMembers asks each URL in turn for GET /cluster until one answers.
func patroniMembers(ctx context.Context, urls []string) ([]PostgresNode, error) {
	var errs []error
	for _, u := range urls {
		nodes, err := patroniCluster(ctx, strings.TrimSuffix(u, "/")+"/cluster")
		if err == nil {
			return nodes, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no patroni rest api answered: %w", errors.Join(errs...))
}

func patroniCluster(ctx context.Context, url string) ([]PostgresNode, error) {
	ctx, cancel := context.WithTimeout(ctx, patroniTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var body struct {
		Members []struct {
			Name  string          `json:"name"`
			Role  string          `json:"role"`
			State string          `json:"state"`
			Host  string          `json:"host"`
			Port  json.RawMessage `json:"port"`
		} `json:"members"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	nodes := make([]PostgresNode, 0, len(body.Members))
	for _, m := range body.Members {
		n := PostgresNode{Address: net.JoinHostPort(m.Host, strings.Trim(string(m.Port), `"`)), Role: patroniRole(m.Role)}
		if m.Role == "sync_standby" {
			n.Note = "synchronous"
		}
		if m.State != "running" && m.State != "streaming" {
			n.Role, n.Note = RoleUnknown, "patroni member "+m.Name+" is "+m.State
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// patroniRole maps a Patroni member's role to a PostgresNode's.
func patroniRole(role string) string {
	switch role {
	case "leader", "master", "primary":
		return RolePrimary
	case "replica", "sync_standby", "standby_leader", "quorum_standby":
		return RoleStandby
	}
	return RoleUnknown
}
