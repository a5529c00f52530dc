package conf_test

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/workflow"
)

// writeConfig writes content to a zksched.yaml of the test's own and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "zksched.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaults(t *testing.T) {
	t.Parallel()

	got := conf.Defaults()
	if err := got.Validate(); err != nil {
		t.Fatalf("Defaults().Validate() = %v, want nil", err)
	}
	for _, tt := range []struct {
		key       string
		got, want any
	}{
		{"registry.servers", got.Registry.Servers, []string{"127.0.0.1:2181"}},
		{"registry.root", got.Registry.Root, "/zksched"},
		{"registry.session-timeout", got.Registry.SessionTimeout, 20 * time.Second},
		{"registry.on-lost", got.Registry.OnLost, "stop"},
		{"db.dsn", got.DB.DSN, "postgres://zksched@127.0.0.1:5432/zksched?sslmode=disable"},
		{"db.max-conns", got.DB.MaxConns, 20},
		{"node.host", got.Node.Host, ""},
		{"master.port", got.Master.Port, 5678},
		{"master.poll-interval", got.Master.PollInterval, time.Second},
		{"worker.port", got.Worker.Port, 5679},
		{"worker.slots", got.Worker.Slots, 16},
		{"worker.groups", got.Worker.Groups, []string{"default"}},
		{"worker.shutdown-timeout", got.Worker.ShutdownTimeout, 30 * time.Second},
		{"worker.kill-grace", got.Worker.KillGrace, 2 * time.Second},
		{"worker.poll-interval", got.Worker.PollInterval, time.Second},
		{"worker.spread-wait", got.Worker.SpreadWait, 100 * time.Millisecond},
		{"worker.log-limit", got.Worker.LogLimit, 1048576},
		{"worker.output-limit", got.Worker.OutputLimit, 1048576},
		{"worker.output-limit-max", got.Worker.OutputLimitMax, 16777216},
		{"worker.task-cgroup", got.Worker.TaskCgroup, "auto"},
		{"worker.http-tools.allow", got.Worker.HTTPTools.Allow, []string{}},
		{"worker.http-tools.allow-private-targets", got.Worker.HTTPTools.AllowPrivateTargets, false},
		{"worker.http-tools.response-limit", got.Worker.HTTPTools.ResponseLimit, 65536},
		{"worker.http-tools.timeout", got.Worker.HTTPTools.Timeout, 30 * time.Second},
		{"failover.delay", got.Failover.Delay, 5 * time.Second},
		{"failover.marker-retention", got.Failover.MarkerRetention, 168 * time.Hour},
		{"failover.sweep-interval", got.Failover.SweepInterval, 30 * time.Second},
		{"log.level", got.Log.Level, "info"},
		{"log.format", got.Log.Format, "json"},
	} {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.key, tt.got, tt.want)
		}
	}

	// Each call returns lists of its own, so a caller changing one changes no other.
	got.Registry.Servers[0] = "changed:1"
	if s := conf.Defaults().Registry.Servers[0]; s != "127.0.0.1:2181" {
		t.Errorf("after changing a returned list, Defaults().Registry.Servers[0] = %q", s)
	}
}

