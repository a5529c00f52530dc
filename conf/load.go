package conf

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// Load reads the YAML file at path ("" means no file: defaults plus environment), applies the
// ZKSCHED_* variables found in env (os.Environ() form, "K=V"), fills defaults and validates.
// The environment beats the file and the file beats [Defaults]. An empty Node.Host is filled
// with the machine's address (see [Node.Host]). The error, if any, lists every problem found,
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
