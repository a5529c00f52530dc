package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/api"
	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/registry"
)

func runZK(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("zk", stdout)
	config := configFlag(fs)
	asJSON := fs.Bool("json", false, "nodes: print JSON {leader, masters, workers, fenced, zookeeper, postgres}")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for ZooKeeper")
	authFile := fs.String("auth-file", "", "file holding the registry's user:password (default: registry.auth-file, ZKSCHED_REGISTRY_AUTH_FILE); reading needs none")
	what, args, err := parseSub(fs, args, "tree|nodes [--json] [--config FILE] [--auth-file FILE]", "tree", "nodes")
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %v", args)}
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	if *authFile != "" {
		cfg.Registry.AuthFile = *authFile
	}
	auth, err := registryAuth(cfg)
	if err != nil {
		return err
	}
	zkTLS, err := registryTLS(cfg)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	// Read only: the commands change nothing, so they work on a protected tree without the
	// credentials, and with them they authenticate as a node does.
	c, err := registry.Dial(cctx, registry.Config{Servers: cfg.Registry.Servers, Root: cfg.Registry.Root,
		SessionTimeout: cfg.Registry.SessionTimeout, Auth: auth, TLS: zkTLS, ReadOnly: true,
		Logger: newLogger(cfg.Log, stderr).Level(zerolog.WarnLevel)})
	if err != nil {
		return fmt.Errorf("zookeeper %v: %w", cfg.Registry.Servers, err)
	}
	defer c.Close()
	if what == "tree" {
		nodes, err := c.Tree(cctx)
		if err != nil {
			return err
		}
		return registry.WriteTree(stdout, nodes, time.Now())
	}
	cl, err := c.Cluster(cctx)
	if err != nil {
		return err
	}
	cl.Postgres = postgresMembers(cctx, cfg, newLogger(cfg.Log, stderr).Level(zerolog.WarnLevel))
	return registry.WriteCluster(stdout, cl, time.Now(), *asJSON)
}

// postgresMembers reads the database's servers for `zk nodes`: from Patroni's REST APIs when
// db.patroni-urls is set, else from the server the DSN reaches. A database that cannot be
// reached is one member of unknown role saying why.
func postgresMembers(ctx context.Context, cfg *conf.Config, log zerolog.Logger) []registry.Member {
	var db *dao.DB
	if len(cfg.DB.PatroniURLs) == 0 {
		var err error
		if db, err = openDB(ctx, cfg, log); err != nil {
			return []registry.Member{{Address: "postgresql", Role: dao.RoleUnknown, Error: err.Error()}}
		}
		defer db.Close()
	}
	return api.PostgresMembers(ctx, db, cfg.DB.PatroniURLs)
}
