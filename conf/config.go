package conf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode"
)

// Values of [Registry.OnLost].
const (
	// OnLostStop stops running work once a node has been cut off from ZooKeeper for the
	// session timeout, so it cannot overlap the run the leader starts after failing it over.
	OnLostStop = "stop"
	// OnLostKeepRunning lets running work go on while cut off. It avoids restarting long
	// tasks across short ZooKeeper outages, at the price of a possible overlap with the
	// re-queued run; results are still committed once, through the fencing tokens.
	OnLostKeepRunning = "keep-running"
)

// Values of [Worker.TaskCgroup] besides a path: the same as executor.TaskCgroupAuto and
// executor.TaskCgroupOff, which a test checks.
const (
	// TaskCgroupAuto gives each shell task attempt a cgroup of its own under the worker's
	// cgroup when the worker may create one there, and otherwise contains the task's
	// processes through its supervisor, a child subreaper.
	TaskCgroupAuto = "auto"
	// TaskCgroupOff uses no cgroups: every task is contained by its supervisor as a child
	// subreaper.
	TaskCgroupOff = "off"
)

// Values of [Log.Format].
const (
	// LogFormatJSON writes one zerolog JSON object per line, for log collectors.
	LogFormatJSON = "json"
	// LogFormatConsole writes zerolog's human-readable console format.
	LogFormatConsole = "console"
)

// Config is the whole configuration of a zksched node, master or worker. Each field is a
// section of the YAML file and of the ZKSCHED_<SECTION>_<KEY> environment variables.
type Config struct {
	// Registry is how the node reaches ZooKeeper.
	Registry Registry `yaml:"registry"`
	// DB is how the node reaches PostgreSQL.
	DB DB `yaml:"db"`
	// Node is what the node advertises about itself.
	Node Node `yaml:"node"`
	// Master configures the master role.
	Master Master `yaml:"master"`
	// API configures the HTTP API and web UI that masters serve.
	API API `yaml:"api"`
	// Worker configures the worker role.
	Worker Worker `yaml:"worker"`
	// Failover configures the leader's failover of lost nodes.
	Failover Failover `yaml:"failover"`
	// Retention configures how long the leader keeps the history of finished work.
	Retention Retention `yaml:"retention"`
	// LLM configures the model providers of llm and agent tasks.
	LLM LLM `yaml:"llm"`
	// Pools are the global concurrency limits of task pools: pool name → how many of its
	// task instances may run at once across all workers. Empty by default. The masters store
	// them in PostgreSQL at start (the last master to start wins, so give every master the
	// same pools) and workers claim a pool's task only while the pool has room; a full pool
	// leaves its tasks queued. A pool no config names has no limit, and `zksched submit`
	// refuses a workflow whose tasks name one, as it is most likely a typo. 1..100000 each.
	Pools map[string]int `yaml:"pools"`
	// Log configures the process's logs.
	Log Log `yaml:"log"`
	// Notify configures the notifications the masters send.
	Notify Notify `yaml:"notify"`
	// Tracing configures the OpenTelemetry traces of workflow instances, on masters, workers
	// and the command line's submissions.
	Tracing Tracing `yaml:"tracing"`
}

// Tracing configures the OpenTelemetry traces of workflow instances (package tracing): a
// trace per instance, a span per task attempt and per model call, exported over OTLP/HTTP to
// a collector (the OpenTelemetry Collector, Jaeger, Tempo, …). Give every node of a cluster
// the same section: the process that submits an instance decides whether it is traced, and
// the others emit its spans only if they have tracing on too.
type Tracing struct {
	// Enabled turns tracing on. Defaults to false: instances are stored without a trace
	// context and no span is built or sent, so scheduling does no work for it.
	Enabled bool `yaml:"enabled"`

	// Endpoint is the collector's OTLP/HTTP base URL, like http://127.0.0.1:4318; the spans
	// are POSTed to its /v1/traces unless the URL has a path of its own. https uses TLS (see
	// CAFile). Empty by default, which takes OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT from the environment, as every OpenTelemetry SDK does, and
	// otherwise http://localhost:4318, a collector beside the node.
	Endpoint string `yaml:"endpoint"`

	// SampleRatio is the share of workflow instances traced, 0 to 1. Defaults to 1: every
	// instance, as tracing is turned on to look at them. It is applied once, where the
	// instance is submitted, and every process respects that decision for all the
	// instance's spans (and a shell task's TRACEPARENT carries it on).
	SampleRatio float64 `yaml:"sample-ratio"`

	// ServiceName is the service.name of the node's spans. Defaults to zksched-master or
	// zksched-worker, by role.
	ServiceName string `yaml:"service-name"`

	// Headers are HTTP headers sent with every export, such as a collector's API key. Empty
	// by default. A secret is better given in OTEL_EXPORTER_OTLP_HEADERS (k1=v1,k2=v2), which
	// is read too and keeps it out of the file.
	Headers map[string]string `yaml:"headers"`

	// CAFile is a PEM file of the certificate authorities an https endpoint's certificate may
	// come from. Empty by default: the system's roots.
	CAFile string `yaml:"ca-file"`

	// QueueSize is how many ended spans a node holds while they wait to be exported.
	// Defaults to 2048, the SDK's default. When the collector is down or slow the queue
	// fills and further spans are dropped: an export never blocks or fails scheduling.
	// 1..1000000.
	QueueSize int `yaml:"queue-size"`
}

