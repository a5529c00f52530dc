// Package metrics is a node's Prometheus metrics, on a registry of its own (never the global
// one, so nothing a library registers leaks in and tests can make as many as they like),
// served at /metrics on the node's HTTP port.
//
// What each metric says, and where it comes from:
//
//	zksched_node_info{node,role,version}                 1; the node's identity
//	zksched_zookeeper_session_state{state}               1 for the current state of the node's ZooKeeper session
//	zksched_task_claims_total{group}                     worker: task instances this worker claimed
//	zksched_task_attempts_total{outcome}                 worker: attempts this worker ended, by outcome
//	zksched_task_results_refused_total                   worker: results refused by the fencing token (the task was taken away)
//	zksched_task_dispatch_seconds                        worker: histogram of queued_at → started (claim) of claimed tasks
//	zksched_tasks_running                                worker: attempts running now (slots in use)
//	zksched_llm_admission_wait_seconds{provider}         worker: histogram of the wait of each model request of a provider with cluster-wide limits for its admission
//	zksched_task_results_recording                       worker: attempts ended whose result is being written
//	zksched_agent_turns_total{source}                    worker: tool-calling agents' turns, sent to the model (model) or replayed from a checkpoint (replayed)
//	zksched_agent_tool_calls_total{outcome}              worker: tool-calling agents' tool calls, by outcome: succeeded, failed, refused (bad arguments, unknown tool), rejected (by a reviewer), replayed, interrupted
//	zksched_agent_tokens_total{provider}                 worker: tokens the turns sent to the model used
//	zksched_sensor_checks_total{kind,outcome}            worker: sensor checks, by kind (http, sql, file, time) and outcome (true, false, error)
//	zksched_sensor_check_lateness_seconds{kind}          worker: histogram of a sensor check's due time → its start
//	zksched_asset_events_total{source}                   asset events written: by tasks that produce assets on this worker (task), or emitted through this master's API (emit)
//	zksched_asset_runs_total                             master: runs of on-assets workflows this master started
//	zksched_workflows_owned                              master: workflow instances this master drives
//	zksched_leader                                       master: 1 while this master leads
//	zksched_queue_depth{group}                           master: queued task instances per worker group (periodic count)
//	zksched_failovers_total{role}                        master: identities failed over so far, cluster-wide (failover_event)
//	zksched_fenced_nodes{role}                           master: fence markers in ZooKeeper; each is a node that exits 75 if it comes back
//	zksched_retention_purged_rows_total{table}         master: rows the leader's retention deleted, by table
//	zksched_api_auth_failures_total                      master: wrong tokens (bearer or login form) it refused
//	zksched_api_auth_rate_limited_total                  master: wrong credentials refused with 429 (their address failed too often)
//	zksched_api_audit_refusals_unrecorded_total          master: refused changes whose audit row could not be written (each logged at error level)
//
// The cluster-wide ones (queue depth, failovers, fenced nodes) are read by every master on an
// interval, so any master can be scraped; sum them with max(), not sum().
package metrics

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/registry"
)

// Metrics are one node's metrics.
type Metrics struct {
	reg *prometheus.Registry

	claims    *prometheus.CounterVec
	attempts  *prometheus.CounterVec
	refused   prometheus.Counter
	dispatch  prometheus.Histogram
	admission *prometheus.HistogramVec
	queue     *prometheus.GaugeVec
	fenced    *prometheus.GaugeVec
	failovers *countCollector
	notified  *prometheus.CounterVec
	purged    *prometheus.CounterVec
	turns     *prometheus.CounterVec
	toolCalls *prometheus.CounterVec
	tokens    *prometheus.CounterVec
	hooks     *prometheus.CounterVec
	sensors   *prometheus.CounterVec
	lateness  *prometheus.HistogramVec
	assets    *prometheus.CounterVec
	assetRuns prometheus.Counter

	mu     sync.Mutex
	groups map[string]bool // the worker groups the queue depth has shown
}

