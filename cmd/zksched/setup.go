package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/tracing"
)

// configFlag adds --config to fs.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", os.Getenv("ZKSCHED_CONFIG"), "YAML config file (default: none; defaults and ZKSCHED_* variables)")
}

func loadConfig(path string) (*conf.Config, error) {
	cfg, err := conf.Load(path, os.Environ())
	if err != nil {
		return nil, exitError{code: exitUsage, msg: err.Error()}
	}
	return cfg, nil
}

// newLogger returns the process logger: zerolog JSON (or console) on stderr.
func newLogger(cfg conf.Log, w io.Writer) zerolog.Logger {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	lvl, err := zerolog.ParseLevel(cfg.Level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	if cfg.Format == conf.LogFormatConsole {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

func openDB(ctx context.Context, cfg *conf.Config, log zerolog.Logger) (*dao.DB, error) {
	return openDBLimited(ctx, cfg, 0, log)
}

// openDBLimited is openDB whose statements fail after replyLimit without a reply (0: never):
// a node's, whose statements are short (db.reply-timeout), unlike a migration's.
func openDBLimited(ctx context.Context, cfg *conf.Config, replyLimit time.Duration, log zerolog.Logger) (*dao.DB, error) {
	db, err := dao.OpenReplyLimited(ctx, cfg.DB.DSN, cfg.DB.MaxConns, replyLimit, log)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if cfg.Tracing.Enabled {
		// Every process that submits decides the trace of what it submits: nodes, and the
		// command line's submit.
		db.SetTraceStart(tracing.Traceparents(cfg.Tracing.SampleRatio))
	}
	return db, nil
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", stdout)
	config := configFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("unexpected arguments %v", fs.Args())}
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	db, err := openDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := db.Migrate(ctx)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "database schema is up to date")
	}
	for _, a := range applied {
		fmt.Fprintln(stdout, "applied", a)
	}
	return nil
}

// registryAuth returns the registry credentials of cfg (registry.auth-file), nil when none are
// configured. A file that cannot be read or is malformed is a configuration error.
func registryAuth(cfg *conf.Config) (*registry.Credentials, error) {
	user, password, ok, err := cfg.Registry.ReadAuth()
	if err != nil {
		return nil, exitError{code: exitUsage, msg: err.Error()}
	}
	if !ok {
		return nil, nil
	}
	return &registry.Credentials{User: user, Password: password}, nil
}

// registryTLS returns the TLS configuration of connections to ZooKeeper (registry.tls-ca,
// tls-cert, tls-key), nil for plain TCP. Unreadable files are a configuration error.
func registryTLS(cfg *conf.Config) (*tls.Config, error) {
	tc, err := cfg.Registry.TLSConfig()
	if err != nil {
		return nil, exitError{code: exitUsage, msg: err.Error()}
	}
	return tc, nil
}
