package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/workflow"
)

// ClusterReader reads the registry for the cluster view (registry.Client).
type ClusterReader interface {
	Cluster(ctx context.Context) (registry.Cluster, error)
}

// Config configures a Server.
type Config struct {
	// NodeID is the identity of the master serving; pages show it and logs carry it.
	NodeID string
	// Version is the binary's version, shown in the page footer.
	Version string
	// Token, when set, is the token of an admin named "admin" (see the package doc).
	Token string
	// UsersFile, when set, is the file of users with roles (conf.ReadUsersFile), read again
	// when it changes.
	UsersFile string
	// AllowUnauthenticated serves every request as an anonymous admin; it is the only way
	// to have a server without Token or UsersFile (api.allow-unauthenticated), so that no
	// server grants a role without a credential unless told to.
	AllowUnauthenticated bool
	// Hosts are the names a request's Host may carry besides the loopback ones: the node's
	// host and the operator's api.allowed-hosts. Any other Host is refused with 421.
	Hosts []string
	// CookieSecure says that requests reach a TLS proxy in front of the master: cookies are
	// then Secure and "__Host-" prefixed, and HSTS is sent, as they are over TLS.
	CookieSecure bool
	// Cluster reads ZooKeeper for the cluster view.
	Cluster ClusterReader
	// PatroniURLs are db.patroni-urls: where the cluster view reads PostgreSQL's primary and
	// standbys (else from pg_stat_replication).
	PatroniURLs []string
	// Ready reports whether the node may take work, for /readyz.
	Ready func() Readiness
	// InstanceRetention is retention.instances: how long finished workflow instances are kept
	// (0: for ever). An instance or task that is not found but whose id was issued is then
	// said to have perhaps been purged.
	InstanceRetention time.Duration
	// Metrics serves /metrics; nil leaves it out.
	Metrics http.Handler
	// MaxBody is the largest request body accepted. Defaults to 1 MiB, well above any
	// workflow file, and small enough that a client cannot make a master buffer much.
	MaxBody int64
	// RequestTimeout bounds the database and ZooKeeper work of one request. Defaults to 30 s.
	RequestTimeout time.Duration
	// WebhookEnvPattern is notify.webhook-env-pattern: a workflow file naming a
	// webhook-url-env that does not match it is refused when stored. Empty is
	// workflow.DefaultWebhookEnvPattern.
	WebhookEnvPattern string
	// HookSecretEnvPattern is api.hook-secret-env-pattern: a workflow file whose webhook
	// trigger names a secret-env that does not match it is refused when stored, and its
	// deliveries are refused. Empty is workflow.DefaultHookSecretEnvPattern.
	HookSecretEnvPattern string
	// HookBodyLimit is api.hook-body-limit, the largest delivery body read; 0 is 1 MiB.
	HookBodyLimit int64
	// HookDedupeWindow is api.hook-dedupe-window, how long a hook remembers a delivery id;
	// 0 is 24 h.
	HookDedupeWindow time.Duration
	// LookupEnv reads the hooks' secret variables; nil is os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// PublicURL is api.public-url: the hooks' URLs are shown under it. Empty shows their paths.
	PublicURL string
	// HookDelivered, unless nil, counts each webhook delivery by its outcome (see
	// hookOutcome).
	HookDelivered func(outcome string)
	// AssetEmitted, unless nil, counts each asset event emitted through the API.
	AssetEmitted func()
	// HeavyReads is how many heavy reads (an instance's detail or page, a task's, a log, the
	// overview) run at once; HeavyReadWait how long one waits for a place before it is
	// answered 503. They default to 4 and 2 s (conf.API has the reasons).
	HeavyReads    int
	HeavyReadWait time.Duration
	// RateLimit is how many requests a second each principal may make, RateBurst how many at
	// once; past them it is answered 429. 0 turns the limit off (conf.API has the defaults).
	RateLimit float64
	RateBurst int
	Log       zerolog.Logger
}

// Readiness is the answer of /readyz: Ready decides the status code (200 or 503), Details are
// shown as they are.
type Readiness struct {
	Ready   bool
	Details map[string]any
}

