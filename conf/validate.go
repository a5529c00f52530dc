package conf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/mail"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// minTokenLen is the shortest API token accepted: long enough that guessing it over HTTP is
// hopeless.
const minTokenLen = 16

// groupName is the form of a worker group, pool or provider name: the rule workflow files
// follow, 128 bytes at most like every name.
var groupName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Validate checks every key and returns all the problems found, joined, each naming its key.
// An empty Node.Host is accepted, as in [Defaults]: [Load] fills it before validating.
func (c *Config) Validate() error {
	var v validation

	r := c.Registry
	if len(r.Servers) == 0 {
		v.problem("registry.servers", "empty: list at least one ZooKeeper server as host:port")
	}
	for i, s := range r.Servers {
		if err := checkHostPort(s); err != nil {
			v.problem(fmt.Sprintf("registry.servers[%d]", i), "%q %v", s, err)
		}
	}
	v.check(checkRoot(r.Root), "registry.root")
	v.min("registry.session-timeout", r.SessionTimeout, time.Second)
	v.oneOf("registry.on-lost", r.OnLost, OnLostStop, OnLostKeepRunning)
	if _, _, _, err := r.ReadAuth(); err != nil {
		v.problem("registry.auth-file", "%v", err)
	}
	if _, err := r.TLSConfig(); err != nil {
		v.problem("registry.tls-ca", "%v", err)
	}

	v.check(checkDSN(c.DB.DSN), "db.dsn")
	v.intRange("db.max-conns", c.DB.MaxConns, 1, 100000)
	v.positive("db.reply-timeout", c.DB.ReplyTimeout)
	for i, u := range c.DB.PatroniURLs {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			v.problem(fmt.Sprintf("db.patroni-urls[%d]", i), "%q: want a Patroni REST API's http or https URL, like http://10.0.0.1:8008", u)
		}
	}

	if h := c.Node.Host; h != "" && strings.ContainsFunc(h, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) }) {
		v.problem("node.host", "%q: a host may not contain /, spaces or control characters; it is part of the node's znode name", h)
	}

	if d := c.Node.StateDir; d != "" && !filepath.IsAbs(d) {
		v.problem("node.state-dir", "%q is not an absolute path", d)
	}

	v.port("master.port", c.Master.Port)
	v.positive("master.poll-interval", c.Master.PollInterval)
	v.positive("master.misfire-threshold", c.Master.MisfireThreshold)

	switch a := c.API; {
	case a.Token != "" && a.TokenFile != "":
		v.problem("api.token-file", "set api.token or api.token-file, not both")
	case a.Token != "" || a.TokenFile != "":
		key := "api.token"
		if a.TokenFile != "" {
			key = "api.token-file"
		}
		token, err := a.ResolveToken()
		switch {
		case a.TokenFile != "" && errors.Is(err, fs.ErrNotExist):
			// The master creates it at start, with a token of its own making.
		case err != nil:
			v.problem(key, "%v", err)
		case len(token) < minTokenLen:
			v.problem(key, "the token is %d characters; use at least %d (for example: openssl rand -hex 24)", len(token), minTokenLen)
		}
	}

	v.apiAccess(c.API)
	v.intRange("api.rate-limit", c.API.RateLimit, 0, 1_000_000)
	if c.API.RateLimit > 0 {
		v.intRange("api.rate-burst", c.API.RateBurst, 1, 1_000_000)
	}
	v.intRange("api.heavy-reads", c.API.HeavyReads, 0, 1000)
	v.nonNegative("api.heavy-read-wait", c.API.HeavyReadWait)
	if _, err := path.Match(c.API.HookSecretEnvPattern, ""); err != nil {
		v.problem("api.hook-secret-env-pattern", "%q is not a glob of variable names like ZKSCHED_HOOK_SECRET_*", c.API.HookSecretEnvPattern)
	}
	v.intRange("api.hook-body-limit", c.API.HookBodyLimit, 0, 256<<20)
	v.nonNegative("api.hook-dedupe-window", c.API.HookDedupeWindow)

	w := c.Worker
	v.port("worker.port", w.Port)
	v.intRange("worker.slots", w.Slots, 1, 10000)
	if len(w.Groups) == 0 {
		v.problem("worker.groups", "empty: a worker must serve at least one group (the default group is \"default\")")
	}
	seen := make(map[string]bool)
	for i, g := range w.Groups {
		key := fmt.Sprintf("worker.groups[%d]", i)
		switch {
		case !groupName.MatchString(g):
			v.problem(key, "%q: a group name is 1 to 128 letters, digits, _, . and -", g)
		case seen[g]:
			v.problem(key, "%q is listed twice", g)
		}
		seen[g] = true
	}
	v.nonNegative("worker.shutdown-timeout", w.ShutdownTimeout)
	v.nonNegative("worker.kill-grace", w.KillGrace)
	v.positive("worker.poll-interval", w.PollInterval)
	v.nonNegative("worker.spread-wait", w.SpreadWait)
	if w.LogLimit < 0 {
		v.problem("worker.log-limit", "%d is negative; 0 keeps no output", w.LogLimit)
	}
	v.intRange("worker.output-limit-max", w.OutputLimitMax, 1, MaxOutputLimit)
	v.intRange("worker.output-limit", w.OutputLimit, 1, max(w.OutputLimitMax, 1))
	if tc := w.TaskCgroup; tc != TaskCgroupAuto && tc != TaskCgroupOff && (!path.IsAbs(tc) || path.Clean(tc) != tc) {
		v.problem("worker.task-cgroup", "%q: want %s, %s or the absolute, clean path of a cgroup v2 directory", tc, TaskCgroupAuto, TaskCgroupOff)
	}
	v.intRange("worker.http-tools.response-limit", w.HTTPTools.ResponseLimit, 1, 16<<20)
	v.positive("worker.http-tools.timeout", w.HTTPTools.Timeout)
	for _, base := range w.HTTPTools.Allow {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			v.problem("worker.http-tools.allow", "%q: want an http or https URL with a host and no user, query or fragment, "+
				"such as https://tickets.example.com/api/", base)
		}
	}
	v.taskEnv(c)

	f := c.Failover
	if want := w.KillGrace + KillGraceMargin; f.Delay < want {
		v.problem("failover.delay", "%v is shorter than worker.kill-grace (%v) plus %v: after its session expires a cut-off worker "+
			"still needs up to the kill grace to stop its tasks, and the leader must not re-queue them before they have stopped, "+
			"or a task would run twice; set failover.delay to at least %v", f.Delay, w.KillGrace, KillGraceMargin, want)
	}
	v.positive("failover.marker-retention", f.MarkerRetention)
	v.positive("failover.sweep-interval", f.SweepInterval)

	rt := c.Retention
	v.nonNegative("retention.instances", rt.Instances)
	v.nonNegative("retention.logs", rt.Logs)
	v.nonNegative("retention.failover-events", rt.FailoverEvents)
	v.nonNegative("retention.fires", rt.Fires)
	v.nonNegative("retention.asset-events", rt.AssetEvents)
	v.nonNegative("retention.audit", rt.Audit)
	if rt.Instances > 0 && rt.Logs > rt.Instances {
		v.problem("retention.logs", "%s is longer than retention.instances (%s): a purged instance takes its logs with it; "+
			"set retention.logs to at most %s, or 0 to keep them as long as their instance", FormatDuration(rt.Logs),
			FormatDuration(rt.Instances), FormatDuration(rt.Instances))
	}
	v.positive("retention.interval", rt.Interval)
	v.intRange("retention.batch-size", rt.BatchSize, 1, 100000)

	for _, name := range sortedKeys(c.LLM.Providers) {
		v.provider("llm.providers."+name, name, c.LLM.Providers[name])
	}
	for _, name := range sortedKeys(c.Pools) {
		key := "pools." + name
		if !groupName.MatchString(name) {
			v.problem(key, "%q: a pool name is 1 to 128 letters, digits, _, . and -", name)
		}
		v.intRange(key, c.Pools[name], 1, 100000)
	}

	v.notify(c.Notify)
	v.tracing(c.Tracing)
	if u := c.API.PublicURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			v.problem("api.public-url", "%q: want an absolute http or https URL, like https://zksched.example.com", u)
		}
	}

	v.oneOf("log.level", c.Log.Level, "trace", "debug", "info", "warn", "error")
	v.oneOf("log.format", c.Log.Format, LogFormatJSON, LogFormatConsole)

	return errors.Join(v.errs...)
}

