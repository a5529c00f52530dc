package conf

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// SecretEnvNames are the names of the variables of the worker's environment no shell task
// ever inherits, whatever [Worker.TaskEnv] says: every variable starting with ZKSCHED_ (the
// config overrides, ZKSCHED_DB_DSN and ZKSCHED_API_TOKEN among them, as the patterns
// "ZKSCHED_*") and each provider's api-key-env. A task's own ZKSCHED_TASK_*, ZKSCHED_PARAM_*,
// ZKSCHED_UPSTREAM_*, ZKSCHED_ITEM and ZKSCHED_INDEX variables are given to it by the worker, never inherited.
func (c *Config) SecretEnvNames() []string {
	names := []string{envPrefix + "*"}
	for _, name := range sortedKeys(c.LLM.Providers) {
		if k := c.LLM.Providers[name].APIKeyEnv; k != "" {
			names = append(names, k)
		}
	}
	return names
}

// SecretValues returns the values zksched keeps from tasks' eyes and masks in what it stores
// of them (task logs, outputs, errors, checkpoints): the database DSN and its password, the
// API token, the ZooKeeper digest password of registry.auth-file and the provider keys found
// through getenv (os.Getenv in a worker). Each value
// appears once; empty ones are left out. The caller decides what is too short to mask.
func (c *Config) SecretValues(getenv func(string) string) ([]string, error) {
	var vals []string
	add := func(v string) {
		if v != "" && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	add(c.DB.DSN)
	for _, p := range dsnPasswords(c.DB.DSN) {
		add(p)
	}
	token, err := c.API.ResolveToken()
	if err != nil {
		return nil, fmt.Errorf("api token: %w", err)
	}
	add(token)
	user, password, ok, err := c.Registry.ReadAuth()
	if err != nil {
		return nil, fmt.Errorf("registry auth: %w", err)
	}
	if ok {
		add(user + ":" + password)
		add(password)
	}
	for _, name := range sortedKeys(c.LLM.Providers) {
		if k := c.LLM.Providers[name].APIKeyEnv; k != "" {
			add(getenv(k))
		}
	}
	return vals, nil
}

// dsnPasswords returns the password a DSN holds, as it is written in it and as the server
// gets it (a URL's is percent-encoded): a task that learnt it another way would print the
// latter.
func dsnPasswords(dsn string) []string {
	var out []string
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil
		}
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
			if _, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(dsn, "postgresql://"), "postgres://"), ":"); ok {
				if raw, _, ok := strings.Cut(rest, "@"); ok && raw != p {
					out = append(out, raw)
				}
			}
		}
		if p := u.Query().Get("password"); p != "" {
			out = append(out, p)
		}
		return out
	}
	params, err := parseKeyValueDSN(dsn)
	if err != nil {
		return nil
	}
	if p := params["password"]; p != "" {
		out = append(out, p)
	}
	return out
}

// taskUserName is the form of worker.task-user: a user name as useradd takes it, or a
// numeric uid.
var taskUserName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$`)

// taskEnv checks worker.task-env and worker.task-user.
func (v *validation) taskEnv(c *Config) {
	w := c.Worker
	secret := c.SecretEnvNames()
	seen := make(map[string]bool)
	for i, entry := range w.TaskEnv {
		key := fmt.Sprintf("worker.task-env[%d]", i)
		name, pattern := strings.CutSuffix(entry, "*")
		switch {
		case !envVarName.MatchString(name):
			v.problem(key, "%q: want a variable name or a prefix followed by * (like AWS_*)", entry)
			continue
		case seen[entry]:
			v.problem(key, "%q is listed twice", entry)
			continue
		}
		seen[entry] = true
		// A pattern reaches a secret name when one starts with the other's prefix: AWS_* reaches
		// AWS_SECRET_KEY, and Z* reaches every ZKSCHED_* variable.
		for _, s := range secret {
			sname, spattern := strings.CutSuffix(s, "*")
			reaches := name == sname
			if pattern {
				reaches = strings.HasPrefix(sname, name) || (spattern && strings.HasPrefix(name, sname))
			} else if spattern {
				reaches = strings.HasPrefix(name, sname)
			}
			if !reaches {
				continue
			}
			if spattern {
				v.problem(key, "%q would pass ZKSCHED_* variables to tasks: they hold the worker's configuration, its database "+
					"DSN and API token among them, and are never given to tasks; a task gets its own ZKSCHED_TASK_*, "+
					"ZKSCHED_PARAM_*, ZKSCHED_UPSTREAM_*, ZKSCHED_ITEM and ZKSCHED_INDEX variables without being listed", entry)
			} else {
				v.problem(key, "%q would pass %s, a model provider's API key (llm.providers.*.api-key-env), to every task; "+
					"keys are never given to tasks: list only the variables tasks need", entry, sname)
			}
		}
	}
	if u := w.TaskUser; u != "" && !taskUserName.MatchString(u) {
		v.problem("worker.task-user", "%q: want a user name or a numeric uid", u)
	}
}