// Server is the HTTP handler of a master.
type Server struct {
	cfg   Config
	db    *dao.DB
	auth  *authenticator
	csrf  *csrfKey
	hosts hostSet
	pages *pages
	h     http.Handler
	// need is the route table's role of each pattern (see routes).
	need map[string]Role
	// parses holds a place for each workflow file being read and parsed; see
	// maxConcurrentParses.
	parses chan struct{}
	// specs caches the definitions of s.db.
	specs lifecycle.Specs
	// openapi is the OpenAPI document of /api/v1 (see openapi.go).
	openapi []byte
	// refusalsUnrecorded counts the refused changes whose audit row could not be written.
	refusalsUnrecorded atomic.Int64
	// heavyReads bounds the heavy reads running at once, rate the requests of each
	// principal; nil rate: no limit (see limits.go).
	heavyReads *heavyReads
	rate       *rateLimiter
	// hookFails limits wrong signatures of hook deliveries per address (see hooks.go).
	hookFails *failLimiter
}

// maxConcurrentParses is how many workflow files the API reads and parses at once. Each
// takes up to a body and a parse's memory (some tens of MB for a hostile file), so this keeps
// a flood of them from growing the master by more than a few times that; storing
// definitions is rare, and a request waits for its turn within its timeout.
const maxConcurrentParses = 2

const defaultMaxBody = 1 << 20

// New returns the handler of a master's HTTP port.
func New(cfg Config, db *dao.DB) (*Server, error) {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = defaultMaxBody
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.HeavyReads <= 0 {
		cfg.HeavyReads = 4
	}
	if cfg.HeavyReadWait <= 0 {
		cfg.HeavyReadWait = 2 * time.Second
	}
	if cfg.Ready == nil {
		cfg.Ready = func() Readiness { return Readiness{Ready: true} }
	}
	if cfg.WebhookEnvPattern == "" {
		cfg.WebhookEnvPattern = workflow.DefaultWebhookEnvPattern
	}
	if cfg.HookSecretEnvPattern == "" {
		cfg.HookSecretEnvPattern = workflow.DefaultHookSecretEnvPattern
	}
	if cfg.HookBodyLimit <= 0 {
		cfg.HookBodyLimit = defaultHookBodyLimit
	}
	if cfg.HookDedupeWindow <= 0 {
		cfg.HookDedupeWindow = defaultHookDedupeWindow
	}
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	if cfg.HookDelivered == nil {
		cfg.HookDelivered = func(string) {}
	}
	if cfg.AssetEmitted == nil {
		cfg.AssetEmitted = func() {}
	}
	p, err := newPages()
	if err != nil {
		return nil, err
	}
	auth, err := newAuthenticator(cfg, db, time.Now)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, db: db, auth: auth, csrf: &csrfKey{db: db}, hosts: newHostSet(cfg.Hosts), pages: p, need: map[string]Role{},
		parses: make(chan struct{}, maxConcurrentParses), heavyReads: newHeavyReads(cfg.HeavyReads, cfg.HeavyReadWait),
		hookFails: newFailLimiter(time.Now)}
	if cfg.RateLimit > 0 {
		s.rate = newRateLimiter(cfg.RateLimit, max(cfg.RateBurst, 1), time.Now)
	}
	mux := http.NewServeMux()
	s.routes(mux)
	if s.openapi, err = openAPI(cfg.Version, s.need); err != nil {
		return nil, fmt.Errorf("api: the OpenAPI document: %w", err)
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(s.refuseCrossOrigin))
	// A delivery carries no cookie: its signature is its credential, whatever its origin.
	cop.AddInsecureBypassPattern(hookRoute)
	s.h = s.logRequests(s.strictTransport(s.recoverPanics(s.checkHost(cop.Handler(s.limitBodies(s.requireAuth(s.checkText(mux))))))))
	return s, nil
}

// AuthFailures is how many wrong tokens (bearer or login) the server has refused.
func (s *Server) AuthFailures() int64 { return s.auth.failures.Load() }

// AuthRateLimited is how many wrong credentials the server refused with 429, their address
// having failed too often.
func (s *Server) AuthRateLimited() int64 { return s.auth.limited.Load() }

// RefusalsUnrecorded is how many refused changes the server could not record in the audit
// trail (each also logged at error level).
func (s *Server) RefusalsUnrecorded() int64 { return s.refusalsUnrecorded.Load() }

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