// TestExampleFile keeps zksched.example.yaml, which documents every key with its default,
// from drifting from the code.
func TestExampleFile(t *testing.T) {
	t.Parallel()

	got, err := conf.Load("zksched.example.yaml", nil)
	if err != nil {
		t.Fatalf("Load(example) error: %v", err)
	}
	want := conf.Defaults()
	want.Node.Host = got.Node.Host         // detected, so it depends on the machine
	want.Node.StateDir = got.Node.StateDir // from the environment: empty here
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("example file loads as\n%+v\nwant Defaults()\n%+v", *got, want)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		path string // a file in testdata, or "" for yaml
		yaml string // written to a temporary file when set
		env  []string
		want func(c *conf.Config) // changes Defaults() into the wanted result
	}{
		{
			name: "no file no environment",
			want: func(*conf.Config) {},
		},
		{
			name: "file beats defaults",
			path: "testdata/override.yaml",
			want: func(c *conf.Config) {
				c.Registry.Servers = []string{"zk1:2181", "zk2:2181"}
				c.Registry.SessionTimeout = 4 * time.Second
				c.DB.DSN = "host=db.internal port=5432 user=zksched dbname=zksched sslmode=disable"
				c.Node.Host = "10.0.0.5"
				c.Master.Port = 6000
				c.Worker.Slots = 8
				c.Worker.Groups = []string{"gpu", "default"}
				c.Worker.KillGrace = 3 * time.Second
				c.Failover.Delay = 6 * time.Second
				c.Log.Level = "debug"
			},
		},
		{
			name: "environment beats file",
			path: "testdata/override.yaml",
			env: []string{
				"ZKSCHED_REGISTRY_SESSION_TIMEOUT=2s",
				"ZKSCHED_WORKER_SLOTS=4",
				"ZKSCHED_DB_DSN=postgres://u:p@db2:5432/zksched",
				"ZKSCHED_NODE_HOST=10.0.0.6",
				"ZKSCHED_FAILOVER_MARKER_RETENTION=24h",
				"ZKSCHED_LOG_FORMAT=console",
			},
			want: func(c *conf.Config) {
				c.Registry.Servers = []string{"zk1:2181", "zk2:2181"}
				c.Registry.SessionTimeout = 2 * time.Second
				c.DB.DSN = "postgres://u:p@db2:5432/zksched"
				c.Node.Host = "10.0.0.6"
				c.Master.Port = 6000
				c.Worker.Slots = 4
				c.Worker.Groups = []string{"gpu", "default"}
				c.Worker.KillGrace = 3 * time.Second
				c.Failover.Delay = 6 * time.Second
				c.Failover.MarkerRetention = 24 * time.Hour
				c.Log.Level = "debug"
				c.Log.Format = "console"
			},
		},
		{
			name: "list from environment is comma-separated",
			env: []string{
				"ZKSCHED_REGISTRY_SERVERS=127.0.0.1:2181,127.0.0.1:2182, zk3:2181",
				"ZKSCHED_WORKER_GROUPS=default",
			},
			want: func(c *conf.Config) {
				c.Registry.Servers = []string{"127.0.0.1:2181", "127.0.0.1:2182", "zk3:2181"}
			},
		},
		{
			name: "task cgroup from the environment",
			env:  []string{"ZKSCHED_WORKER_TASK_CGROUP=off"},
			want: func(c *conf.Config) { c.Worker.TaskCgroup = "off" },
		},
		{
			name: "later variable wins",
			env:  []string{"ZKSCHED_WORKER_SLOTS=4", "ZKSCHED_WORKER_SLOTS=5"},
			want: func(c *conf.Config) { c.Worker.Slots = 5 },
		},
		{
			name: "variables outside the config sections are ignored",
			env: []string{
				"ZKSCHED_TASK_INSTANCE=42",
				"ZKSCHED_ATTEMPT=3",
				"ZKSCHED_WORKER=10.0.0.5:5679_1763802000123",
				"ZKSCHED_TEST_ZK=127.0.0.1:2181",
				"ZKSCHED_CONFIG=/etc/zksched.yaml",
				"ZKSCHED_=x",
				"zksched_worker_slots=x",
				"PATH=/usr/bin",
				"NOEQUALSIGN",
			},
			want: func(*conf.Config) {},
		},
		{
			name: "empty variable counts as unset",
			env:  []string{"ZKSCHED_WORKER_SLOTS=", "ZKSCHED_REGISTRY_SERVERS="},
			want: func(*conf.Config) {},
		},
		{
			name: "empty value in the file keeps the default",
			yaml: "registry:\n  servers:\n  root: ~\nworker:\n",
			want: func(*conf.Config) {},
		},
		{
			name: "empty file sets nothing",
			yaml: "# nothing here\n",
			want: func(*conf.Config) {},
		},
		{
			name: "anchors and merge keys",
			yaml: "master: &poll\n  poll-interval: 2s\nworker:\n  <<: *poll\n  slots: 3\n",
			want: func(c *conf.Config) {
				c.Master.PollInterval = 2 * time.Second
				c.Worker.PollInterval = 2 * time.Second
				c.Worker.Slots = 3
			},
		},
		{
			name: "key=value DSN with quoted values",
			yaml: "db:\n  dsn: \"host = db user=zksched password='it\\\\'s secret' sslmode=disable\"\n",
			want: func(c *conf.Config) {
				c.DB.DSN = `host = db user=zksched password='it\'s secret' sslmode=disable`
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tt.path
			if tt.yaml != "" {
				path = writeConfig(t, tt.yaml)
			}
			got, err := conf.Load(path, tt.env)
			if err != nil {
				t.Fatalf("Load error: %v", err)
			}
			want := conf.Defaults()
			tt.want(&want)
			if want.Node.Host == "" {
				if got.Node.Host == "" {
					t.Fatal("Load left node.host empty, want it detected")
				}
				want.Node.Host = got.Node.Host
			}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("Load =\n%+v\nwant\n%+v", *got, want)
			}
		})
	}
}

