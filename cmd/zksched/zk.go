package main

import (
	"context"
	"fmt"
	"github.com/rs/zerolog"
	"io"
	"time"

	"github.com/zksched/zksched/registry"
)

func runZK(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "tree" && args[0] != "nodes") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "usage: zksched zk tree|nodes [--json] [--config FILE]")
			return nil
		}
		return usageError{fmt.Errorf("want tree or nodes")}
	}
	what := args[0]
	fs := newFlags("zk "+what, stdout)
	config := configFlag(fs)
	asJSON := fs.Bool("json", false, "nodes: print JSON {leader, masters, workers, fenced}")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for ZooKeeper")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := registry.Dial(cctx, registry.Config{Servers: cfg.Registry.Servers, Root: cfg.Registry.Root,
		SessionTimeout: cfg.Registry.SessionTimeout, Logger: newLogger(cfg.Log, stderr).Level(zerolog.WarnLevel)})
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
	return registry.WriteCluster(stdout, cl, time.Now(), *asJSON)
}
