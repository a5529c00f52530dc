// Package workflow reads workflow files: a YAML description of a DAG of tasks. It parses and
// validates them with messages that name the line, task and field at fault, and answers the
// questions the scheduler asks of the DAG (which tasks start a run, which ones follow a
// finished task, in what order they can run). It knows nothing of ZooKeeper or PostgreSQL:
// `zksched submit` parses a file and stores the Spec as JSON, the master reads that JSON back
// with json.Unmarshal to decide which task instances to create and when, and the worker reads
// the fields of its task type.
//
// This comment is the reference for the file format.
//
// # An example
//
//	name: nightly-report
//	description: Extract, transform in parallel, load.
//	params: {region: eu, day: "2026-11-01"}
//	tasks:
//	  - name: extract
//	    type: shell
//	    command: ./extract.sh
//	    retries: 2
//	    retry-interval: 30s
//	    timeout: 10m
//	  - name: clean
//	    type: shell
//	    command: ./clean.sh
//	    depends-on: [extract]
//	  - name: enrich
//	    type: shell
//	    command: ./enrich.sh
//	    depends-on: [extract]
//	    env: {LOOKUP_URL: "http://lookup.internal"}
//	  - name: load
//	    type: shell
//	    command: ./load.sh
//	    workdir: /srv/report
//	    depends-on: [clean, enrich]
//	    group: db-hosts
//	    priority: 10
//
// extract runs first; clean and enrich run in parallel once it has succeeded; load runs
// once both have. examples/demo.yaml in the repository is a complete file to try.
//
// # The workflow
//
//   - name (required): 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or
//     digit. Submitting a file with the name of an existing workflow adds a new version of
//     it.
//   - description: free text.
//   - params: default parameters of a run, a mapping of names to strings.
//     `zksched submit --param name=value` overrides them for one run. Every task sees them
//     as environment variables ZKSCHED_PARAM_<name>, so names follow the rule of variable
//     names: letters, digits and '_', not starting with a digit.
//   - tasks (required): the list of tasks, at least one and at most 10,000.
//
// # Tasks
//
// Fields every task has:
//
//   - name (required): same rule as the workflow name, unique within the workflow.
//   - type (required): what the task does; see the types below.
//   - depends-on: the names of the tasks that must succeed before this one starts, as a
//     list (depends-on: [a, b]). A task without dependencies starts when the run starts.
//     Dependencies may name tasks written before or after, but must not form a cycle.
//   - retries: how many times a failed run is retried, 0 to 100. Default 0. A task that is
//     moved to another worker because its worker died is not counted as a retry.
//   - retry-interval: how long to wait before a retry, a Go duration such as 30s, 5m or
//     1h30m. Default 0s.
//   - timeout: how long one run may take before it is killed and counts as failed, a Go
//     duration. Default 0, which means no limit.
//   - priority: -1000 to 1000; among queued tasks, higher is claimed first. Default 0.
//   - group: the worker group that runs the task: only workers configured with this group
//     claim it. Letters, digits, '_', '.' or '-'. Default "default".
//   - pool: a named concurrency pool: tasks in one pool, across workflows, share a limit on
//     how many run at once. Same characters as group. Optional; carried but not enforced yet.
//   - env: environment variables for the task, a mapping of names to values. Names are
//     letters, digits and '_', not starting with a digit.
//
// Each type has fields of its own; a field of one type on a task of another is an error.
//
// A shell task runs a bash script (bash -c). Its exit status decides success, and what it
// prints is the task log.
//
//   - command (required): the script; a YAML block (command: |) holds several lines.
//   - workdir: the directory it runs in; default the worker's.
//
// A noop task does nothing and succeeds at once; use it to start or join branches of the DAG.
//
// # Writing values
//
// Strings need quotes only where YAML would otherwise read something else; values of params
// and env are taken as written, so `port: 8080` and `day: 2026-11-01` are the strings "8080"
// and "2026-11-01". Durations are Go durations: a number with a unit (ns, us, ms, s, m, h),
// several combined as in 1h30m; a bare number other than 0 is refused, as it could mean
// seconds or nanoseconds. Anchors, aliases and merge keys work, for example to share fields
// between tasks:
//
//	tasks:
//	  - &shell
//	    name: one
//	    type: shell
//	    command: ./step.sh one
//	    retries: 3
//	    group: batch
//	  - <<: *shell
//	    name: two
//	    command: ./step.sh two
//
// # What is refused
//
// A file is accepted whole or not at all. Problems are reported together, each with its line:
// first those of the YAML itself — malformed YAML; a document that is not a mapping, or more
// than one document; an unknown field (with the closest known name as a hint, since a
// misspelt field would otherwise be silently ignored); a key written twice in one mapping; a
// value of the wrong kind, such as a list where a string belongs or a malformed duration —
// and once the YAML reads cleanly, those of the workflow it describes: a missing or invalid
// name, or two tasks with one name; an unknown type (the message lists the known ones); a
// shell task without a command; a field of another type; a dependency on a task that does not
// exist, on the task itself, or listed twice; a dependency cycle; a number out of its range; a
// negative duration; an invalid param, env, group or pool name; a workflow with no tasks. A file
// larger than 1 MiB or with more than 10,000 tasks is refused before anything else.
//
// A cycle is named in run order, starting from the task written first:
// "dependency cycle: a -> b -> c -> a" means b depends on a, c on b, and a on c.
//
// # Storage
//
// The stored form is the Spec as JSON, with the same field names as the file (depends-on,
// retry-interval, ...), durations as strings ("30s"), and defaults filled in, so a stored
// spec reads like the file it came from.
package workflow