// New returns the metrics of node (its identity) in role, with the Go runtime's and the
// process's own.
func New(node, role, version string) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg:    reg,
		groups: map[string]bool{},
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zksched_task_claims_total",
			Help: "Task instances this worker claimed, by worker group."}, []string{"group"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zksched_task_attempts_total",
			Help: "Task attempts this worker ended, by outcome."}, []string{"outcome"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "zksched_task_results_refused_total",
			Help: "Attempt results refused because the task was taken from the attempt (fencing token)."}),
		dispatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "zksched_task_dispatch_seconds",
			Help:    "Time from a task instance entering the queue to its claim by this worker.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
		admission: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "zksched_llm_admission_wait_seconds",
			Help:    "Time each model request of a provider with requests-per-minute or tokens-per-minute waited for its admission under the cluster-wide limits.",
			Buckets: []float64{.001, .005, .025, .1, .5, 1, 5, 15, 30, 60, 120, 300}}, []string{"provider"}),
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "zksched_queue_depth",
			Help: "Queued task instances per worker group, counted periodically by each master."}, []string{"group"}),
		fenced: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "zksched_fenced_nodes",
			Help: "Fence markers in ZooKeeper by role: nodes failed over, which exit with code 75 if they come back."}, []string{"role"}),
		purged: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zksched_retention_purged_rows_total",
			Help: "Rows this master's retention deleted while it led, by table."}, []string{"table"}),
		failovers: &countCollector{desc: prometheus.NewDesc("zksched_failovers_total",
			"Identities failed over by the leader so far, cluster-wide, by role.", []string{"role"}, nil)},
		notified: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zksched_notifications_total",
			Help: "Notification tries this master made, by result: sent, failed (to be retried) or dead (failed its last try)."},
			[]string{"result"}),
	}
	m.hooks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zksched_hook_deliveries_total",
		Help: "Webhook deliveries this master answered, by outcome: submitted, filtered, duplicate, bad_signature, " +
			"rate_limited, too_large, refused (another 4xx) or failed (5xx)."}, []string{"outcome"})
	m.turns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zksched_agent_turns_total",
		Help: "Turns of tool-calling agents on this worker: sent to the model (model) or replayed from a checkpoint (replayed)."}, []string{"source"})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zksched_agent_tool_calls_total",
		Help: "Tool calls of tool-calling agents on this worker, by outcome."}, []string{"outcome"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zksched_agent_tokens_total",
		Help: "Tokens used by the turns tool-calling agents on this worker sent to the model, by provider."}, []string{"provider"})
	m.sensors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zksched_sensor_checks_total",
		Help: "Sensor checks on this worker, by kind and outcome: true, false or error."}, []string{"kind", "outcome"})
	m.lateness = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "zksched_sensor_check_lateness_seconds",
		Help:    "Time from a sensor check's due time to its start on this worker, by kind; first checks are not counted.",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}, []string{"kind"})
	m.assets = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zksched_asset_events_total",
		Help: "Asset events written: by the tasks this worker ran that produce assets (task), or emitted through this master's API (emit)."},
		[]string{"source"})
	m.assetRuns = prometheus.NewCounter(prometheus.CounterOpts{Name: "zksched_asset_runs_total",
		Help: "Runs of workflows that declare on-assets this master started on their asset events."})
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "zksched_node_info", Help: "The node's identity, role and version.",
		ConstLabels: prometheus.Labels{"node": node, "role": role, "version": version}})
	info.Set(1)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), info)
	if role == string(registry.RoleWorker) {
		reg.MustRegister(m.claims, m.attempts, m.refused, m.dispatch, m.admission, m.turns, m.toolCalls, m.tokens, m.sensors, m.lateness,
			m.assets)
	} else {
		reg.MustRegister(m.queue, m.fenced, m.failovers, m.purged, m.notified, m.hooks, m.assets, m.assetRuns)
	}
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the node's registry, for tests and for collectors of other packages.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Claimed records a claim: worker.Events.
func (m *Metrics) Claimed(t *dao.TaskInstance) {
	m.claims.WithLabelValues(t.WorkerGroup).Inc()
	if t.StartedAt != nil {
		m.dispatch.Observe(max(t.StartedAt.Sub(t.QueuedAt), 0).Seconds())
	}
}

// SensorChecked records a sensor check: executor.SensorEvents. late is negative for a first
// check, which had no due time.
func (m *Metrics) SensorChecked(kind, outcome string, late time.Duration) {
	m.sensors.WithLabelValues(kind, outcome).Inc()
	if late >= 0 {
		m.lateness.WithLabelValues(kind).Observe(late.Seconds())
	}
}

// Ended records how an attempt ended: worker.Events.
func (m *Metrics) Ended(outcome dao.Outcome, refused bool) {
	if refused {
		m.refused.Inc()
		return
	}
	m.attempts.WithLabelValues(string(outcome)).Inc()
}

// AgentTurn counts a tool-calling agent's turn: executor.AgentEvents.
func (m *Metrics) AgentTurn(provider string, replayed bool, tokens int) {
	if replayed {
		m.turns.WithLabelValues("replayed").Inc()
		return
	}
	m.turns.WithLabelValues("model").Inc()
	m.tokens.WithLabelValues(provider).Add(float64(tokens))
}

// AgentToolCall counts a tool-calling agent's tool call by its outcome: executor.AgentEvents.
func (m *Metrics) AgentToolCall(outcome string) {
	m.toolCalls.WithLabelValues(outcome).Inc()
}

