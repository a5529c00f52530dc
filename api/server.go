package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/registry"
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
	// Token, when set, is required by every API call and UI page (see the package doc).
	Token string
	// Cluster reads ZooKeeper for the cluster view.
	Cluster ClusterReader
	// Ready reports whether the node may take work, for /readyz.
	Ready func() Readiness
	// Metrics serves /metrics; nil leaves it out.
	Metrics http.Handler
	// MaxBody is the largest request body accepted. Defaults to 1 MiB, well above any
	// workflow file, and small enough that a client cannot make a master buffer much.
	MaxBody int64
	// RequestTimeout bounds the database and ZooKeeper work of one request. Defaults to 30 s.
	RequestTimeout time.Duration
	Log            zerolog.Logger
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
	pages *pages
	h     http.Handler
	// parses holds a place for each workflow file being read and parsed; see
	// maxConcurrentParses.
	parses chan struct{}
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
	if cfg.Ready == nil {
		cfg.Ready = func() Readiness { return Readiness{Ready: true} }
	}
	p, err := newPages()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, db: db, auth: newAuthenticator(cfg.Token), pages: p,
		parses: make(chan struct{}, maxConcurrentParses)}
	mux := http.NewServeMux()
	s.routes(mux)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, errorf(http.StatusForbidden, "cross-origin request refused"))
	}))
	s.h = s.logRequests(s.recoverPanics(cop.Handler(s.limitBodies(s.requireAuth(mux)))))
	return s, nil
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

func (s *Server) routes(mux *http.ServeMux) {
	health(mux, s.cfg.NodeID, "master", s.cfg.Ready, s.cfg.Metrics)

	api := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r); err != nil {
				s.writeError(w, r, err)
			}
		})
	}
	api("GET /api/v1/definitions", s.apiDefinitions)
	api("POST /api/v1/definitions", s.apiDefinitionSubmit)
	api("GET /api/v1/definitions/{name}", s.apiDefinitionVersions)
	api("GET /api/v1/definitions/{name}/versions/{version}", s.apiDefinitionVersion)
	api("GET /api/v1/workflow-instances", s.apiWorkflows)
	api("POST /api/v1/workflow-instances", s.apiWorkflowCreate)
	api("GET /api/v1/workflow-instances/{id}", s.apiWorkflow)
	api("POST /api/v1/workflow-instances/{id}/stop", s.apiWorkflowStop)
	api("POST /api/v1/workflow-instances/{id}/rerun", s.apiWorkflowRerun)
	api("GET /api/v1/task-instances", s.apiTasks)
	api("GET /api/v1/task-instances/{id}", s.apiTask)
	api("GET /api/v1/task-instances/{id}/log", s.apiTaskLog)
	api("POST /api/v1/task-instances/{id}/kill", s.apiTaskKill)
	api("POST /api/v1/task-instances/{id}/rerun", s.apiTaskRerun)
	api("GET /api/v1/cluster", s.apiCluster)
	api("GET /api/v1/failover-events", s.apiFailoverEvents)
	api("GET /api/v1/schedules", s.apiSchedules)
	api("POST /api/v1/schedules/{name}/enable", s.apiScheduleEnable(true))
	api("POST /api/v1/schedules/{name}/disable", s.apiScheduleEnable(false))
	api("POST /api/v1/schedules/{name}/trigger", s.apiScheduleTrigger)
	api("/api/", func(w http.ResponseWriter, r *http.Request) error {
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

	page := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r); err != nil {
				s.fail(w, r, err)
			}
		})
	}
	page("GET /{$}", s.pageTasks)
	page("GET /tasks/{id}", s.pageTask)
	page("POST /tasks/{id}/kill", s.formTaskKill)
	page("POST /tasks/{id}/rerun", s.formTaskRerun)
	page("GET /workflows", s.pageWorkflows)
	page("GET /workflows/{id}", s.pageWorkflow)
	page("POST /workflows/{id}/stop", s.formWorkflowStop)
	page("POST /workflows/{id}/rerun", s.formWorkflowRerun)
	page("GET /definitions", s.pageDefinitions)
	page("GET /cluster", s.pageCluster)
	page("GET /login", s.pageLogin)
	page("POST /login", s.formLogin)
	page("POST /logout", s.formLogout)
	mux.Handle("GET /static/", staticHandler())
	page("/", func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, "no page %s", r.URL.Path)
	})
}

// fail answers a failed request: JSON for the API and non-browser clients, an error page for
// the UI.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if isAPI(r) {
		s.writeError(w, r, err)
		return
	}
	status, msg := classify(err)
	if status >= 500 {
		logFor(r).Error().Err(err).Msg("request failed")
	}
	s.render(w, r, status, "error", &errorPage{base: base{Title: http.StatusText(status)}, Status: status, StatusText: http.StatusText(status), Message: msg})
}

func isAPI(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics"
}

// limitBodies caps every request body: a read past the limit fails with *http.MaxBytesError,
// answered with 413.
func (s *Server) limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		next.ServeHTTP(rec, r.WithContext(ctx))
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		ev := l.Debug()
		switch {
		case rec.status >= 500:
			ev = l.Error()
		case rec.status >= 400 && rec.status != http.StatusUnauthorized && rec.status != http.StatusNotFound:
			ev = l.Warn()
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			ev = l.Info()
		}
		ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", rec.status).Int("bytes", rec.bytes).
			Str("remote", r.RemoteAddr).Dur("took", time.Since(start)).Msg("http request")
	})
}

// logFor returns the request's logger.
func logFor(r *http.Request) *zerolog.Logger { return zerolog.Ctx(r.Context()) }