func TestLoadDetectsHost(t *testing.T) {
	t.Parallel()

	c, err := conf.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := netip.ParseAddr(c.Node.Host)
	if err != nil || !addr.Is4() {
		t.Fatalf("node.host = %q, want an IPv4 address", c.Node.Host)
	}
	if addr.IsLoopback() {
		return // 127.0.0.1 is the fallback of a machine without a usable interface
	}
	if addr.IsLinkLocalUnicast() {
		t.Errorf("node.host = %v, want a routable address, not a link-local one", addr)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()

	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := conf.Load(path, nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(missing file) error = %v, want one wrapping fs.ErrNotExist", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "conf: read config file: ") || !strings.Contains(msg, path) {
		t.Errorf("error = %q, want it to say it could not read %s", msg, path)
	}
}

func TestLoadRejects(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		path string // a file in testdata, or "" for yaml
		yaml string // written to a temporary zksched.yaml when set
		env  []string
		want []string // each must appear in the error
	}{
		{
			name: "unknown key, with its path and line",
			path: "testdata/unknown_key.yaml",
			want: []string{`conf: testdata/unknown_key.yaml:3: unknown key "registry.sesion-timeout"`},
		},
		{
			name: "unknown section",
			yaml: "registry:\n  root: /a\nwrker:\n  slots: 3\n",
			want: []string{`zksched.yaml:3: unknown key "wrker"`},
		},
		{
			name: "every unknown key reported",
			yaml: "registry:\n  rot: /a\nworker:\n  slot: 3\n",
			want: []string{`zksched.yaml:2: unknown key "registry.rot"`, `zksched.yaml:4: unknown key "worker.slot"`},
		},
		{
			name: "duplicate key",
			yaml: "worker:\n  slots: 3\n  slots: 4\n",
			want: []string{`zksched.yaml:3: duplicate key "worker.slots" (first at line 2)`},
		},
		{
			name: "malformed YAML, with file and line",
			path: "testdata/malformed.yaml",
			want: []string{`conf: testdata/malformed.yaml:2: did not find expected ',' or ']'`},
		},
		{
			name: "bad indentation",
			yaml: "registry:\n  root: /a\n   servers: [a]\n",
			want: []string{`zksched.yaml:3: mapping values are not allowed in this context`},
		},
		{
			name: "tab indentation",
			yaml: "registry:\n\troot: /a\n",
			want: []string{`zksched.yaml:2: found character that cannot start any token`},
		},
		{
			name: "not a mapping",
			path: "testdata/not_mapping.yaml",
			want: []string{`conf: testdata/not_mapping.yaml:1: not a YAML mapping`},
		},
		{
			name: "scalar document",
			yaml: "just text\n",
			want: []string{`zksched.yaml:1: not a YAML mapping`},
		},
		{
			name: "two documents",
			yaml: "worker:\n  slots: 3\n---\nworker:\n  slots: 4\n",
			want: []string{`zksched.yaml:3: more than one YAML document`},
		},
		{
			name: "section not a mapping",
			yaml: "registry: zk1:2181\n",
			want: []string{`zksched.yaml:1: registry: want a mapping, got "zk1:2181"`},
		},
		{
			name: "bad duration in file",
			yaml: "registry:\n  session-timeout: 10x\n",
			want: []string{`zksched.yaml:2: registry.session-timeout: invalid duration "10x"`},
		},
		{
			name: "duration without unit",
			yaml: "failover:\n  delay: 5\n",
			want: []string{`failover.delay: invalid duration "5"`},
		},
		{
			name: "bad integer in file",
			yaml: "worker:\n  slots: many\n",
			want: []string{`zksched.yaml:2: worker.slots: invalid integer "many"`},
		},
		{
			name: "integer out of range",
			yaml: "worker:\n  log-limit: 99999999999999999999\n",
			want: []string{`worker.log-limit: integer "99999999999999999999" out of range`},
		},
		{
			name: "list where a string belongs",
			yaml: "registry:\n  root: [a, b]\n",
			want: []string{`zksched.yaml:2: registry.root: want a string, got a list`},
		},
		{
			name: "string where a list belongs",
			yaml: "registry:\n  servers: 127.0.0.1:2181\n",
			want: []string{`zksched.yaml:2: registry.servers: want a list, got "127.0.0.1:2181"`},
		},
		{
			name: "mapping inside a list",
			yaml: "worker:\n  groups:\n    - default\n    - {name: gpu}\n",
			want: []string{`zksched.yaml:4: worker.groups[1]: want a string, got a mapping`},
		},
		{
			name: "unknown anchor",
			yaml: "worker:\n  slots: *nope\n",
			want: []string{`zksched.yaml: unknown anchor 'nope' referenced`},
		},
		{
			name: "mapping that merges itself",
			yaml: "worker: &w\n  <<: *w\n",
			want: []string{`worker: a mapping merges itself`},
		},
		{
			name: "unknown key in a known section of the environment",
			env:  []string{"ZKSCHED_REGISTRY_SERVRS=127.0.0.1:2181"},
			want: []string{"conf: ZKSCHED_REGISTRY_SERVRS: unknown key"},
		},
		{
			name: "variable naming a section, not a key",
			env:  []string{"ZKSCHED_REGISTRY_=x"},
			want: []string{"conf: ZKSCHED_REGISTRY_: unknown key"},
		},
		{
			name: "bad duration from environment",
			env:  []string{"ZKSCHED_REGISTRY_SESSION_TIMEOUT=10x"},
			want: []string{`conf: ZKSCHED_REGISTRY_SESSION_TIMEOUT: registry.session-timeout: invalid duration "10x"`},
		},
		{
			name: "bad integer from environment",
			env:  []string{"ZKSCHED_WORKER_SLOTS=four"},
			want: []string{`conf: ZKSCHED_WORKER_SLOTS: worker.slots: invalid integer "four"`},
		},
		{
			name: "file and environment problems together",
			yaml: "worker:\n  slot: 3\n",
			env:  []string{"ZKSCHED_LOG_LEVL=debug"},
			want: []string{`zksched.yaml:2: unknown key "worker.slot"`, "ZKSCHED_LOG_LEVL: unknown key"},
		},
		{
			name: "empty server list",
			yaml: "registry:\n  servers: []\n",
			want: []string{"conf: registry.servers: empty"},
		},
		{
			name: "server not host:port",
			env:  []string{"ZKSCHED_REGISTRY_SERVERS=127.0.0.1:2181,zk2"},
			want: []string{`conf: registry.servers[1]: "zk2" is not host:port`},
		},
		{
			name: "malformed DSN",
			env:  []string{"ZKSCHED_DB_DSN=db.internal:5432"},
			want: []string{"conf: db.dsn: want a postgres:// URL or key=value pairs"},
		},
		{
			name: "bad port",
			yaml: "master:\n  port: 70000\n",
			want: []string{"conf: master.port: 70000 is out of range 1..65535"},
		},
		{
			name: "failover delay shorter than kill grace",
			env:  []string{"ZKSCHED_WORKER_KILL_GRACE=5s"},
			want: []string{"conf: failover.delay: 5s is shorter than worker.kill-grace (5s) plus 1s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tt.path
			if tt.yaml != "" {
				path = writeConfig(t, tt.yaml)
			}
			got, err := conf.Load(path, tt.env)
			if err == nil {
				t.Fatalf("Load = %+v, want an error", got)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error =\n%v\nwant it to contain\n%s", err, want)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		change func(c *conf.Config)
		want   string // "" for valid
	}{
		{"defaults", func(*conf.Config) {}, ""},
		{"ensemble", func(c *conf.Config) { c.Registry.Servers = []string{"zk1:2181", "zk2:2181", "[::1]:2181"} }, ""},
		{"empty servers", func(c *conf.Config) { c.Registry.Servers = nil }, "conf: registry.servers: empty"},
		{"server without port", func(c *conf.Config) { c.Registry.Servers = []string{"zk1"} }, `registry.servers[0]: "zk1" is not host:port`},
		{"server without host", func(c *conf.Config) { c.Registry.Servers = []string{":2181"} }, `registry.servers[0]: ":2181" is not host:port`},
		{"server port out of range", func(c *conf.Config) { c.Registry.Servers = []string{"zk1:0"} }, `"zk1:0" has a port outside 1..65535`},
		{"server port not a number", func(c *conf.Config) { c.Registry.Servers = []string{"zk1:zk"} }, `"zk1:zk" has a port outside 1..65535`},
		{"nested root", func(c *conf.Config) { c.Registry.Root = "/apps/zksched" }, ""},
		{"relative root", func(c *conf.Config) { c.Registry.Root = "zksched" }, `registry.root: "zksched" is not an absolute znode path`},
		{"empty root", func(c *conf.Config) { c.Registry.Root = "" }, `registry.root: "" is not an absolute znode path`},
		{"slash root", func(c *conf.Config) { c.Registry.Root = "/" }, `registry.root: "/" would mix`},
		{"root with trailing slash", func(c *conf.Config) { c.Registry.Root = "/zksched/" }, `registry.root: "/zksched/" ends with /`},
		{"root with empty element", func(c *conf.Config) { c.Registry.Root = "/a//b" }, `registry.root: "/a//b" has an empty, . or .. element`},
		{"root under /zookeeper", func(c *conf.Config) { c.Registry.Root = "/zookeeper/x" }, "which ZooKeeper reserves"},
		{"session timeout 1s", func(c *conf.Config) { c.Registry.SessionTimeout = time.Second }, ""},
		{"session timeout under 1s", func(c *conf.Config) { c.Registry.SessionTimeout = 500 * time.Millisecond }, "registry.session-timeout: 500ms is less than the minimum, 1s"},
		{"on-lost keep-running", func(c *conf.Config) { c.Registry.OnLost = conf.OnLostKeepRunning }, ""},
		{"on-lost unknown", func(c *conf.Config) { c.Registry.OnLost = "pause" }, `registry.on-lost: "pause": want one of stop, keep-running`},
		{"postgresql URL", func(c *conf.Config) { c.DB.DSN = "postgresql://u@db/zksched" }, ""},
		{"URL with socket host parameter", func(c *conf.Config) { c.DB.DSN = "postgres:///zksched?host=/var/run/postgresql" }, ""},
		{"key=value DSN", func(c *conf.Config) { c.DB.DSN = "host=/var/run/postgresql dbname=zksched" }, ""},
		{"empty DSN", func(c *conf.Config) { c.DB.DSN = "" }, "db.dsn: empty"},
		{"URL without host", func(c *conf.Config) { c.DB.DSN = "postgres:///zksched" }, "db.dsn: the URL has no host"},
		{"URL with bad port", func(c *conf.Config) { c.DB.DSN = "postgres://u:secret@db:x/zksched" }, "db.dsn: malformed URL"},
		{"key=value without host", func(c *conf.Config) { c.DB.DSN = "user=zksched dbname=zksched" }, "db.dsn: the key=value DSN has no host="},
		{"key=value without =", func(c *conf.Config) { c.DB.DSN = "host=db zksched" }, `db.dsn: want a postgres:// URL or key=value pairs: missing = after "zksched"`},
		{"key=value unterminated quote", func(c *conf.Config) { c.DB.DSN = "host='db" }, `unterminated quoted value for "host"`},
		{"mysql URL", func(c *conf.Config) { c.DB.DSN = "mysql://db/zksched" }, "db.dsn: want a postgres:// URL or key=value pairs"},
		{"zero max conns", func(c *conf.Config) { c.DB.MaxConns = 0 }, "db.max-conns: 0 is out of range"},
		{"host with slash", func(c *conf.Config) { c.Node.Host = "a/b" }, `node.host: "a/b"`},
		{"host with space", func(c *conf.Config) { c.Node.Host = "a b" }, `node.host: "a b"`},
		{"host name", func(c *conf.Config) { c.Node.Host = "worker-1.example.com" }, ""},
		{"master port zero", func(c *conf.Config) { c.Master.Port = 0 }, "master.port: 0 is out of range 1..65535"},
		{"worker port too high", func(c *conf.Config) { c.Worker.Port = 65536 }, "worker.port: 65536 is out of range 1..65535"},
		{"master poll zero", func(c *conf.Config) { c.Master.PollInterval = 0 }, "master.poll-interval: 0s: must be positive"},
		{"slots zero", func(c *conf.Config) { c.Worker.Slots = 0 }, "worker.slots: 0 is out of range 1..10000"},
		{"slots too many", func(c *conf.Config) { c.Worker.Slots = 10001 }, "worker.slots: 10001 is out of range 1..10000"},
		{"slots maximum", func(c *conf.Config) { c.Worker.Slots = 10000 }, ""},
		{"empty groups", func(c *conf.Config) { c.Worker.Groups = []string{} }, "worker.groups: empty"},
		{"malformed group", func(c *conf.Config) { c.Worker.Groups = []string{"default", "gpu nodes"} }, `worker.groups[1]: "gpu nodes": a group name is`},
		{"empty group", func(c *conf.Config) { c.Worker.Groups = []string{""} }, `worker.groups[0]: "": a group name is`},
		{"group name over 128 bytes", func(c *conf.Config) { c.Worker.Groups = []string{strings.Repeat("g", 129)} },
			`worker.groups[0]: "` + strings.Repeat("g", 129) + `": a group name is 1 to 128`},
		{"repeated group", func(c *conf.Config) { c.Worker.Groups = []string{"a", "a"} }, `worker.groups[1]: "a" is listed twice`},
		{"group punctuation", func(c *conf.Config) { c.Worker.Groups = []string{"gpu.a100_x-1"} }, ""},
		{"zero shutdown timeout", func(c *conf.Config) { c.Worker.ShutdownTimeout = 0 }, ""},
		{"negative shutdown timeout", func(c *conf.Config) { c.Worker.ShutdownTimeout = -time.Second }, "worker.shutdown-timeout: -1s: must not be negative"},
		{"negative kill grace", func(c *conf.Config) { c.Worker.KillGrace = -time.Second }, "worker.kill-grace: -1s: must not be negative"},
		{"worker poll negative", func(c *conf.Config) { c.Worker.PollInterval = -time.Second }, "worker.poll-interval: -1s: must be positive"},
		{"no spread", func(c *conf.Config) { c.Worker.SpreadWait = 0 }, ""},
		{"negative spread wait", func(c *conf.Config) { c.Worker.SpreadWait = -time.Millisecond }, "worker.spread-wait: -1ms: must not be negative"},
		{"negative log limit", func(c *conf.Config) { c.Worker.LogLimit = -1 }, "worker.log-limit: -1 is negative"},
		{"output limit over its max", func(c *conf.Config) { c.Worker.OutputLimit = 32 << 20 }, "worker.output-limit: 33554432"},
		{"output limit zero", func(c *conf.Config) { c.Worker.OutputLimit = 0 }, "worker.output-limit: 0"},
		{"output limit max raised", func(c *conf.Config) { c.Worker.OutputLimitMax, c.Worker.OutputLimit = 64<<20, 32<<20 }, ""},
		{"output limit max over 64 MiB", func(c *conf.Config) { c.Worker.OutputLimitMax = 64<<20 + 1 }, "worker.output-limit-max: 67108865"},
		{"task cgroup off", func(c *conf.Config) { c.Worker.TaskCgroup = "off" }, ""},
		{"http tools allowed", func(c *conf.Config) { c.Worker.HTTPTools.Allow = []string{"https://tickets.example.com/api/"} }, ""},
		{"http tools base not a URL", func(c *conf.Config) { c.Worker.HTTPTools.Allow = []string{"tickets.example.com"} },
			`worker.http-tools.allow: "tickets.example.com": want an http or https URL`},
		{"http tools base with a query", func(c *conf.Config) { c.Worker.HTTPTools.Allow = []string{"https://a.example.com/?x=1"} },
			`worker.http-tools.allow: "https://a.example.com/?x=1"`},
		{"negative price", func(c *conf.Config) {
			c.LLM.Providers = map[string]conf.Provider{"p": {Type: "offline", InputPrice: -1}}
		}, "input-price -1 and output-price 0 must be finite and not negative"},
		{"http tools response limit zero", func(c *conf.Config) { c.Worker.HTTPTools.ResponseLimit = 0 }, "worker.http-tools.response-limit: 0"},
		{"task cgroup path", func(c *conf.Config) { c.Worker.TaskCgroup = "/sys/fs/cgroup/zksched.slice" }, ""},
		{"task cgroup relative", func(c *conf.Config) { c.Worker.TaskCgroup = "zksched.slice" },
			`worker.task-cgroup: "zksched.slice": want auto, off or the absolute, clean path of a cgroup v2 directory`},
		{"task cgroup unclean", func(c *conf.Config) { c.Worker.TaskCgroup = "/sys/fs/cgroup/../x" }, `worker.task-cgroup: "/sys/fs/cgroup/../x"`},
		{"task cgroup empty", func(c *conf.Config) { c.Worker.TaskCgroup = "" }, `worker.task-cgroup: "": want auto, off`},
		{"delay exactly grace plus 1s", func(c *conf.Config) { c.Failover.Delay = 3 * time.Second }, ""},
		{"delay under grace plus 1s", func(c *conf.Config) { c.Failover.Delay = 2500 * time.Millisecond },
			"failover.delay: 2.5s is shorter than worker.kill-grace (2s) plus 1s: after its session expires a cut-off worker still needs"},
		{"zero marker retention", func(c *conf.Config) { c.Failover.MarkerRetention = 0 }, "failover.marker-retention: 0s: must be positive"},
		{"zero sweep interval", func(c *conf.Config) { c.Failover.SweepInterval = 0 }, "failover.sweep-interval: 0s: must be positive"},
		{"log level trace", func(c *conf.Config) { c.Log.Level = "trace" }, ""},
		{"unknown log level", func(c *conf.Config) { c.Log.Level = "verbose" }, `log.level: "verbose": want one of trace, debug, info, warn, error`},
		{"unknown log format", func(c *conf.Config) { c.Log.Format = "text" }, `log.format: "text": want one of json, console`},
		{"notify default", func(c *conf.Config) {
			c.Notify.Default = []conf.NotifyEntry{{On: []string{"failure", "node-fenced", "failover"}, WebhookURLEnv: "ZKSCHED_WEBHOOK_OPS", Slack: true},
				{On: []string{"deadline"}, Email: []string{"ops@example.com"}}}
		}, ""},
		{"notify default outside the webhook pattern", func(c *conf.Config) {
			c.Notify.Default = []conf.NotifyEntry{{On: []string{"failure"}, WebhookURLEnv: "PATH"}}
		}, `notify.default[0].webhook-url-env: "PATH" does not match notify.webhook-env-pattern (ZKSCHED_WEBHOOK_*)`},
		{"notify default in a wider webhook pattern", func(c *conf.Config) {
			c.Notify.WebhookEnvPattern = "*_WEBHOOK"
			c.Notify.Default = []conf.NotifyEntry{{On: []string{"failure"}, WebhookURLEnv: "OPS_WEBHOOK"}}
		}, ""},
		{"notify empty webhook pattern", func(c *conf.Config) { c.Notify.WebhookEnvPattern = "" },
			`notify.webhook-env-pattern: "" is not a glob of variable names`},
		{"notify malformed webhook pattern", func(c *conf.Config) { c.Notify.WebhookEnvPattern = "ZKSCHED_[" },
			`notify.webhook-env-pattern: "ZKSCHED_[" is not a glob of variable names`},
		{"notify no events", func(c *conf.Config) { c.Notify.Default = []conf.NotifyEntry{{Email: []string{"a@example.com"}}} },
			"notify.default[0].events: empty: list the events (failure, success, timeout, deadline, task-failed, node-fenced, failover)"},
		{"notify unknown event", func(c *conf.Config) {
			c.Notify.Default = []conf.NotifyEntry{{On: []string{"fenced"}, Email: []string{"a@example.com"}}}
		}, `notify.default[0].events[0]: unknown event "fenced"`},
		{"notify event twice", func(c *conf.Config) {
			c.Notify.Default = []conf.NotifyEntry{{On: []string{"success", "success"}, Email: []string{"a@example.com"}}}
		}, `notify.default[0].events[1]: event "success" is listed twice`},
		{"notify events and on", func(c *conf.Config) {
			c.Notify.Default = []conf.NotifyEntry{{Events: []string{"failure"}, On: []string{"success"}, Email: []string{"a@example.com"}}}
		}, "notify.default[0].on: give events or on (its old name), not both"},
		{"notify no channel", func(c *conf.Config) { c.Notify.Default = []conf.NotifyEntry{{On: []string{"failure"}}} },
			"notify.default[0]: no channel: give webhook-url-env, email, or both"},
		{"notify bad variable", func(c *conf.Config) {
			c.Notify.Default = []conf.NotifyEntry{{On: []string{"failure"}, WebhookURLEnv: "https://hooks.example.com"}}
		}, `notify.default[0].webhook-url-env: "https://hooks.example.com" is not an environment variable name`},
		{"notify slack without webhook", func(c *conf.Config) {
			c.Notify.Default = []conf.NotifyEntry{{On: []string{"failure"}, Slack: true, Email: []string{"a@example.com"}}}
		}, "notify.default[0].slack: slack: true needs webhook-url-env"},
		{"notify bad address", func(c *conf.Config) {
			c.Notify.Default = []conf.NotifyEntry{{On: []string{"failure"}, Email: []string{"ops"}}}
		}, `notify.default[0].email[0]: "ops" is not an email address like ops@example.com`},
		{"notify zero attempts", func(c *conf.Config) { c.Notify.MaxAttempts = 0 }, "notify.max-attempts"},
		{"notify zero timeout", func(c *conf.Config) { c.Notify.Timeout = 0 }, "notify.timeout: 0s: must be positive"},
		{"notify zero backoff", func(c *conf.Config) { c.Notify.Backoff = 0 }, "notify.backoff: 0s: must be positive"},
		{"notify max backoff under backoff", func(c *conf.Config) { c.Notify.MaxBackoff = time.Second },
			"notify.max-backoff: 1s is shorter than notify.backoff (10s)"},
		{"notify email", func(c *conf.Config) {
			c.Notify.Email = conf.SMTP{Host: "smtp.example.com", Port: 587, From: "zksched@example.com", Username: "u", PasswordEnv: "SMTP_PASSWORD"}
		}, ""},
		{"notify email without from", func(c *conf.Config) { c.Notify.Email.Host = "smtp.example.com" },
			`notify.email.from: "" is not an email address like zksched@example.com`},
		{"notify email password without user", func(c *conf.Config) {
			c.Notify.Email = conf.SMTP{Host: "smtp.example.com", Port: 25, From: "z@example.com", PasswordEnv: "P"}
		}, "notify.email.username: empty: password-env needs a username"},
		{"notify email bad port", func(c *conf.Config) {
			c.Notify.Email = conf.SMTP{Host: "smtp.example.com", Port: 0, From: "z@example.com"}
		}, "notify.email.port"},
		{"public url", func(c *conf.Config) { c.API.PublicURL = "https://zksched.example.com" }, ""},
		{"public url relative", func(c *conf.Config) { c.API.PublicURL = "zksched.example.com" },
			`api.public-url: "zksched.example.com": want an absolute http or https URL`},
		{"tracing on", func(c *conf.Config) {
			c.Tracing.Enabled, c.Tracing.Endpoint, c.Tracing.SampleRatio = true, "http://127.0.0.1:4318", 0.25
		}, ""},
		{"tracing sample ratio above 1", func(c *conf.Config) { c.Tracing.SampleRatio = 1.5 },
			"tracing.sample-ratio: 1.5: want a share from 0"},
		{"tracing sample ratio negative", func(c *conf.Config) { c.Tracing.SampleRatio = -0.1 }, "tracing.sample-ratio"},
		{"tracing endpoint without scheme", func(c *conf.Config) { c.Tracing.Endpoint = "collector:4318" },
			`tracing.endpoint: "collector:4318": want the collector's OTLP/HTTP URL`},
		{"tracing queue size 0", func(c *conf.Config) { c.Tracing.QueueSize = 0 }, "tracing.queue-size"},
		{"patroni urls", func(c *conf.Config) { c.DB.PatroniURLs = []string{"http://10.0.0.1:8008", "https://pg2:8008"} }, ""},
		{"patroni url without scheme", func(c *conf.Config) { c.DB.PatroniURLs = []string{"10.0.0.1:8008"} },
			`db.patroni-urls[0]: "10.0.0.1:8008": want a Patroni REST API's http or https URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := conf.Defaults()
			tt.change(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Errorf("Validate() = nil, want an error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("Validate() = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()

	c := conf.Defaults()
	c.Registry.Servers = nil
	c.Worker.Slots = 0
	c.Log.Format = "xml"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want three problems")
	}
	if got, want := strings.Count(err.Error(), "conf: "), 3; got != want {
		t.Errorf("Validate() reported %d problems, want %d:\n%v", got, want, err)
	}
}

func TestDSNErrorHidesPassword(t *testing.T) {
	t.Parallel()

	c := conf.Defaults()
	c.DB.DSN = "postgres://zksched:hunter2@db:port/zksched"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want a malformed URL error")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Validate() = %v, which shows the password", err)
	}
}

// TestLoadNotify: notify.default reads in a workflow file's form, and ZKSCHED_NOTIFY_* and
// ZKSCHED_API_PUBLIC_URL override the delivery's keys.
func TestLoadNotify(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "zksched.yaml")
	yaml := `notify:
  default:
    - {on: [failure, timeout, deadline], webhook-url-env: ZKSCHED_WEBHOOK_OPS}   # the variable is read by the masters
    - {on: [node-fenced, failover], webhook-url-env: ZKSCHED_WEBHOOK_CLUSTER, slack: true}
    - {on: [failure], email: [ops@example.com]}
  max-attempts: 3
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// A webhook's variable is no config key: ZKSCHED_WEBHOOK is no section.
	c, err := conf.Load(path, []string{"ZKSCHED_NOTIFY_BACKOFF=2s", "ZKSCHED_API_PUBLIC_URL=https://zksched.example.com",
		"ZKSCHED_WEBHOOK_OPS=https://hooks.example.com/x"})
	if err != nil {
		t.Fatal(err)
	}
	want := []conf.NotifyEntry{
		{On: []string{"failure", "timeout", "deadline"}, WebhookURLEnv: "ZKSCHED_WEBHOOK_OPS"},
		{On: []string{"node-fenced", "failover"}, WebhookURLEnv: "ZKSCHED_WEBHOOK_CLUSTER", Slack: true},
		{On: []string{"failure"}, Email: []string{"ops@example.com"}},
	}
	if !reflect.DeepEqual(c.Notify.Default, want) || c.Notify.MaxAttempts != 3 || c.Notify.Backoff != 2*time.Second ||
		c.API.PublicURL != "https://zksched.example.com" || c.Notify.AllowPrivateTargets ||
		c.Notify.WebhookEnvPattern != workflow.DefaultWebhookEnvPattern {
		t.Fatalf("notify = %+v, public url %q", c.Notify, c.API.PublicURL)
	}
	if c.API.HookSecretEnvPattern != workflow.DefaultHookSecretEnvPattern {
		t.Errorf("api.hook-secret-env-pattern defaults to %q; workflow's default is %q", c.API.HookSecretEnvPattern, workflow.DefaultHookSecretEnvPattern)
	}
}