// routes is the route table. Every route names the least role that may use it, so a new
// route cannot leave it out: a viewer reads (every GET); an operator also acts on instances
// and schedules, and runs a stored definition from its page in the UI (as a trigger runs a
// schedule's); an admin also stores definitions and submits through the API. A route that changes
// something (any method but GET) for a mere viewer is refused at start.
func (s *Server) routes(mux *http.ServeMux) {
	health(mux, s.cfg.NodeID, "master", s.cfg.Ready, s.cfg.Metrics)

	api := func(pattern string, need Role, h handler, c ...change) {
		s.route(mux, pattern, need, h, s.writeError, c...)
	}
	api("GET /api/v1/definitions", RoleViewer, s.apiDefinitions)
	api("POST /api/v1/definitions", RoleAdmin, s.apiDefinitionSubmit, change{dao.AuditDefinitionStore, noTarget})
	api("GET /api/v1/definitions/{name}", RoleViewer, s.apiDefinitionVersions)
	api("GET /api/v1/definitions/{name}/versions/{version}", RoleViewer, s.apiDefinitionVersion)
	api("GET /api/v1/workflow-instances", RoleViewer, s.apiWorkflows)
	api("POST /api/v1/workflow-instances", RoleAdmin, s.apiWorkflowCreate, change{dao.AuditWorkflowSubmit, noTarget})
	api("GET /api/v1/workflow-instances/{id}", RoleViewer, s.heavy(s.apiWorkflow))
	api("POST /api/v1/workflow-instances/{id}/stop", RoleOperator, s.apiWorkflowStop, change{dao.AuditWorkflowStop, workflowTarget})
	api("POST /api/v1/workflow-instances/{id}/rerun", RoleOperator, s.apiWorkflowRerun, change{dao.AuditWorkflowRerun, workflowTarget})
	api("GET /api/v1/task-instances", RoleViewer, s.apiTasks)
	api("GET /api/v1/task-instances/{id}", RoleViewer, s.heavy(s.apiTask))
	api("GET /api/v1/task-instances/{id}/log", RoleViewer, s.heavy(s.apiTaskLog))
	api("POST /api/v1/task-instances/{id}/kill", RoleOperator, s.apiTaskKill, change{dao.AuditTaskKill, taskTarget})
	api("POST /api/v1/task-instances/{id}/rerun", RoleOperator, s.apiTaskRerun, change{dao.AuditTaskRerun, taskTarget})
	api("POST /api/v1/task-instances/{id}/signal", RoleOperator, s.apiTaskSignal, change{dao.AuditTaskSignal, taskTarget})
	api("GET /api/v1/cluster", RoleViewer, s.apiCluster)
	api("GET /api/v1/failover-events", RoleViewer, s.apiFailoverEvents)
	api("GET /api/v1/schedules", RoleViewer, s.apiSchedules)
	api("POST /api/v1/schedules/{name}/enable", RoleOperator, s.apiScheduleEnable(true), change{dao.AuditScheduleEnable, scheduleTarget})
	api("POST /api/v1/schedules/{name}/disable", RoleOperator, s.apiScheduleEnable(false), change{dao.AuditScheduleDisable, scheduleTarget})
	api("POST /api/v1/schedules/{name}/trigger", RoleOperator, s.apiScheduleTrigger, change{dao.AuditScheduleTrigger, scheduleTarget})
	api("GET /api/v1/assets", RoleViewer, s.apiAssets)
	api("POST /api/v1/assets/{name}/events", RoleOperator, s.apiAssetEmit, change{dao.AuditAssetEmit, assetTarget})
	api("GET /api/v1/audit-events", RoleViewer, s.apiAuditEvents)
	api("GET /api/v1/notifications", RoleViewer, s.apiNotifications)
	api("GET /api/v1/hooks", RoleViewer, s.apiHooks)
	api("GET /api/v1/triggers", RoleViewer, s.apiTriggers)
	// Open (see requireAuth's open): the delivery's signature is the credential.
	api(hookRoute, RoleViewer, s.apiHookDeliver)
	// Open (see requireAuth's open): the document holds no data.
	api("GET "+openAPIPath, RoleViewer, s.apiOpenAPI)
	api("/api/", RoleViewer, func(w http.ResponseWriter, r *http.Request) error {
		// The most general pattern: nothing else matched this method and path. Tell a wrong
		// method from a wrong path.
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "/api/" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			return errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", "))
		}
		return errorf(http.StatusNotFound, "no API endpoint %s", r.URL.Path)
	})

	page := func(pattern string, need Role, h handler, c ...change) {
		s.route(mux, pattern, need, h, s.fail, c...)
	}
	page("GET /{$}", RoleViewer, s.heavy(s.pageOverview))
	page("GET /tasks", RoleViewer, s.pageTasks)
	page("GET /tasks/{id}", RoleViewer, s.heavy(s.pageTask))
	page("POST /tasks/{id}/kill", RoleOperator, s.formTaskKill, change{dao.AuditTaskKill, taskTarget})
	page("POST /tasks/{id}/rerun", RoleOperator, s.formTaskRerun, change{dao.AuditTaskRerun, taskTarget})
	page("POST /tasks/{id}/signal", RoleOperator, s.formTaskSignal, change{dao.AuditTaskSignal, taskTarget})
	page("GET /workflows", RoleViewer, s.pageWorkflows)
	page("GET /workflows/{id}", RoleViewer, s.heavy(s.pageWorkflow))
	page("POST /workflows/{id}/stop", RoleOperator, s.formWorkflowStop, change{dao.AuditWorkflowStop, workflowTarget})
	page("POST /workflows/{id}/rerun", RoleOperator, s.formWorkflowRerun, change{dao.AuditWorkflowRerun, workflowTarget})
	page("GET /definitions", RoleViewer, s.pageDefinitions)
	page("GET /definitions/{name}", RoleViewer, s.pageDefinition)
	page("POST /definitions/{name}/run", RoleOperator, s.formDefinitionRun, change{dao.AuditWorkflowSubmit, definitionTarget})
	page("GET /schedules", RoleViewer, s.pageSchedules)
	page("POST /schedules/{name}/enable", RoleOperator, s.formScheduleEnable(true), change{dao.AuditScheduleEnable, scheduleTarget})
	page("POST /schedules/{name}/disable", RoleOperator, s.formScheduleEnable(false), change{dao.AuditScheduleDisable, scheduleTarget})
	page("POST /schedules/{name}/trigger", RoleOperator, s.formScheduleTrigger, change{dao.AuditScheduleTrigger, scheduleTarget})
	page("GET /cluster", RoleViewer, s.pageCluster)
	page("GET /audit", RoleViewer, s.pageAudit)
	page("GET /notifications", RoleViewer, s.pageNotifications)
	page("GET /hooks", RoleViewer, s.pageHooks)
	page("GET /assets", RoleViewer, s.pageAssets)
	page("GET /triggers", RoleViewer, s.pageTriggers)
	// Open (see requireAuth's open): a role means nothing before a login.
	page("GET /login", RoleViewer, s.pageLogin)
	page("POST /login", RoleViewer, s.formLogin)
	page("POST /logout", RoleViewer, s.formLogout)
	mux.Handle("GET /static/", s.staticHandler())
	page("/", RoleViewer, func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, "no page %s", r.URL.Path)
	})
}