// tracing checks the tracing section; an endpoint is checked even with tracing off, so a
// mistake is found before the day it is turned on.
func (v *validation) tracing(t Tracing) {
	if r := t.SampleRatio; !(r >= 0 && r <= 1) {
		v.problem("tracing.sample-ratio", "%v: want a share from 0 (no instance) to 1 (every instance)", r)
	}
	if e := t.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.problem("tracing.endpoint", "%q: want the collector's OTLP/HTTP URL, like http://127.0.0.1:4318", e)
		}
	}
	v.intRange("tracing.queue-size", t.QueueSize, 1, 1000000)
}

// notify checks the notifications' section: each default entry as a workflow file's entry is
// checked (the cluster's events allowed), and the delivery's limits.
func (v *validation) notify(n Notify) {
	_, patternErr := path.Match(n.WebhookEnvPattern, "")
	if n.WebhookEnvPattern == "" || patternErr != nil {
		v.problem("notify.webhook-env-pattern", "%q is not a glob of variable names like ZKSCHED_WEBHOOK_*", n.WebhookEnvPattern)
	}
	for i, e := range n.Default {
		key := fmt.Sprintf("notify.default[%d]", i)
		events := e.EventList()
		if len(e.Events) > 0 && len(e.On) > 0 {
			v.problem(key+".on", "give events or on (its old name), not both")
		}
		if len(events) == 0 {
			v.problem(key+".events", "empty: list the events (%s)", strings.Join(NotifyEvents, ", "))
		}
		for j, ev := range events {
			switch {
			case !slices.Contains(NotifyEvents, ev):
				v.problem(fmt.Sprintf("%s.events[%d]", key, j), "unknown event %q (known events: %s)", ev, strings.Join(NotifyEvents, ", "))
			case slices.Index(events, ev) < j:
				v.problem(fmt.Sprintf("%s.events[%d]", key, j), "event %q is listed twice", ev)
			}
		}
		if e.WebhookURLEnv == "" && len(e.Email) == 0 {
			v.problem(key, "no channel: give webhook-url-env, email, or both")
		}
		if e.WebhookURLEnv != "" && !envVarName.MatchString(e.WebhookURLEnv) {
			v.problem(key+".webhook-url-env", "%q is not an environment variable name: use letters, digits and _, not starting with a digit", e.WebhookURLEnv)
		} else if ok, _ := path.Match(n.WebhookEnvPattern, e.WebhookURLEnv); e.WebhookURLEnv != "" && patternErr == nil && !ok {
			v.problem(key+".webhook-url-env", "%q does not match notify.webhook-env-pattern (%s): name the variable like that, "+
				"or widen the pattern", e.WebhookURLEnv, n.WebhookEnvPattern)
		}
		if e.Slack && e.WebhookURLEnv == "" {
			v.problem(key+".slack", "slack: true needs webhook-url-env: it is the webhook's body")
		}
		for j, addr := range e.Email {
			if a, err := mail.ParseAddress(addr); err != nil || a.Address != addr {
				v.problem(fmt.Sprintf("%s.email[%d]", key, j), "%q is not an email address like ops@example.com", addr)
			}
		}
	}
	v.intRange("notify.max-attempts", n.MaxAttempts, 1, 1000)
	if e := n.Email; e.Host != "" {
		v.port("notify.email.port", e.Port)
		if a, err := mail.ParseAddress(e.From); err != nil || a.Address != e.From {
			v.problem("notify.email.from", "%q is not an email address like zksched@example.com: a mail server needs a sender", e.From)
		}
		if e.PasswordEnv != "" && !envVarName.MatchString(e.PasswordEnv) {
			v.problem("notify.email.password-env", "%q is not an environment variable name", e.PasswordEnv)
		}
		if e.PasswordEnv != "" && e.Username == "" {
			v.problem("notify.email.username", "empty: password-env needs a username")
		}
	}
	v.positive("notify.timeout", n.Timeout)
	v.positive("notify.backoff", n.Backoff)
	if n.MaxBackoff < n.Backoff {
		v.problem("notify.max-backoff", "%v is shorter than notify.backoff (%v)", n.MaxBackoff, n.Backoff)
	}
}