// AdmissionWaited records how long a model request of provider waited for its admission:
// llm.Options.AdmissionWaited.
func (m *Metrics) AdmissionWaited(provider string, d time.Duration) {
	m.admission.WithLabelValues(provider).Observe(d.Seconds())
}

// Notified counts a notification's try by its result, sent, failed or dead: notify.Config.
func (m *Metrics) Notified(result string) {
	m.notified.WithLabelValues(result).Inc()
}

// HookDelivered counts a webhook delivery by its outcome: api.Config.HookDelivered.
func (m *Metrics) HookDelivered(outcome string) {
	m.hooks.WithLabelValues(outcome).Inc()
}

// AssetsProduced counts the asset events a task's success wrote: worker.Events.
func (m *Metrics) AssetsProduced(n int) {
	m.assets.WithLabelValues("task").Add(float64(n))
}

// AssetEmitted counts an asset event emitted through the API: api.Config.AssetEmitted.
func (m *Metrics) AssetEmitted() {
	m.assets.WithLabelValues("emit").Inc()
}

// AssetRunsStarted counts runs started by asset events: master.AssetFirer.Started.
func (m *Metrics) AssetRunsStarted(n int) {
	m.assetRuns.Add(float64(n))
}

// Purged records rows the retention deleted from table: master.RetentionConfig.Purged.
func (m *Metrics) Purged(table string, rows int64) {
	m.purged.WithLabelValues(table).Add(float64(rows))
}

// Gauge registers a gauge read from fn at each scrape, such as the running attempts of a
// worker.
func (m *Metrics) Gauge(name, help string, fn func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

// Counter registers a counter read from fn at each scrape, such as the log messages a node
// dropped.
func (m *Metrics) Counter(name, help string, fn func() float64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
}

// WatchSession exposes the state of the node's ZooKeeper session, read at each scrape.
func (m *Metrics) WatchSession(status func() registry.Status) {
	for _, st := range []registry.ConnState{registry.Disconnected, registry.Connected, registry.Expired, registry.Closed} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zksched_zookeeper_session_state",
			Help: "1 for the current state of the node's ZooKeeper session.", ConstLabels: prometheus.Labels{"state": st.String()}},
			func() float64 {
				if status().State == st {
					return 1
				}
				return 0
			}))
	}
}

// MarkerReader reads the fence markers (registry.Client).
type MarkerReader interface {
	Markers(ctx context.Context) ([]registry.MarkerEntry, error)
}

// RunClusterCounts refreshes the cluster-wide metrics of a master every interval until ctx
// ends: queue depth by group and failovers from PostgreSQL, fence markers from ZooKeeper.
// Each read is cheap (the queue count walks the claim's partial index). A failed read is
// logged and tried again at the next interval; it returns nil when ctx ends.
func (m *Metrics) RunClusterCounts(ctx context.Context, db *dao.DB, markers MarkerReader, interval time.Duration, log zerolog.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		m.refresh(ctx, db, markers, log)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (m *Metrics) refresh(ctx context.Context, db *dao.DB, markers MarkerReader, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if depth, err := db.TaskQueueDepth(ctx); err == nil {
		// A group whose queue emptied reads 0 rather than vanishing, and the default group is
		// always there, so a dashboard has a series from the start.
		m.mu.Lock()
		for g := range m.groups {
			if _, ok := depth[g]; !ok {
				depth[g] = 0
			}
		}
		if _, ok := depth["default"]; !ok {
			depth["default"] = 0
		}
		for g, n := range depth {
			m.groups[g] = true
			m.queue.WithLabelValues(g).Set(float64(n))
		}
		m.mu.Unlock()
	} else if ctx.Err() == nil {
		log.Debug().Err(err).Msg("metrics: queue depth not read")
	}
	if counts, err := db.FailoverEventCount(ctx); err == nil {
		m.failovers.set(counts)
	}
	if markers == nil {
		return
	}
	if ms, err := markers.Markers(ctx); err == nil {
		by := map[string]int{string(registry.RoleMaster): 0, string(registry.RoleWorker): 0}
		for _, mk := range ms {
			by[string(mk.Role)]++
		}
		for role, n := range by {
			m.fenced.WithLabelValues(role).Set(float64(n))
		}
	}
}

// countCollector exposes counts read from the database as counters: they only grow.
type countCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	vals map[string]int
}

func (c *countCollector) set(v map[string]int) {
	c.mu.Lock()
	c.vals = v
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *countCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *countCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, role := range []string{string(registry.RoleMaster), string(registry.RoleWorker)} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.vals[role]), role)
	}
}
