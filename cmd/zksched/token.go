package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/conf"
)

// masterToken returns the admin token a master accepts: api.token, the content of
// api.token-file (created with a new token when it does not exist), or, with neither nor a
// users file and without api.allow-unauthenticated, a token generated into
// node.state-dir/api-token. No master serves without a credential unless told to: loopback
// admits every local user, not only the one who started it. It logs where a file token is.
func masterToken(cfg *conf.Config, log zerolog.Logger) (string, error) {
	a := cfg.API
	path, key := a.TokenFile, "api.token-file"
	switch {
	case a.Token != "":
		return a.Token, nil
	case path != "":
	case a.UsersFile != "":
		return "", nil
	case a.AllowUnauthenticated:
		if isLocalhost(cfg.Node.Host) {
			// Beyond loopback listenNode warns, naming the host.
			log.Warn().Msg("api.allow-unauthenticated: serving the API without authentication: every local user of this machine " +
				"may read everything, store definitions and run them, that is run shell commands on every worker")
		}
		return "", nil
	default:
		if cfg.Node.StateDir == "" {
			return "", errNoStateDir
		}
		if err := os.MkdirAll(cfg.Node.StateDir, 0o700); err != nil {
			return "", exitError{code: exitUsage, msg: fmt.Sprintf("conf: node.state-dir: %v", err)}
		}
		path, key = conf.GeneratedTokenFile(cfg.Node.StateDir), "node.state-dir"
	}
	token, created, err := ensureTokenFile(path)
	if err != nil {
		return "", exitError{code: exitUsage, msg: fmt.Sprintf("conf: %s: %v", key, err)}
	}
	ev := log.Info().Str("token_file", path)
	if created {
		ev.Msg("api: generated the admin token into its file (mode 0600): send it as Authorization: Bearer, " +
			"log in to the web UI with it, or run the CLI with --server as this user, which reads it there")
	} else {
		ev.Msg("api: the admin token is in its file (mode 0600)")
	}
	return token, nil
}

// errNoStateDir stops a master that would generate its token and has nowhere to keep it.
var errNoStateDir = exitError{code: exitUsage, msg: "conf: node.state-dir: empty (neither HOME nor XDG_STATE_HOME is set), and the master " +
	"needs it to keep the API token it generates without api.token, api.token-file or api.users-file; set one of them"}

// ensureTokenFile returns the token in the file at path, first creating the file with a
// random token when it does not exist. The file appears whole or not at all (written aside,
// then linked into place), so masters of one user starting together share one token: the
// first creates it, the others read it. A file its group or others may read is refused,
// since whoever reads it is an admin.
func ensureTokenFile(path string) (token string, created bool, err error) {
	token, err = readTokenFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return token, false, err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".api-token-*")
	if err != nil {
		return "", false, fmt.Errorf("create the token file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", false, err
	}
	if _, err := tmp.WriteString(hex.EncodeToString(b) + "\n"); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("write the token file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", false, err
	}
	if err := tmp.Close(); err != nil {
		return "", false, err
	}
	switch err := os.Link(tmp.Name(), path); {
	case errors.Is(err, fs.ErrExist):
		// Another master made it first: use its token.
		token, err := readTokenFile(path)
		return token, false, err
	case err != nil:
		return "", false, fmt.Errorf("create the token file: %w", err)
	}
	return hex.EncodeToString(b), true, nil
}

// readTokenFile reads the token in the file at path, refusing a file that is not a regular
// file, that its group or others may read or write, or that holds no token.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	switch mode := st.Mode(); {
	case !mode.IsRegular():
		return "", fmt.Errorf("%s is not a regular file", path)
	case mode.Perm()&0o077 != 0:
		return "", fmt.Errorf("%s has mode %04o: its group or others may read or change the admin token; chmod 600 %s", path, mode.Perm(), path)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return token, nil
}
