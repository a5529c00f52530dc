package main

import (
	"context"
	"crypto/tls"
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

// checkConfig makes the checks of a node's start that need neither ZooKeeper nor PostgreSQL
// on a config conf.Load accepted: the files it names (registry.auth-file and TLS, the API
// token file and users file, api.tls-cert, tracing.ca-file), the worker's task user and
// secrets, and the tracing exporter's settings. It reads what it checks and makes nothing: a
// token file a master would create is fine when missing. It returns every problem found, as
// a configuration error (exit 2).
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
	_, err := registryAuth(cfg)
	add(err)
	_, err = registryTLS(cfg)
	add(err)
	switch role {
	case registry.RoleMaster:
		add(checkToken(cfg))
		if f := cfg.API.UsersFile; f != "" {
			if _, err := conf.ReadUsersFile(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				add(fmt.Errorf("conf: api.users-file: %w", err))
			}
		}
		if cfg.API.TLSCert != "" {
			if _, err := tls.LoadX509KeyPair(cfg.API.TLSCert, cfg.API.TLSKey); err != nil {
				add(fmt.Errorf("conf: api.tls-cert: %w", err))
			}
		}
	case registry.RoleWorker:
		_, err = taskUser(cfg)
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
