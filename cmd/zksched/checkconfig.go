package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/tracing"
)

// errConfigChecked is what the start returns after --check-config: the node checked its
// config and goes no further.
var errConfigChecked = errors.New("the config was checked")

// checkConfig makes the checks of a node's start that conf.Load (which reads the files of
// registry.auth-file, the TLS settings and api.users-file) leaves to the start and that need
// neither ZooKeeper nor PostgreSQL: a master's token file or state folder, a worker's task
// user and secrets, and the tracing exporter's settings. It reads what it checks and makes
// nothing: a token file a master would create is fine when missing. It returns every problem
// found, as a configuration error (exit 2).
func checkConfig(cfg *conf.Config, role registry.Role) error {
	var problems []string
	add := func(err error) {
		if err == nil {
			return
		}
		var e exitError
		if errors.As(err, &e) {
			problems = append(problems, e.msg)
		} else {
			problems = append(problems, err.Error())
		}
	}
	switch role {
	case registry.RoleMaster:
		add(checkToken(cfg))
	case registry.RoleWorker:
		_, err := taskUser(cfg)
		add(err)
		_, err = secretValues(cfg)
		add(err)
	}
	// The exporter connects on its first export, not here.
	tracer, err := tracing.New(context.Background(), tracing.Config(cfg.Tracing), tracing.Options{Role: string(role), Log: zerolog.Nop()})
	if err != nil {
		add(fmt.Errorf("conf: %w", err))
	} else if tracer != nil {
		_ = tracer.Shutdown(context.Background())
	}
	if len(problems) > 0 {
		return exitError{code: exitUsage, msg: strings.Join(problems, "\n")}
	}
	return nil
}

// checkToken checks the credential masterToken would use, without creating its file: the
// token file is read when it exists, and node.state-dir must be set where the master would
// generate one.
func checkToken(cfg *conf.Config) error {
	a := cfg.API
	path, key := a.TokenFile, "api.token-file"
	switch {
	case a.Token != "":
		return nil
	case path != "":
	case a.UsersFile != "", a.AllowUnauthenticated:
		return nil
	default:
		if cfg.Node.StateDir == "" {
			return errNoStateDir
		}
		path, key = conf.GeneratedTokenFile(cfg.Node.StateDir), "node.state-dir"
	}
	if _, err := readTokenFile(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return exitError{code: exitUsage, msg: fmt.Sprintf("conf: %s: %v", key, err)}
	}
	return nil
}