// stateless are the routes that change nothing for which a viewer's role is right although
// their method is not GET.
var stateless = map[string]bool{"/api/": true, "/": true, "POST /login": true, "POST /logout": true}

// signed are the routes that change something for whoever signs the request with a secret
// of their own instead of a user's role: the webhook deliveries.
var signed = map[string]bool{hookRoute: true}

// handler serves a request; an error it returns is answered by the route (JSON for the API,
// an error page for the UI).
type handler = func(http.ResponseWriter, *http.Request) error

// change names the audit_event row a route's change writes: its action and its target.
type change struct {
	action string
	target func(r *http.Request) string
}

// route adds pattern to mux, served only to principals whose role allows need. A route given
// a change writes its audit_event row (see audited), refusals included.
func (s *Server) route(mux *http.ServeMux, pattern string, need Role, h handler, fail func(http.ResponseWriter, *http.Request, error), c ...change) {
	if !need.Valid() {
		panic(fmt.Sprintf("api: route %s: unknown role %q", pattern, need))
	}
	if need == RoleViewer && !strings.HasPrefix(pattern, "GET ") && !stateless[pattern] && !signed[pattern] {
		panic(fmt.Sprintf("api: route %s changes state: it needs a role above viewer", pattern))
	}
	s.need[pattern] = need
	checkPath := pathCheck(pattern)
	checked := func(w http.ResponseWriter, r *http.Request) error {
		if err := checkPath(r); err != nil {
			return err
		}
		// The refusal names the route, not the path: a refused change's audit row folds the
		// refusals of every id and name of the route into one.
		if p := principalOf(r); !p.Role.Allows(need) {
			logFor(r).Info().Str("remote", r.RemoteAddr).Str("user", p.Name).Str("role", string(p.Role)).
				Str("route", pattern).Str("needs", string(need)).Msg("request refused: role too low")
			return errorf(http.StatusForbidden, "%s needs the %s role; %s is %s", pattern, need, p.Name, p.Role)
		}
		return h(w, r)
	}
	// The audit wraps the role check, so a refused attempt at a change is in the trail too.
	for _, c := range c {
		checked = s.audited(c.action, c.target, checked)
	}
	// The rate limit comes first: a request over it costs no audit row and no database work.
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		err := s.limitRate(w, r)
		if err == nil {
			err = checked(w, r)
		}
		if err != nil {
			fail(w, r, err)
		}
	})
}