// Registry is the ZooKeeper connection and the place of zksched's znodes in it.
type Registry struct {
	// Servers are the ZooKeeper servers as host:port. Defaults to ["127.0.0.1:2181"], a
	// local standalone server. List every member of an ensemble so the client can move to
	// another server when one fails.
	Servers []string `yaml:"servers"`

	// Root is the absolute znode path under which zksched keeps all its znodes. Defaults to
	// "/zksched". Give each cluster sharing one ZooKeeper its own root; "/" is refused so
	// zksched never writes beside other applications' znodes.
	Root string `yaml:"root"`

	// SessionTimeout is the ZooKeeper session timeout the node asks for. Defaults to 20 s.
	// It is how long a node may be unreachable before ZooKeeper declares it dead and its
	// work is failed over: shorter means faster failover, longer rides out longer network
	// blips and GC pauses. At least 1 s; the server may clamp it to its own
	// minSessionTimeout..maxSessionTimeout. Keep it at least 2 × syncLimit × tickTime of the
	// ZooKeeper servers: a frozen or lost ZooKeeper leader is given up only after
	// syncLimit × tickTime, and until a new one serves no node can prove it is alive, so a
	// shorter timeout expires every session. The default suits ZooKeeper's sample settings
	// (tickTime 2 s, syncLimit 5); the node warns at start when the servers' settings want
	// more.
	SessionTimeout time.Duration `yaml:"session-timeout"`

	// OnLost is what a node does with its running work once it has been cut off from
	// ZooKeeper for the session timeout: [OnLostStop] or [OnLostKeepRunning]. Defaults to
	// "stop", the safe choice: by then ZooKeeper may have expired the session and the leader
	// may be about to hand the work to another node.
	OnLost string `yaml:"on-lost"`

	// AuthFile is a file holding "user:password", the ZooKeeper digest credential of the
	// cluster's znodes (environment ZKSCHED_REGISTRY_AUTH_FILE). Empty by default, which
	// leaves every znode open: anyone who reaches ZooKeeper can then stop any node. With it
	// every node authenticates each connection and creates its znodes with all rights for
	// that user and read for everyone, so zkCli.sh and zksched zk still read the tree without
	// it but nobody else can create, change or delete anything under the root; at start a
	// node also closes the root, its folders and the fence markers that an older version left
	// open. Give every node of a cluster the same file (mode 0600), and zksched zk the same
	// one for anything but reading. It is read at start: a missing or malformed file stops the
	// node with an error.
	AuthFile string `yaml:"auth-file"`

	// TLSCA is a PEM file of the certificate authorities whose certificates the ZooKeeper
	// servers may present. Setting it (or TLSCert) makes every connection to ZooKeeper TLS:
	// list the servers' secureClientPort in Servers (ZooKeeper 3.5+ with
	// serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory). Empty by default:
	// plain TCP, which anyone on the path can read, including the auth file's password sent
	// at every connection. Empty with TLSCert set: the system's roots.
	TLSCA string `yaml:"tls-ca"`
	// TLSCert and TLSKey are PEM files of the client certificate and its key, for servers with
	// ssl.clientAuth=need (or want). Empty by default: no client certificate. Set both or
	// neither.
	TLSCert string `yaml:"tls-cert"`
	TLSKey  string `yaml:"tls-key"`
}

