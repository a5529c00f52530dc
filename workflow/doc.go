// Package workflow reads workflow files: a YAML description of a DAG of tasks. It parses and
// validates them with messages that name the line, task and field at fault, and answers the
// questions the scheduler asks of the DAG (which tasks start a run, which ones follow a
// finished task, in what order they can run). It knows nothing of ZooKeeper or PostgreSQL:
// `zksched submit` parses a file and stores the Spec as JSON, the master reads that JSON back
// with json.Unmarshal to decide which task instances to create and when, and the worker reads
// the fields of its task type.
//
// The file format, every field with its default and what is refused, is documented once, for
// the people who write the files: docs/workflows.md at the top of the repository. A change to
// the format changes that page and the JSON Schema (docs/workflow.schema.json, from
// [Schema]) with it.
//
// # Storage
//
// The stored form is the Spec as JSON, with the same field names as the file (depends-on,
// retry-interval, ...), durations as strings ("30s"), and defaults filled in, so a stored
// spec reads like the file it came from.
package workflow
