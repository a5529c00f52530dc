package conf

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// Load reads the YAML file at path ("" means no file: defaults plus environment), applies the
// ZKSCHED_* variables found in env (os.Environ() form, "K=V"), fills defaults and validates.
// The environment beats the file and the file beats [Defaults]. An empty Node.Host is filled
// with the machine's address (see [Node.Host]), an empty Node.StateDir with the user's state
// folder as env names it (see [DefaultStateDir]). The error, if any, lists every problem found,
// each naming its key and, for the file, its line.
func Load(path string, env []string) (*Config, error) {
	cfg := Defaults()
	var errs []error
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("conf: read config file: %w", err)
		}
		errs = append(errs, decodeFile(&cfg, path, data)...)
	}
	errs = append(errs, applyEnv(&cfg, env)...)
	if len(errs) > 0 {
		// Validating a half-applied configuration would add misleading problems.
		return nil, errors.Join(errs...)
	}
	if cfg.Node.Host == "" {
		cfg.Node.Host = detectHost()
	}
	if cfg.Node.StateDir == "" {
		cfg.Node.StateDir = DefaultStateDir(env)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// detectHost returns the first non-loopback, non-link-local IPv4 address of an interface
// that is up, in the order the system lists them, else 127.0.0.1. Link-local addresses are
// skipped because other machines usually cannot route to them.
func detectHost() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "127.0.0.1"
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipnet, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip := ipnet.IP.To4()
			if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
				continue
			}
			return ip.String()
		}
	}
	return "127.0.0.1"
}

// DefaultStateDir returns the state folder of the user whose environment env is (os.Environ()
// form): $ZKSCHED_NODE_STATE_DIR, else $XDG_STATE_HOME/zksched, else
// $HOME/.local/state/zksched, as the XDG base directory specification places state that
// outlives a restart; "" when none of them is set to an absolute path.
func DefaultStateDir(env []string) string {
	get := func(name string) string {
		for _, kv := range env {
			if k, v, ok := strings.Cut(kv, "="); ok && k == name {
				return v
			}
		}
		return ""
	}
	if d := get("ZKSCHED_NODE_STATE_DIR"); d != "" {
		return d
	}
	if d := get("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "zksched")
	}
	if h := get("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "zksched")
	}
	return ""
}

// GeneratedTokenFile is the file of the admin token a master generates when it is given no
// credential: api-token in stateDir.
func GeneratedTokenFile(stateDir string) string { return filepath.Join(stateDir, "api-token") }
