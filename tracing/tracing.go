package tracing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of zksched's spans.
const scope = "github.com/zksched/zksched"

// Tracer builds and exports a node's spans. A nil *Tracer is tracing off: every method does
// nothing and costs nothing.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	node     string
}

// Options are what New needs besides the config section.
type Options struct {
	// Node is the node's identity (service.instance.id of its spans).
	Node string
	// Role is "master" or "worker": the default service.name is zksched-<role>.
	Role string
	// Version is zksched's version (service.version).
	Version string
	Log     zerolog.Logger
	// Exporter replaces the OTLP exporter; nil outside tests.
	Exporter sdktrace.SpanExporter
}

// Config is what a node's config says of tracing (conf.Tracing, which documents each key and
// its default, converts to it field for field).
type Config struct {
	// Enabled turns tracing on; off, New returns nil.
	Enabled bool
	// Endpoint is the collector's OTLP/HTTP base URL; empty takes the OTEL_EXPORTER_OTLP_*
	// environment variables, then http://localhost:4318.
	Endpoint string
	// SampleRatio is the share of workflow instances traced, 0 to 1.
	SampleRatio float64
	// ServiceName is the service.name of the node's spans; empty is zksched-<role>.
	ServiceName string
	// Headers are HTTP headers sent with every export.
	Headers map[string]string
	// CAFile is a PEM file of the authorities an https endpoint's certificate may come from;
	// empty is the system's roots.
	CAFile string
	// QueueSize is how many ended spans wait to be exported before further ones are dropped.
	QueueSize int
}

// New returns the node's Tracer for cfg, nil when tracing is off. The exporter connects
// lazily: a collector that is down costs dropped spans, never a failed start.
func New(ctx context.Context, cfg Config, opts Options) (*Tracer, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	exp := opts.Exporter
	if exp == nil {
		var err error
		if exp, err = newExporter(ctx, cfg); err != nil {
			return nil, err
		}
	}
	name := cfg.ServiceName
	if name == "" {
		name = "zksched-" + opts.Role
	}
	res, err := resource.Merge(resource.Environment(), resource.NewSchemaless(
		attribute.String("service.name", name),
		attribute.String("service.instance.id", opts.Node),
		attribute.String("service.version", opts.Version)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	log := opts.Log
	// The SDK reports a failed export through the global handler; the node's log takes it,
	// as a warning: the spans are lost, the work goes on.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn().Err(err).Msg("tracing: spans not exported")
	}))
	p := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(presetIDs{}),
		// Sampled where the instance was submitted: a span is recorded when its parent is.
		// The instance's own span has no parent and is emitted only for a sampled trace.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(cfg.QueueSize),
			sdktrace.WithMaxExportBatchSize(min(512, cfg.QueueSize))),
	)
	return &Tracer{provider: p, tracer: p.Tracer(scope), node: opts.Node}, nil
}

// newExporter is the OTLP/HTTP exporter of cfg. An endpoint without a path gets the traces
// path, as OTEL_EXPORTER_OTLP_ENDPOINT does; without an endpoint the SDK reads the
// environment's.
func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	var opts []otlptracehttp.Option
	if e := cfg.Endpoint; e != "" {
		u, err := url.Parse(e)
		if err != nil {
			return nil, fmt.Errorf("tracing.endpoint: %w", err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tracing.ca-file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tracing.ca-file: no PEM certificate in %s", cfg.CAFile)
		}
		opts = append(opts, otlptracehttp.WithTLSClientConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	return exp, nil
}

// Shutdown exports the spans still queued, waiting at most until ctx ends, and stops.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	err := t.provider.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("tracing: spans still queued at exit were dropped: %w", err)
	}
	return err
}

// ForceFlush exports the spans ended so far, waiting at most until ctx ends (tests).
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// start starts a span named name with the ids of sc (trace and span id) under parent (an
// invalid one for none: a root), at time at. The context it is started in carries sc's ids
// for presetIDs alone: a span started later under the one returned (a model call under its
// attempt) gets ids of its own.
func (t *Tracer) start(ctx context.Context, name string, sc, parent trace.SpanContext, at time.Time, attrs ...attribute.KeyValue) trace.Span {
	sctx := trace.ContextWithRemoteSpanContext(withPresetIDs(ctx, sc.TraceID(), sc.SpanID()), parent)
	if !parent.IsValid() {
		sctx = trace.ContextWithSpanContext(sctx, trace.SpanContext{})
	}
	_, span := t.tracer.Start(sctx, name, trace.WithTimestamp(at), trace.WithAttributes(attrs...))
	return span
}