// TLSConfig returns the TLS configuration of connections to ZooKeeper made from TLSCA, TLSCert
// and TLSKey; nil when none is set (plain TCP). The files are read now.
func (r Registry) TLSConfig() (*tls.Config, error) {
	if r.TLSCA == "" && r.TLSCert == "" && r.TLSKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if r.TLSCA != "" {
		pem, err := os.ReadFile(r.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("read registry tls ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("registry tls ca %s holds no PEM certificate", r.TLSCA)
		}
	}
	switch {
	case (r.TLSCert == "") != (r.TLSKey == ""):
		return nil, errors.New("set registry.tls-cert and registry.tls-key together")
	case r.TLSCert != "":
		cert, err := tls.LoadX509KeyPair(r.TLSCert, r.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("load registry tls client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// ReadAuth returns the user and password in AuthFile; ok is false when AuthFile is empty. The
// file holds one "user:password" (surrounding whitespace ignored); neither part may be empty,
// and the user may not hold a colon, as ZooKeeper's digest scheme splits at the first one.
func (r Registry) ReadAuth() (user, password string, ok bool, err error) {
	if r.AuthFile == "" {
		return "", "", false, nil
	}
	b, err := os.ReadFile(r.AuthFile)
	if err != nil {
		return "", "", false, fmt.Errorf("read registry auth file: %w", err)
	}
	user, password, found := strings.Cut(strings.TrimSpace(string(b)), ":")
	switch {
	case !found:
		return "", "", false, fmt.Errorf("registry auth file %s: want user:password, found no colon", r.AuthFile)
	case user == "":
		return "", "", false, fmt.Errorf("registry auth file %s: want user:password, the user is empty", r.AuthFile)
	case password == "":
		return "", "", false, fmt.Errorf("registry auth file %s: want user:password, the password is empty", r.AuthFile)
	case strings.ContainsFunc(user+password, unicode.IsControl):
		return "", "", false, fmt.Errorf("registry auth file %s: want one line user:password, found a control character", r.AuthFile)
	}
	return user, password, true, nil
}

// DB is the PostgreSQL connection.
type DB struct {
	// DSN is the lib/pq connection string: a postgres:// or postgresql:// URL with a host,
	// or a key=value string with host=. Defaults to
	// "postgres://zksched@127.0.0.1:5432/zksched?sslmode=disable", the local development
	// database (whose password `bin/services.sh env` adds to the DSN it gives); lib/pq would
	// otherwise require TLS, which a local server does not offer.
	DSN string `yaml:"dsn"`

	// MaxConns caps the node's pooled PostgreSQL connections. Defaults to 20, enough for a
	// worker's completions and log writes at 16 slots. A node also holds a listening
	// connection and one that sends wake-ups, and a worker two more for its claims: keep
	// masters × (MaxConns + 2) + workers × (MaxConns + 4) under the server's max_connections.
	MaxConns int `yaml:"max-conns"`

	// ReplyTimeout is how long a master's or worker's statement waits for PostgreSQL's reply
	// before it fails and its connection is dropped; the caller retries on another. Defaults
	// to 1m, far above any statement of a node. It ends what a context cannot: lib/pq only
	// asks the server to cancel, and a connection whose server went silent (a link cut behind
	// a proxy that stays up) would hold its statement, and the node's work, for ever.
	ReplyTimeout time.Duration `yaml:"reply-timeout"`

	// PatroniURLs are the REST APIs of the Patroni nodes that run PostgreSQL, when they do
	// (http://host:8008): `zksched zk nodes` and the Cluster page ask the first that answers
	// for the primary and the standbys. Empty by default: they are then read from
	// pg_stat_replication on the server the DSN reaches, which shows a standby's address only
	// to a role with pg_read_all_stats.
	PatroniURLs []string `yaml:"patroni-urls"`
}

// Node is what the node advertises to the others.
type Node struct {
	// Host is the address other nodes and the UI use to reach this one; it is the first part
	// of the node identity host:port_startMillis. Empty in [Defaults], which stays free of
	// side effects: [Load] fills an empty Host with the machine's first non-loopback IPv4
	// address of an up interface, else 127.0.0.1. Set it on machines with several
	// interfaces, or behind NAT, to the address the others can reach.
	Host string `yaml:"host"`

	// StateDir is the folder of what a node keeps for its own user between starts: the API
	// token a master generates when it is given no credential (api-token). Empty in
	// [Defaults]: [Load] fills an empty StateDir with $XDG_STATE_HOME/zksched, else
	// $HOME/.local/state/zksched, so that the CLI run by the same user on the same machine
	// finds the token without being told where. A master creates it with mode 0700.
	StateDir string `yaml:"state-dir"`
}

// Master configures the master role.
type Master struct {
	// Port is the master's HTTP port for the API, the web UI and /metrics. Defaults to 5678.
	// It is part of the node identity, so two masters on one host need different ports.
	Port int `yaml:"port"`

	// PollInterval is how often a master looks for work in PostgreSQL without being woken
	// by a NOTIFY. Defaults to 1 s. NOTIFY is the fast path; the poll claims new instances
	// and checks workflow timeouts, and every 10th poll re-advances every instance the master
	// drives, which bounds the delay when a notification is lost (a listener reconnecting
	// rescans at once).
	PollInterval time.Duration `yaml:"poll-interval"`

	// MisfireThreshold is how late a master may make a schedule's fire and still count it
	// as on time. Defaults to 1 m. An older fire was missed — no master could fire it, as
	// during a cluster-wide stop — and follows its schedule's misfire policy (skip, run-once,
	// run-all). Keep it above the time a master takes to fail over or restart, so that a
	// restart does not turn one late fire into a misfire.
	MisfireThreshold time.Duration `yaml:"misfire-threshold"`
}

// API configures the HTTP API and the web UI every master serves on master.port.
type API struct {
	// Token, when set, is the token of an admin named "admin", required (or a user's token
	// from UsersFile) by every API call (Authorization: Bearer <token>) and by every page of
	// the web UI, whose login form starts a session. Empty by default: without a token or a
	// users file the master generates a token into node.state-dir (see [GeneratedTokenFile])
	// and serves only on loopback (see AllowUnauthenticated). At least 16 characters. Prefer
	// TokenFile (or ZKSCHED_API_TOKEN), which keeps the secret out of the config file.
	Token string `yaml:"token"`

	// TokenFile is a file whose content, surrounding whitespace trimmed, is the token. Empty
	// by default. Set Token or TokenFile, not both. It is read when the master starts:
	// restart the masters to change the token (which also ends the token's UI sessions). A
	// file that does not exist is created with a random token, mode 0600 (several masters
	// of one user share it: the first creates it, the others read it); one that its group or
	// others may read stops the master at start, since whoever reads it is an admin.
	TokenFile string `yaml:"token-file"`

	// UsersFile is a file of users, one a line: "NAME ROLE sha256:HEX", where ROLE is
	// viewer, operator or admin and HEX the SHA-256 of the user's token (see [ReadUsersFile];
	// `zksched user add` writes the lines). Empty by default: the only user is then the
	// token's, an admin named "admin". The masters re-read the file when it changes, so a
	// user added or removed takes effect within a second, without a restart. A file that
	// does not exist yet holds no user (the master says so at start); one that is malformed
	// stops the process at start with the line at fault.
	UsersFile string `yaml:"users-file"`

	// AllowUnauthenticated makes a master with neither a token nor a users file serve every
	// caller as an anonymous admin, on node.host. False by default: such a master generates
	// a token (see [GeneratedTokenFile]) and serves only on loopback (127.0.0.1), since
	// anyone who reaches an open API can run any shell command on every worker, and loopback
	// admits every local user. Set it only on a machine and a network that admit nobody
	// else; the master warns at every start.
	AllowUnauthenticated bool `yaml:"allow-unauthenticated"`

	// AllowedHosts are the names, besides the node's own (node.host, the machine's hostname,
	// 127.0.0.1, localhost, ::1 and the listening address), that a request's Host header may
	// carry, such as a load balancer's DNS name. Empty by default. Any other Host is refused
	// with 421: a web page whose DNS name was rebound to a master's address cannot reach
	// the API through a browser inside the network.
	AllowedHosts []string `yaml:"allowed-hosts"`

	// TLSCert and TLSKey are the PEM files of the certificate (with its chain) and key the
	// master serves HTTPS with. Empty by default: plain HTTP, for a private network or a
	// TLS-terminating proxy in front. Set both or neither; a pair that cannot be loaded stops
	// the master at start. They are read at start: restart the master to renew them.
	TLSCert string `yaml:"tls-cert"`
	TLSKey  string `yaml:"tls-key"`

	// CookieSecure treats plain HTTP as TLS for the UI's cookies and HSTS, for a master
	// behind a proxy that terminates TLS: the cookies are Secure and "__Host-" prefixed, and
	// answers carry Strict-Transport-Security. False by default, since over plain HTTP a
	// browser drops such cookies; over TLS they are always so.
	CookieSecure bool `yaml:"cookie-secure"`

	// PublicURL is the address users reach the web UI at, such as https://zksched.example.com:
	// notifications link to an instance's page under it. Empty by default: they carry no
	// link. An absolute http or https URL.
	PublicURL string `yaml:"public-url"`

	// RateLimit is how many requests a second each user (or, where no user is known, each
	// client address) may send a master; RateBurst how many at once before that rate applies.
	// Past them a request is answered 429 with a Retry-After, before any other work, and
	// counted in zksched_api_rate_limited_total. They default to 100 a second and 500: a
	// person in the web UI sends a few requests a second, `zksched logs --follow` about
	// three, so only a script in a loop or a flood reaches them, and one viewer can then no
	// longer keep a master busy alone. 0 turns the limit off.
	RateLimit int `yaml:"rate-limit"`
	RateBurst int `yaml:"rate-burst"`

	// HeavyReads is how many heavy reads (a workflow instance with its page of tasks and its
	// graph, a task instance, a log, the UI's overview; in the API and the UI) a master serves
	// at once, and HeavyReadWait how long one more waits for a place before it is answered 503
	// with a Retry-After of a second (counted in zksched_api_busy_total). They default to 4 and 2 s:
	// each read holds up to some MB while it runs, so this bounds what readers together can
	// hold, while a read waiting its turn behind a few others is served well within the wait.
	// 0 stands for the default.
	HeavyReads    int           `yaml:"heavy-reads"`
	HeavyReadWait time.Duration `yaml:"heavy-read-wait"`

	// HookSecretEnvPattern is the glob (Go's path.Match) every webhook trigger's secret-env
	// must match: the masters check deliveries against the secret in that variable, and
	// without the rule a workflow could name any of theirs (a database password, a token).
	// Checked when a file is stored and at each delivery. Defaults to ZKSCHED_HOOK_SECRET_*:
	// variables of that form hold hook secrets alone and, being ZKSCHED_*, never reach a task.
	// Here and in the two settings below, empty or 0 stands for the default.
	HookSecretEnvPattern string `yaml:"hook-secret-env-pattern"`
	// HookBodyLimit is the largest body of a webhook delivery, in bytes; a larger one is
	// answered 413. Defaults to 1048576 (1 MiB): GitHub caps its payloads at 25 MB but sends
	// pushes far smaller, and a delivery is read whole to check its signature.
	HookBodyLimit int `yaml:"hook-body-limit"`
	// HookDedupeWindow is how long a hook remembers a delivery id: a delivery with an id seen
	// within it starts nothing. Defaults to 24h, longer than any sender's automatic retries
	// (a redelivery by hand days later needs a wider window).
	HookDedupeWindow time.Duration `yaml:"hook-dedupe-window"`
}

// Authenticated reports whether the API asks who calls it: a token or a users file is set.
func (a API) Authenticated() bool {
	return a.Token != "" || a.TokenFile != "" || a.UsersFile != ""
}

// ResolveToken returns the API token: Token, or the content of TokenFile; "" when neither is
// set. A TokenFile that does not exist yet is an error wrapping
// [fs.ErrNotExist]: the master creates it at start.
func (a API) ResolveToken() (string, error) {
	if a.TokenFile == "" {
		return a.Token, nil
	}
	b, err := os.ReadFile(a.TokenFile)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Notify configures the notifications: who hears of a workflow that has no notify: of its
// own and of the cluster's events, and how the masters deliver them.
type Notify struct {
	// Default are the notify entries of every workflow without its own, and the only ones of
	// the cluster's events (node-fenced, failover), in a workflow file's form: on, then
	// webhook-url-env (with slack), email, or both. Empty by default: such workflows send
	// nothing. The masters store them in PostgreSQL at start (the last master to start
	// wins, so give every master the same).
	Default []NotifyEntry `yaml:"default"`
	// MaxAttempts is how many times a notification is tried before it is dead. Defaults
	// to 8.
	MaxAttempts int `yaml:"max-attempts"`
	// Timeout bounds one delivery (a webhook's request, a mail's session). Defaults to 10s.
	Timeout time.Duration `yaml:"timeout"`
	// Backoff is the wait before the first retry; each further retry waits twice the last,
	// up to MaxBackoff, with up to a fifth added at random so that masters do not retry in
	// step. Defaults to 10s.
	Backoff time.Duration `yaml:"backoff"`
	// MaxBackoff caps the wait between retries. Defaults to 1h.
	MaxBackoff time.Duration `yaml:"max-backoff"`
	// WebhookEnvPattern is the glob (Go's path.Match: *, ?, [a-z]) every webhook-url-env,
	// of a workflow file or of Default, must match: the masters post to the URL in that
	// variable, and without the rule a workflow could name any of theirs (PATH, a proxy
	// setting, a secret). Checked when a file is stored and again at each delivery. Defaults
	// to ZKSCHED_WEBHOOK_*: variables of that form hold webhook URLs alone and, being
	// ZKSCHED_*, never reach a task.
	WebhookEnvPattern string `yaml:"webhook-env-pattern"`
	// AllowPrivateTargets lets webhooks connect to loopback, link-local (169.254.169.254,
	// fe80::/10), unspecified and cloud metadata addresses, refused otherwise when the
	// connection is made, whatever the name resolved to or redirected through. Defaults to
	// false: a webhook is for another host, and those addresses are where a master's own
	// services and the cloud's credentials answer. RFC 1918 and fc00::/7 addresses are
	// always allowed, for chat servers on the internal network.
	AllowPrivateTargets bool `yaml:"allow-private-targets"`
	// Email is the SMTP server the masters mail through.
	Email SMTP `yaml:"email"`
}

// SMTP is the mail server of the notifications by email.
type SMTP struct {
	// Host is the server's name. Empty by default: mails fail, and are dead after their
	// tries, saying to set it.
	Host string `yaml:"host"`
	// Port is the server's port. Defaults to 587, the submission port.
	Port int `yaml:"port"`
	// From is the sender's address; required with a host.
	From string `yaml:"from"`
	// Username, when set, authenticates with PasswordEnv's password.
	Username string `yaml:"username"`
	// PasswordEnv names the environment variable holding the password, read by the masters
	// at start: the password is never in the config file.
	PasswordEnv string `yaml:"password-env"`
	// StartTLS requires STARTTLS before anything is sent. Defaults to true; false sends in
	// clear text, for a relay on the local network.
	StartTLS bool `yaml:"starttls"`
}

// NotifyEntry is one entry of notify.default: the events it hears and where they go.
type NotifyEntry struct {
	// Events lists the events: failure, success, timeout, deadline, task-failed,
	// node-fenced, failover. EventList reads it.
	Events []string `yaml:"events"`
	// On is the old name of Events, still read (YAML 1.1 tools read the key on: as true).
	On []string `yaml:"on"`
	// WebhookURLEnv names the environment variable holding the webhook's URL.
	WebhookURLEnv string `yaml:"webhook-url-env"`
	// Slack asks for a Slack-compatible body ({"text": ...}).
	Slack bool `yaml:"slack"`
	// Email lists the addresses mailed.
	Email []string `yaml:"email"`
}

// EventList is the events the entry hears: its events:, or its on:.
func (e NotifyEntry) EventList() []string {
	if len(e.Events) > 0 {
		return e.Events
	}
	return e.On
}

// NotifyEvents are the events notify.default may hear.
var NotifyEvents = []string{"failure", "success", "timeout", "deadline", "task-failed", "node-fenced", "failover"}

// HTTPTools is worker.http-tools: the bounds of the http tools of tool-calling agents.
type HTTPTools struct {
	// Allow are the base URLs an http tool's url must start with (scheme, host, port and path
	// prefix, e.g. https://tickets.example.com/api/). Empty: no http tool may run, and one
	// that tries fails its task naming this key.
	Allow []string `yaml:"allow"`
	// AllowPrivateTargets lets http tools connect to loopback, link-local and cloud metadata
	// addresses (see notify.allow-private-targets), which they are refused otherwise, at
	// connect time, whatever name resolved to them. Defaults to false.
	AllowPrivateTargets bool `yaml:"allow-private-targets"`
	// ResponseLimit is how many bytes of an answer's body the model is given; the rest is
	// cut, and the cut marked. Defaults to 65536. 1..16777216.
	ResponseLimit int `yaml:"response-limit"`
	// Timeout bounds one request. Defaults to 30 s.
	Timeout time.Duration `yaml:"timeout"`
}

// Worker configures the worker role.
type Worker struct {
	// Port is the worker's HTTP port for /metrics and /healthz. Defaults to 5679. It is part
	// of the node identity, so two workers on one host need different ports.
	Port int `yaml:"port"`

	// Slots is how many tasks the worker runs at once. Defaults to 16. Size it to the
	// machine and to what the tasks do: CPU-bound shell tasks want about one per core,
	// tasks that wait on LLMs or networks can have many more. 1..10000.
	Slots int `yaml:"slots"`

	// Groups are the worker groups whose tasks this worker claims. Defaults to ["default"],
	// the group of tasks that name none. Names are [A-Za-z0-9_.-]+; use groups to send tasks
	// to machines with the tools, data or GPUs they need.
	Groups []string `yaml:"groups"`

	// ShutdownTimeout is how long running tasks get to finish after SIGTERM before they are
	// stopped and handed back to the queue. Defaults to 30 s, long enough for short tasks
	// to finish during a rolling restart and short enough for a supervisor's stop timeout.
	// 0 hands every running task back at once.
	ShutdownTimeout time.Duration `yaml:"shutdown-timeout"`

	// KillGrace is how long a task's processes have between SIGTERM and SIGKILL.
	// Defaults to 2 s, time for a process to flush and clean up. It bounds how long a cut-off
	// worker takes to stop its tasks, so failover.delay must exceed it (see [Failover.Delay]).
	KillGrace time.Duration `yaml:"kill-grace"`

	// PollInterval is how often a worker looks for queued tasks without being woken by a
	// NOTIFY. Defaults to 1 s; like [Master.PollInterval] it only bounds the delay when a
	// notification is lost.
	PollInterval time.Duration `yaml:"poll-interval"`

	// SpreadWait is how long a worker leaves the other workers of its groups their share of
	// a burst of tasks. While they have free slots its claims take only its own share, so
	// that a burst spreads over the idle workers instead of filling the first to look (see
	// dao.Share), and it takes what is left once the tasks have waited this long. Defaults
	// to 100 ms: ample for a live worker, woken by the same notification, to come for its
	// share, and the most a share left to a worker that died (listed in the registry until
	// its session expires) waits. 0 turns the spread off: every claim takes all that the
	// worker's free slots hold.
	SpreadWait time.Duration `yaml:"spread-wait"`

	// LogLimit is how many bytes of a task's stdout and stderr are kept per attempt.
	// Defaults to 1048576 (1 MiB), so a chatty task cannot fill the database. 0 keeps no
	// output.
	LogLimit int `yaml:"log-limit"`

	// OutputLimit is the most bytes a task's output (a shell task's last line of stdout, an
	// llm's completion, an agent's last step) may have when the task names no output-limit.
	// Defaults to 1048576 (1 MiB). An output over its limit fails the task, naming the limit
	// and the size, unless the task says output-overflow: truncate. Outputs are stored in
	// PostgreSQL and copied into each task that reads them, so keep it modest. 1..OutputLimitMax.
	OutputLimit int `yaml:"output-limit"`

	// OutputLimitMax is the most a task's output-limit may ask for: a task that asks more
	// fails before it runs. Defaults to 16777216 (16 MiB). 1..67108864 ([MaxOutputLimit]).
	// Give every worker the same output-limit and output-limit-max, as a task may run on any
	// of them.
	OutputLimitMax int `yaml:"output-limit-max"`

	// HTTPTools bounds the http tools of tool-calling agents: where they may call and how
	// much of an answer the model gets back.
	HTTPTools HTTPTools `yaml:"http-tools"`

	// TaskCgroup is where each shell task attempt gets a cgroup v2 leaf of its own: one
	// holds every process the task starts, even one that leaves the task's process group
	// (setsid, a daemonizer), so all of them die when the attempt ends. [TaskCgroupAuto],
	// [TaskCgroupOff] or the absolute path of a cgroup v2 directory the worker may create
	// cgroups in. Defaults to "auto": under the worker's own cgroup, which under systemd
	// needs the unit's Delegate=yes. Without a usable cgroup the worker says why at start,
	// and each task's supervisor, a child subreaper, finds and kills its descendants
	// instead. A path that is not usable stops the worker at start.
	TaskCgroup string `yaml:"task-cgroup"`

	// TaskEnv names the variables of the worker's environment that shell tasks inherit
	// besides the defaults (executor.DefaultTaskEnv: PATH, HOME, USER, LOGNAME, SHELL, LANG,
	// LC_*, TZ, TMPDIR): names, or prefixes followed by * (AWS_*). Empty by default: a task gets those and its
	// own ZKSCHED_TASK_*, ZKSCHED_PARAM_*, ZKSCHED_UPSTREAM_*, ZKSCHED_ITEM and ZKSCHED_INDEX variables, and nothing else
	// the worker holds, so neither its database DSN, its API token nor a model key. An entry
	// that would let through a ZKSCHED_* variable or a provider's api-key-env is refused
	// ([Config.SecretEnvNames]).
	TaskEnv []string `yaml:"task-env"`

	// TaskUser is the user (a name or a numeric uid) shell tasks run as, with that user's
	// primary and supplementary groups, HOME, USER and LOGNAME, and its home as the working
	// directory of tasks that name none. Empty by default: tasks run as the worker's user. It
	// needs a worker running as root; set it there, or a task could read what the worker can
	// (its config file, the token file). Its supervisor stays root, to hold and kill it. A
	// worker not running as root, an unknown user, or a home or temporary directory the user
	// cannot write stops the worker at start.
	TaskUser string `yaml:"task-user"`

	// AllowRootTasks lets a worker running as root without TaskUser start, its shell tasks
	// then running as root. False by default: such a worker stops at start, since any
	// user who may submit a workflow would otherwise own the machine. Set it only where
	// the tasks are as trusted as root; the worker warns at every start.
	AllowRootTasks bool `yaml:"allow-root-tasks"`
}

// MaxOutputLimit is the most worker.output-limit-max may be: workflow.MaxOutputLimit, the
// most a task's output-limit may be.
const MaxOutputLimit = 64 << 20

// KillGraceMargin is how much longer than a worker's kill grace the leader waits, after the
// worker's session expired, before it re-queues the worker's tasks: time for the cut-off
// worker's watchdog tick and for clock-rate drift between it and the leader. Validation holds
// failover.delay at least worker.kill-grace plus this, and the leader's failover waits at
// least a worker's published kill grace plus this, whatever its own config says.
const KillGraceMargin = time.Second

// Failover configures how the leader fails over lost nodes.
type Failover struct {
	// Delay is how long the leader waits, after ZooKeeper has expired a node's session,
	// before fencing the node and re-queueing its work. Defaults to 5 s. It covers the lost
	// node's own stop — its watchdog tick and worker.kill-grace — plus clock-rate drift, so
	// the old run has ended before the new one starts; it must be at least
	// worker.kill-grace + 1 s ([KillGraceMargin]).
	Delay time.Duration `yaml:"delay"`

	// MarkerRetention is how long the fence markers of failed-over nodes are kept in
	// ZooKeeper. Defaults to 168 h (a week). A marker is what tells a node that comes back
	// from a long freeze or partition that it was fenced, so keep it longer than any outage
	// a node could return from.
	MarkerRetention time.Duration `yaml:"marker-retention"`

	// SweepInterval is how often the leader resyncs the registry with PostgreSQL even
	// without a ZooKeeper event. Defaults to 30 s. Watches fire once and can be lost across
	// reconnects; the sweep is what guarantees a lost node is found, the watches only make it
	// fast.
	SweepInterval time.Duration `yaml:"sweep-interval"`
}

// Retention configures how long the history of finished work is kept. The leader master
// deletes what is past its period every Interval, oldest first, in batches of BatchSize rows,
// each batch its own short transaction, so the tables stop growing once the periods have
// passed. Every period is measured on the database's clock from when the row's work ended; 0
// keeps those rows for ever. Durations take days: 30d, 1d12h.
type Retention struct {
	// Instances is how long a finished workflow instance (succeeded, failed or stopped) is
	// kept, with its task instances, their attempts, logs and agent checkpoints. Defaults to
	// 30d. An instance that is the child of a running parent, or the parent of a running
	// child, is kept until both have ended. The API and the UI answer the id of a purged
	// instance or task with 404 and a word on this setting. Notifications sent or dead are
	// kept as long, from when they were queued.
	Instances time.Duration `yaml:"instances"`

	// Logs is how long the task logs of a finished workflow instance are kept; the instance
	// and its tasks stay until Instances. Defaults to 7d: logs are most of what a finished
	// instance weighs. At most Instances (a purged instance takes its logs with it).
	Logs time.Duration `yaml:"logs"`

	// FailoverEvents is how long the record of a finished failover (failover_event) is kept.
	// Defaults to 90d, longer than Instances, so that every failed-over attempt still shown
	// can name its failover.
	FailoverEvents time.Duration `yaml:"failover-events"`

	// Fires is how long the record of a schedule's fire (schedule_fire) is kept, from when it
	// was made. Defaults to 30d. A fire record is what keeps a fire from being made twice: a
	// backfill over a period whose records were purged fires it again. Webhook deliveries'
	// records (hook_delivery) go with the same period, but never within
	// api.hook-dedupe-window.
	Fires time.Duration `yaml:"fires"`

	// AssetEvents is how long an asset event (asset_event) is kept, from when it was written,
	// with the rows that link it to the runs it started (asset_consumption). Defaults to
	// 30d, as Instances, so a run's page names the events that started it as long as the run
	// is kept. An event a consumer has not taken yet is kept whatever its age: the consumer
	// still waits on it.
	AssetEvents time.Duration `yaml:"asset-events"`

	// Audit is how long rows of the audit trail (audit_event) are kept. Defaults to 0, for
	// ever: the trail is append-only, and the leader's purge, which declares this period to
	// the database in its transaction, is the one writer it lets delete rows, only rows older
	// than the period.
	Audit time.Duration `yaml:"audit"`

	// Interval is how often the leader purges. Defaults to 1m. A round deletes batch after
	// batch until nothing is left past its period, so the interval bounds how long past its
	// period a row may stay, not how much is deleted.
	Interval time.Duration `yaml:"interval"`

	// BatchSize is how many rows one statement deletes (workflow instances, whose tasks go
	// with them, or instances whose logs go). Defaults to 500: each batch holds its row locks
	// for a short transaction only. 1..100000.
	BatchSize int `yaml:"batch-size"`
}

// Values of [Provider.Type]: the same as llm.ProviderOpenAI and the others, which a test
// checks.
const (
	// ProviderOpenAI is any server that speaks OpenAI's chat completions API: OpenAI itself,
	// or a local or hosted compatible server reached through [Provider.BaseURL].
	ProviderOpenAI = "openai"
	// ProviderOllama is an Ollama server.
	ProviderOllama = "ollama"
	// ProviderAnthropic is Anthropic's messages API.
	ProviderAnthropic = "anthropic"
	// ProviderOffline is zksched's built-in offline provider: it calls no model, and answers
	// each prompt with a short deterministic text derived from the prompt's words (its most
	// frequent terms and a digest). It is for the demo, tests, and trying workflows without a
	// model server; its answers say that they are offline.
	ProviderOffline = "offline"
)

// LLM configures the model providers that llm and agent tasks name.
type LLM struct {
	// Providers are the model providers by name; a task's provider field names one. Defaults
	// to one provider, "demo", of type offline, which the demo workflow uses: point it at a
	// real model by setting its keys, for example ZKSCHED_LLM_PROVIDERS_DEMO_TYPE=openai,
	// ZKSCHED_LLM_PROVIDERS_DEMO_MODEL=gpt-4o-mini and
	// ZKSCHED_LLM_PROVIDERS_DEMO_API_KEY_ENV=OPENAI_API_KEY. Names are letters, digits, '_',
	// '.' and '-'; in environment variables they are upper-cased with '-' and '.' turned
	// into '_'.
	Providers map[string]Provider `yaml:"providers"`
}

// Provider is one model provider: where it is, which model, and how hard zksched may use it.
// RequestsPerMinute and TokensPerMinute hold for the whole cluster, kept in PostgreSQL;
// MaxConcurrent is per worker process (a limit on running tasks across workers is a pool, see
// [Config.Pools]).
type Provider struct {
	// Type is [ProviderOpenAI], [ProviderOllama], [ProviderAnthropic] or [ProviderOffline].
	Type string `yaml:"type"`

	// BaseURL is the API's base URL. Empty means the provider's own service
	// (https://api.openai.com/v1, https://api.anthropic.com/v1) or, for ollama, a local server
	// at http://127.0.0.1:11434. For an OpenAI-compatible server, give the URL that
	// /chat/completions is appended to, such as http://127.0.0.1:8000/v1.
	BaseURL string `yaml:"base-url"`

	// Model is the model name sent with each request, such as gpt-4o-mini or llama3.2.
	// Required except for the offline type.
	Model string `yaml:"model"`

	// APIKeyEnv is the name of the environment variable that holds the API key, such as
	// OPENAI_API_KEY. The key itself is never written in the config, and never logged. The
	// worker reads the variable when it first uses the provider; a task that names the provider
	// while the variable is unset fails with a message naming it. Required for anthropic;
	// empty for an OpenAI-compatible server that needs no key; not used by ollama and offline.
	APIKeyEnv string `yaml:"api-key-env"`

	// Timeout bounds one request. 0 (the default) means 2 m. A request that times out is
	// retried like a server error; the task's own timeout bounds all of its requests.
	Timeout time.Duration `yaml:"timeout"`

	// RequestsPerMinute caps the requests all the workers together send to the provider in
	// any 60 s window, retries included: each request is admitted by the database against
	// every worker's requests of the last minute (a second more, for the way to the
	// provider), and one over the cap waits. A 429 with Retry-After from a provider with a
	// limit holds every worker back until then. Give every worker the same value: each
	// admits its own requests against its own. 0 (the default) means no cap.
	RequestsPerMinute int `yaml:"requests-per-minute"`

	// TokensPerMinute caps the tokens of the requests all the workers together send to the
	// provider in any 60 s window, as RequestsPerMinute does requests. A request reserves
	// its prompt's estimate (a token per 4 bytes) and the task's max-tokens before it is
	// sent, and its reservation becomes the usage the provider reports once it answers; a
	// request that reserves more than the cap fails at once. 0 (the default) means no cap.
	TokensPerMinute int `yaml:"tokens-per-minute"`

	// MaxConcurrent caps the requests one worker has in flight to the provider at once; a
	// request over the cap waits. 0 (the default) means no cap.
	MaxConcurrent int `yaml:"max-concurrent"`

	// MaxAttempts is how many times one model call is tried when it fails with a rate limit
	// (HTTP 429), a server error (5xx), a timeout or a network error, with exponential
	// backoff and jitter between tries (honouring Retry-After) and never past the task's
	// timeout. 0 (the default) means 5; 1 means no retries. A bad request or an
	// authentication error is never retried. 0..100.
	MaxAttempts int `yaml:"max-attempts"`

	// InputPrice and OutputPrice are what a million tokens the model is sent (prompt) and
	// gives back (completion) cost, in the currency your bills are in. They price the turns
	// of tool-calling agents, shown with each turn and bounded by a task's max-cost. 0 (the
	// default) means unknown: a task with max-cost on such a provider fails before its
	// first turn.
	InputPrice  float64 `yaml:"input-price"`
	OutputPrice float64 `yaml:"output-price"`
}

// Log configures the process's logs.
type Log struct {
	// Level is the lowest level logged: trace, debug, info, warn or error. Defaults to
	// "info", which logs state changes (claims, failovers) without per-poll noise.
	Level string `yaml:"level"`

	// Format is [LogFormatJSON] or [LogFormatConsole]. Defaults to "json" for log
	// collectors; "console" reads better in a terminal.
	Format string `yaml:"format"`
}

// Defaults returns the configuration used for every key that neither the file nor the
// environment sets. It has no side effects: Node.Host stays empty and [Load] detects it.
func Defaults() Config {
	return Config{
		Registry: Registry{
			Servers:        []string{"127.0.0.1:2181"},
			Root:           "/zksched",
			SessionTimeout: 20 * time.Second,
			OnLost:         OnLostStop,
		},
		DB: DB{
			DSN:          "postgres://zksched@127.0.0.1:5432/zksched?sslmode=disable",
			MaxConns:     20,
			ReplyTimeout: time.Minute,
			PatroniURLs:  []string{},
		},
		Master: Master{
			Port:             5678,
			PollInterval:     time.Second,
			MisfireThreshold: time.Minute,
		},
		API: API{
			AllowedHosts:  []string{},
			RateLimit:     100,
			RateBurst:     500,
			HeavyReads:    4,
			HeavyReadWait: 2 * time.Second,
			// The default of workflow.DefaultHookSecretEnvPattern; conf imports no package of
			// zksched, and a test keeps the two equal.
			HookSecretEnvPattern: "ZKSCHED_HOOK_SECRET_*",
			HookBodyLimit:        1 << 20,
			HookDedupeWindow:     24 * time.Hour,
		},
		Worker: Worker{
			Port:            5679,
			Slots:           16,
			Groups:          []string{"default"},
			ShutdownTimeout: 30 * time.Second,
			KillGrace:       2 * time.Second,
			PollInterval:    time.Second,
			SpreadWait:      100 * time.Millisecond,
			LogLimit:        1 << 20,
			OutputLimit:     1 << 20,
			OutputLimitMax:  16 << 20,
			TaskCgroup:      TaskCgroupAuto,
			TaskEnv:         []string{},
			HTTPTools:       HTTPTools{Allow: []string{}, ResponseLimit: 64 << 10, Timeout: 30 * time.Second},
		},
		Failover: Failover{
			Delay:           5 * time.Second,
			MarkerRetention: 168 * time.Hour,
			SweepInterval:   30 * time.Second,
		},
		Retention: Retention{
			Instances:      30 * 24 * time.Hour,
			Logs:           7 * 24 * time.Hour,
			FailoverEvents: 90 * 24 * time.Hour,
			Fires:          30 * 24 * time.Hour,
			AssetEvents:    30 * 24 * time.Hour,
			Interval:       time.Minute,
			BatchSize:      500,
		},
		LLM: LLM{
			Providers: map[string]Provider{"demo": {Type: ProviderOffline}},
		},
		Log: Log{
			Level:  "info",
			Format: LogFormatJSON,
		},
		Tracing: Tracing{
			SampleRatio: 1,
			Headers:     map[string]string{},
			QueueSize:   2048,
		},
		Notify: Notify{
			Default:     []NotifyEntry{},
			MaxAttempts: 8,
			Timeout:     10 * time.Second,
			Backoff:     10 * time.Second,
			MaxBackoff:  time.Hour,
			// The default of workflow.DefaultWebhookEnvPattern; conf imports no
			// package of zksched, and a test keeps the two equal.
			WebhookEnvPattern: "ZKSCHED_WEBHOOK_*",
			Email:             SMTP{Port: 587, StartTLS: true},
		},
	}
}
