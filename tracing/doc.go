// Package tracing is zksched's OpenTelemetry: a trace per workflow instance, exported over
// OTLP/HTTP, off unless a node's config turns it on (conf.Tracing, given to New as a Config).
//
// # One trace, many processes
//
// The spans of an instance come from several processes: the workers that run its attempts,
// the leader that fails an attempt over, the master or worker that ends it. So its trace
// context is decided once, when it is submitted (Traceparents, installed on the dao.DB of
// every process that submits): a random trace id, a random span id for the instance's own
// span, and the sampling decision (tracing.sample-ratio), stored with the instance as a W3C
// traceparent (trace_context, migration 00023). Every span of the instance is then named from it:
//
//	workflow <name>        span id from the traceparent; no parent. Emitted once, when the
//	│                      instance first ends (by a master, from dao's trace outbox), from
//	│                      its submission to its end, its state as its status.
//	├── task <name>        one per attempt, span id AttemptSpanID(trace, task instance,
//	│   │                  attempt), so any process can name it. Emitted by whoever closes
//	│   │                  the attempt: its worker once its result is recorded, or, for an
//	│   │                  attempt its worker lost, a master from the leader's failover
//	│   │                  (outcome failed_over). A shell task gets TRACEPARENT naming it.
//	│   └── chat <model>   one per model request of an llm or agent attempt, with the GenAI
//	│                      semantic conventions (package worker/llm).
//
// The SDK makes its own ids; a span whose ids were decided before (the instance's, an
// attempt's) is started with them in its context, which the provider's IDGenerator
// (presetIDs) hands back instead of new ones. A span starts and ends at the times it stands
// for (the instance's creation and end by the database's clock, an attempt's by its worker's).
//
// Sampling is decided at submission and respected everywhere after: an unsampled instance
// still stores its traceparent (flags 00), so its shell tasks pass on a TRACEPARENT that
// says not to sample, but no process emits a span of it.
//
// # Cost
//
// With tracing off a node has no Tracer (nil, whose methods do nothing), its instances are
// created without a trace context (no trace_context row, trace_sampled NULL), and no trigger
// of migration 00023 calls a function. An
// export never blocks scheduling: spans go to a batch processor whose bounded queue drops
// what it cannot hold while the collector is down or slow.
package tracing