// apiAccess checks the keys that decide who may reach the API and how: the users file, the
// TLS pair, the allowed hosts and allow-unauthenticated.
func (v *validation) apiAccess(a API) {
	if a.UsersFile != "" {
		users, err := ReadUsersFile(a.UsersFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// No user yet: `zksched user add` creates the file, and the masters read it then.
		case err != nil:
			v.problem("api.users-file", "%v", err)
		case a.Token != "" || a.TokenFile != "":
			for _, u := range users {
				if u.Name == "admin" {
					v.problem("api.users-file", "line %d: the user admin is the api.token's; give this user another name", u.Line)
				}
			}
		}
	}
	if a.AllowUnauthenticated && a.Authenticated() {
		v.problem("api.allow-unauthenticated", "true while a token or a users file is set: the API is not unauthenticated; remove one of them")
	}
	for i, h := range a.AllowedHosts {
		if h == "" || strings.ContainsFunc(h, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) }) {
			v.problem(fmt.Sprintf("api.allowed-hosts[%d]", i), "%q is not a host name or address", h)
		}
	}
	switch {
	case (a.TLSCert == "") != (a.TLSKey == ""):
		v.problem("api.tls-cert", "set api.tls-cert and api.tls-key together, or neither")
	case a.TLSCert != "":
		if _, err := tls.LoadX509KeyPair(a.TLSCert, a.TLSKey); err != nil {
			v.problem("api.tls-cert", "load the pair %s and %s: %v", a.TLSCert, a.TLSKey, err)
		}
	}
}