// may reports whether the principal of r may use the route pattern, for pages to show only
// the actions their user may take.
func (s *Server) may(r *http.Request, pattern string) bool {
	need, ok := s.need[pattern]
	if !ok {
		panic("api: no route " + pattern)
	}
	return principalOf(r).Role.Allows(need)
}

// fail answers a failed request: JSON for the API and non-browser clients, an error page for
// the UI.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if isAPI(r) {
		s.writeError(w, r, err)
		return
	}
	err = s.explainMissing(r.Context(), err)
	status, msg := classify(err)
	logFailure(r, status, err)
	s.render(w, r, status, "error", &errorPage{base: base{Title: http.StatusText(status)}, Status: status, StatusText: http.StatusText(status), Message: msg})
}

func isAPI(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics"
}

// limitBodies caps every request body: a read past the limit fails with *http.MaxBytesError,
// answered with 413. A hook delivery's limit is HookBodyLimit, and its handler answers the
// 413, so that the refusal is in the audit trail.
func (s *Server) limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, hookPrefix) {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.HookBodyLimit)
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > s.cfg.MaxBody {
			s.fail(w, r, &http.MaxBytesError{Limit: s.cfg.MaxBody})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		next.ServeHTTP(w, r)
	})
}

func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logFor(r).Error().Str("panic", fmt.Sprint(v)).Bytes("stack", debug.Stack()).Msg("handler panicked")
				s.fail(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusRecorder remembers the status a handler wrote, for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logRequests gives each request a logger carrying the node and a request id, bounds its
// work with RequestTimeout, and logs it when done: reads at debug level, since the UI's live
// refresh would flood the log, and changes and failures at info or above.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var id [6]byte
		_, _ = rand.Read(id[:])
		l := s.cfg.Log.With().Str("request_id", hex.EncodeToString(id[:])).Logger()
		ctx, cancel := context.WithTimeout(l.WithContext(r.Context()), s.cfg.RequestTimeout)
		defer cancel()
		rec := &statusRecorder{ResponseWriter: w}
		info := &requestInfo{}
		ctx = context.WithValue(ctx, requestInfoKey{}, info)
		next.ServeHTTP(rec, r.WithContext(ctx))
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		ev := l.Debug()
		switch {
		case rec.status >= 500:
			ev = l.Error()
		case rec.status == http.StatusUnauthorized || rec.status == http.StatusForbidden ||
			rec.status == http.StatusTooManyRequests || rec.status == http.StatusMisdirectedRequest ||
			(rec.status == http.StatusServiceUnavailable && info.busy):
			// Refusals of who asks: at info, with the client's address, to see who tries.
			ev = l.Info()
		case rec.status >= 400 && rec.status != http.StatusNotFound:
			ev = l.Warn()
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			ev = l.Info()
		}
		logUser(ev, info).Str("method", r.Method).Str("path", r.URL.Path).Int("status", rec.status).Int("bytes", rec.bytes).
			Str("remote", r.RemoteAddr).Dur("took", time.Since(start)).Msg("http request")
	})
}

// logFor returns the request's logger.
func logFor(r *http.Request) *zerolog.Logger { return zerolog.Ctx(r.Context()) }