// envVarName is the form of an environment variable name, such as an API key's.
var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// provider checks one entry of llm.providers; key is its dotted path.
func (v *validation) provider(key, name string, p Provider) {
	if !groupName.MatchString(name) {
		v.problem(key, "%q: a provider name is 1 to 128 letters, digits, _, . and -", name)
	}
	v.oneOf(key+".type", p.Type, ProviderOpenAI, ProviderOllama, ProviderAnthropic, ProviderOffline)
	if p.BaseURL != "" {
		if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.problem(key+".base-url", "%q is not an http:// or https:// URL", p.BaseURL)
		}
	}
	if p.InputPrice < 0 || p.OutputPrice < 0 || math.IsNaN(p.InputPrice) || math.IsNaN(p.OutputPrice) ||
		math.IsInf(p.InputPrice, 0) || math.IsInf(p.OutputPrice, 0) {
		v.problem(key, "input-price %g and output-price %g must be finite and not negative (a million tokens' price; 0 for unknown)",
			p.InputPrice, p.OutputPrice)
	}
	if p.APIKeyEnv != "" && !envVarName.MatchString(p.APIKeyEnv) {
		v.problem(key+".api-key-env", "%q is not an environment variable name (it names the variable holding the key, "+
			"never the key itself)", p.APIKeyEnv)
	}
	switch p.Type {
	case ProviderOpenAI, ProviderOllama, ProviderAnthropic:
		if p.Model == "" {
			v.problem(key+".model", "required for a provider of type %s", p.Type)
		}
	}
	switch p.Type {
	case ProviderAnthropic:
		if p.APIKeyEnv == "" {
			v.problem(key+".api-key-env", "required for a provider of type anthropic: name the variable that holds the key, such as ANTHROPIC_API_KEY")
		}
	case ProviderOllama:
		if p.APIKeyEnv != "" {
			v.problem(key+".api-key-env", "an ollama server takes no API key; leave it empty")
		}
	case ProviderOffline:
		if p.BaseURL != "" || p.APIKeyEnv != "" {
			v.problem(key, "the offline provider calls no server: leave base-url and api-key-env empty")
		}
	}
	v.nonNegative(key+".timeout", p.Timeout)
	v.intRange(key+".requests-per-minute", p.RequestsPerMinute, 0, 1000000)
	v.intRange(key+".tokens-per-minute", p.TokensPerMinute, 0, 1000000000)
	v.intRange(key+".max-concurrent", p.MaxConcurrent, 0, 100000)
	v.intRange(key+".max-attempts", p.MaxAttempts, 0, 100)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// validation collects the problems Validate finds.
type validation struct {
	errs []error
}

func (v *validation) problem(key, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("conf: %s: %s", key, fmt.Sprintf(format, args...)))
}

func (v *validation) check(err error, key string) {
	if err != nil {
		v.problem(key, "%v", err)
	}
}

func (v *validation) min(key string, d, least time.Duration) {
	if d < least {
		v.problem(key, "%v is less than the minimum, %v", d, least)
	}
}

func (v *validation) positive(key string, d time.Duration) {
	if d <= 0 {
		v.problem(key, "%v: must be positive", d)
	}
}

func (v *validation) nonNegative(key string, d time.Duration) {
	if d < 0 {
		v.problem(key, "%v: must not be negative", d)
	}
}

func (v *validation) intRange(key string, n, lo, hi int) {
	if n < lo || n > hi {
		v.problem(key, "%d is out of range %d..%d", n, lo, hi)
	}
}

func (v *validation) port(key string, p int) {
	v.intRange(key, p, 1, 65535)
}

func (v *validation) oneOf(key, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	v.problem(key, "%q: want one of %s", s, strings.Join(allowed, ", "))
}

// checkHostPort checks a ZooKeeper server address.
func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return errors.New("is not host:port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return errors.New("has a port outside 1..65535")
	}
	return nil
}

// checkRoot checks the znode path under which zksched keeps its tree.
func checkRoot(root string) error {
	switch {
	case !strings.HasPrefix(root, "/"):
		return fmt.Errorf("%q is not an absolute znode path (like /zksched)", root)
	case root == "/":
		return errors.New(`"/" would mix zksched's znodes with everything else in ZooKeeper; use a path like /zksched`)
	case strings.HasSuffix(root, "/"):
		return fmt.Errorf("%q ends with /", root)
	case path.Clean(root) != root:
		return fmt.Errorf("%q has an empty, . or .. element", root)
	case root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/"):
		return fmt.Errorf("%q is under /zookeeper, which ZooKeeper reserves", root)
	}
	return nil
}

// checkDSN checks that dsn is a PostgreSQL connection string lib/pq can use: a
// postgres:// or postgresql:// URL with a host, or key=value pairs with host= (or hostaddr=).
// Its messages never quote the DSN, which may hold a password.
func checkDSN(dsn string) error {
	if dsn == "" {
		return errors.New("empty")
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			var uerr *url.Error
			if errors.As(err, &uerr) {
				err = uerr.Err // the url.Error repeats the URL, password included
			}
			return fmt.Errorf("malformed URL: %v", err)
		}
		q := u.Query()
		if u.Hostname() == "" && q.Get("host") == "" && q.Get("hostaddr") == "" {
			return errors.New("the URL has no host (want postgres://user@host:5432/db?sslmode=disable)")
		}
		return nil
	}
	params, err := parseKeyValueDSN(dsn)
	if err != nil {
		return fmt.Errorf("want a postgres:// URL or key=value pairs: %w", err)
	}
	if params["host"] == "" && params["hostaddr"] == "" {
		return errors.New("the key=value DSN has no host= (want host=127.0.0.1 port=5432 user=zksched dbname=zksched)")
	}
	return nil
}

// parseKeyValueDSN parses a libpq key=value connection string: pairs separated by spaces,
// spaces allowed around =, values optionally in single quotes, backslash escaping a
// character.
func parseKeyValueDSN(s string) (map[string]string, error) {
	params := make(map[string]string)
	i := 0
	skipSpace := func() {
		for i < len(s) && unicode.IsSpace(rune(s[i])) {
			i++
		}
	}
	for {
		skipSpace()
		if i == len(s) {
			break
		}
		start := i
		for i < len(s) && s[i] != '=' && !unicode.IsSpace(rune(s[i])) {
			i++
		}
		key := s[start:i]
		skipSpace()
		if i == len(s) || s[i] != '=' {
			return nil, fmt.Errorf("missing = after %q", key)
		}
		if key == "" {
			return nil, errors.New("= without a key")
		}
		i++
		skipSpace()
		var val strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			for {
				if i == len(s) {
					return nil, fmt.Errorf("unterminated quoted value for %q", key)
				}
				if s[i] == '\'' {
					i++
					break
				}
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
				i++
			}
		} else {
			for i < len(s) && !unicode.IsSpace(rune(s[i])) {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
				i++
			}
		}
		params[key] = val.String()
	}
	if len(params) == 0 {
		return nil, errors.New("no key=value pairs")
	}
	return params, nil
}
