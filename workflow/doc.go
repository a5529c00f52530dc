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
//   - schedule: run the workflow by itself on a timetable; see Schedules below.
//   - max-active-instances: how many instances of the workflow may run at once, 0 to 10,000;
//     0 (the default) means no cap. Instances count from when a master starts them until
//     they finish, whatever created them (submit, a fire, a backfill).
//   - when-full: what a new instance does while the workflow is at its max-active-instances:
//     queue (the default) keeps it waiting, and masters start waiting instances in priority
//     and then creation order as running ones finish; skip creates nothing — a fire is
//     recorded as skipped, `zksched submit` is refused and says so. Only with
//     max-active-instances.
//   - concurrency: runs that share a key run one at a time (or max at a time), in submit
//     order — a conversation's runs never overlap and never reorder, as with
//     `concurrency: {key: "{{ .params.thread }}", max: 1}`. key (required) is a template over the params alone, rendered once when an instance is
//     submitted (a key that renders empty refuses the submission: give the params it uses a
//     value); keys are the workflow's own, so two workflows never share one. max, 1 to
//     10,000 (default 1), is how many instances with one key may run at once: an instance
//     with a key waits, submitted, until a master starts it while fewer than max of its key
//     run and no instance of its key submitted before it still waits. when-full says what a
//     new instance does when max instances of its key are active (waiting or running): queue
//     (the default) waits its turn; skip creates nothing — a fire is recorded as skipped,
//     `zksched submit` is refused and says so; cancel-oldest stops the oldest active instance
//     of the key (as an operator's stop would, recorded in the audit trail) and the new one
//     takes its place. A backfill queues whatever when-full says. With max-active-instances
//     as well, both limits hold. A rerun of an ended instance is refused while its key is
//     full or another instance of its key waits: it would run out of turn.
//   - timeout: how long one run of the whole workflow may take, a Go duration, counted from
//     when a master starts it (not while it waits for a slot). Past it the instance fails
//     ("workflow timeout 2h0m0s exceeded"), its queued tasks are killed and the workers of
//     its running ones are asked to kill them. Default 0, no limit.
//   - priority: -1000 to 1000, added to the priority of every task of the workflow, so it
//     orders claims across workflows: a worker with a free slot takes the task with the
//     highest sum. Default 0; `zksched submit --priority` overrides it for one run.
//   - deadline: how long after its submission an instance should have ended, a Go duration.
//     Past it, while the instance has not ended, the deadline event is sent once and nothing
//     else changes: the instance goes on. Default 0, none.
//   - notify: who hears of the workflow's events, a list of entries like
//     {on: [failure, timeout, deadline], webhook-url-env: ZKSCHED_WEBHOOK_OPS} or
//     {on: [failure], email: [ops@example.com]}. on lists the events: failure (an instance
//     failed), success, timeout (an instance failed by its timeout; it sends timeout, not
//     failure), deadline (its or a task's deadline passed) and task-failed (a task failed
//     after its retries). webhook-url-env names the environment variable of the masters
//     that holds the webhook's URL (the URL itself is never stored), a name matching their
//     notify.webhook-env-pattern (Spec.CheckWebhookEnv, at store); slack: true sends a
//     Slack-compatible body ({"text": ...}) to it; email lists addresses. An entry needs
//     a webhook, an address, or both. A workflow without notify: gets the masters'
//     notify.default. An instance stopped by an operator sends nothing.
//
// # Schedules
//
//	schedule:
//	  cron: "30 2 * * *"        # 02:30 every day
//	  timezone: Europe/Berlin
//	  start: 2026-11-01
//	  end: 2027-12-31
//	  misfire: run-all
//	  misfire-limit: 5
//
// The fields of a schedule:
//
//   - cron (required): five fields, minute hour day-of-month month day-of-week, with the
//     usual lists, ranges, steps and names (0 9 * * mon-fri, */15 * * * *), or one of
//     @yearly (@annually), @monthly, @weekly, @daily (@midnight) and @hourly. @every and a
//     TZ= prefix are refused: the schedule follows the clock, in its own timezone.
//   - timezone: the IANA time zone the expression is read in, such as UTC, Europe/Berlin or
//     America/New_York. Default UTC. The zone database is built into zksched, so every
//     master reads a zone alike.
//   - start: the earliest fire time; default the moment the schedule is stored (earlier fire
//     times are not run, except by a backfill). end: the latest fire time; default none. Both
//     are included, and written as 2026-11-01 (midnight), 2026-11-01T02:00 or
//     2026-11-01 02:00:00 in the schedule's timezone, or as RFC 3339 with an offset.
//   - enabled: true (the default) or false. `zksched schedule enable|disable` switches it
//     until the next submit of the file.
//   - misfire: what happens to fires that came due while no master could make them (every
//     master was stopped, or cut off from ZooKeeper), once one is back: skip drops them;
//     run-once (the default) runs the latest of them; run-all runs each of them, oldest
//     first, the latest misfire-limit of them (1 to 1,000, default 10). A fire made within
//     master.misfire-threshold (default 1m) of its time is on time, not missed.
//
// Daylight-saving changes follow the classic cron daemon. A time the clocks skip fires once,
// moved forward by the jump (02:30 on a night that goes from 02:00 to 03:00 fires at 03:30).
// A time the clocks repeat fires once, at its first occurrence, unless the hour field is "*":
// a schedule that runs every hour (@hourly, */15 * * * *) also runs in the repeated hour, so
// it keeps its rhythm in real time.
//
// Each fire gives its instance two params, on top of the workflow's own: fire_time, the
// fire's logical time in RFC 3339 in the schedule's timezone ("2026-11-02T02:30:00+01:00"),
// and fire_date, its local date ("2026-11-02"). Tasks read them as $ZKSCHED_PARAM_fire_time
// and $ZKSCHED_PARAM_fire_date; declare them under params to give runs by hand a default. A
// backfill's instances carry the fire time they stand for; a trigger's, the time of the
// trigger.
//
// Any master may make a fire. Each fire is recorded once per workflow and fire time, in the
// transaction that creates its instance, so two masters, a master killed in the middle of a
// fire, or a restart never make one fire twice. Submitting a file with a schedule stores it
// (and the definition) and runs nothing at once: `zksched schedule trigger NAME` runs it now.
// Submitting the same timetable again keeps the schedule's progress; a changed timetable
// starts from the next fire time. A file without a schedule removes the workflow's schedule.
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
//   - deadline: how long after its workflow instance's submission the task should have
//     ended, a Go duration; past it, while the task has not ended (or has not even been
//     created), the deadline event is sent once, and nothing else changes. Default 0, none.
//   - priority: -1000 to 1000; among queued tasks, higher is claimed first. Default 0.
//   - group: the worker group that runs the task: only workers configured with this group
//     claim it. Letters, digits, '_', '.' or '-'. Default "default".
//   - pool: a named concurrency pool: tasks in one pool, across workflows and across all
//     workers, share a limit on how many run at once, set in the config (pools: {openai: 4}).
//     A full pool leaves its tasks queued until one of its tasks ends; it fails nothing. Same
//     characters as group. Optional; `zksched submit` refuses a pool its config does not
//     limit.
//   - env: environment variables for the task, a mapping of names to values. Names are
//     letters, digits and '_', not starting with a digit.
//   - trigger: what the task's dependencies must have come to, once they have all ended,
//     for it to run: all-succeeded (the default: every one succeeded), all-done (whatever
//     they came to: a clean-up) or any-failed (one failed or was killed: an alert). A task
//     whose trigger does not hold is skipped, and a skip goes on down as a failure does,
//     unless a trigger below says otherwise. A skipped dependency neither succeeded nor
//     failed. Only a task with depends-on has a trigger. The instance's end is unchanged by
//     triggers: a run with a failed task fails, even if its clean-up succeeded.
//   - when: a condition, a template (see Prompt templates) over .params and the outputs
//     of the task's dependencies that renders true or false (spaces around it ignored). It
//     is decided once the trigger holds; false skips the task. A condition that renders
//     anything else, or fails, fails the task with the reason, without running it; a rerun
//     of such a task decides it again. A root task's condition is decided by a master, so
//     an instance with one starts when a master takes it up, not at submit.
//   - for-each: run the task once per item, a template (see Prompt templates) over .params
//     and the outputs of the task's dependencies that renders the items: a JSON array —
//     each string element is an item as it is, any other element its JSON text — or, when
//     the text does not start with '[', one item a line (its non-empty lines, spaces around
//     each removed). At most 10,000 items (MaxItems). For shell, noop, llm and agent tasks
//     (not wait). A master renders it once the trigger holds and the condition is true, and
//     creates the task as a parent, waiting, and one task instance per item, named
//     name[0], name[1], ..., each run like any task with the task's retries, timeout,
//     group and pool. A shell item reads its item as $ZKSCHED_ITEM and its index (from 0)
//     as $ZKSCHED_INDEX; llm and agent prompts as {{ .item }} and {{ .index }} (for-each
//     and when cannot use them: they are rendered before the items exist). The task ends
//     once every item has: succeeded if all did, its output then the JSON array of their
//     outputs in index order (each a JSON string), which the tasks below read like any
//     output; failed otherwise, naming the items that did not succeed. Without items it
//     succeeds at once with the output []. A for-each that fails to render, renders text
//     starting with '[' that is not a JSON array, or more than 10,000 items fails the task
//     with the reason, without running anything. A root task's for-each is rendered by a
//     master, as a condition is. Items are created once, whatever master fails over midway.
//     A kill of the task kills its items and creates no more; a rerun reruns its failed
//     and killed items (the succeeded keep their outputs) and creates those never created.
//   - max-parallel: with for-each, how many of its items may run at once; the next are
//     created in index order as those end. 0 (the default) means no cap.
//
// For example, one summary per document, four at a time, and a report over all of them:
//
//	tasks:
//	  - {name: list, type: shell, command: "ls docs/*.md | jq -R . | jq -sc ."}
//	  - name: summarise
//	    type: agent
//	    provider: main
//	    depends-on: [list]
//	    for-each: "{{ .upstream.list.output }}"
//	    max-parallel: 4
//	    steps:
//	      - {name: read, prompt: "Summarise {{ .item }}"}
//	  - name: report
//	    type: llm
//	    provider: main
//	    depends-on: [summarise]
//	    prompt: "Write a report from these summaries (a JSON array): {{ .upstream.summarise.output }}"
//
// Each item's task instance carries the outputs of the task's dependencies, as any task
// does: a for-each over a large upstream output stores it once per item.
//
// Each type has fields of its own; a field of one type on a task of another is an error.
//
// A shell task runs a bash script (bash -c). Its exit status decides success, and what it
// prints is the task log. Its output, for the tasks downstream, is the last non-empty line
// it prints on standard output. It gets the outputs of its own dependencies as environment
// variables $ZKSCHED_UPSTREAM_<task>_OUTPUT, the task name with '-' and '.' turned into '_'
// and its case kept: the output of fetch-data is $ZKSCHED_UPSTREAM_fetch_data_OUTPUT. (Linux
// caps one environment variable at 128 KiB; a longer output makes the task fail to start.)
// Of its worker's environment it inherits only PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*,
// TZ, TMPDIR and what the worker's worker.task-env adds, never the worker's DSN, API token or
// model keys; pass anything else through env. Where the worker has a worker.task-user, the
// task runs as that user, in its home by default.
//
//   - command (required): the script; a YAML block (command: |) holds several lines.
//   - workdir: the directory it runs in; default the worker's (the task user's home when
//     the worker has one).
//
// A noop task does nothing and succeeds at once; use it to start or join branches of the DAG.
//
// A wait task runs nowhere: it waits — holding no worker slot, no goroutine — until it is
// signalled, by `zksched signal TASK_INSTANCE_ID --output TEXT [--fail]`, Approve or Reject
// on its page in the UI, or POST /api/v1/task-instances/{id}/signal with {"output": "...",
// "fail": false}. The signal's
// output is its output, which the tasks below read like any other; with fail it fails, the
// output as its reason. A second signal is refused (409). Its timeout, measured from when it
// began to wait, ends the wait: failed, or succeeded with an empty output with on-timeout:
// succeed. Without a timeout it waits for its signal however long it takes. A rerun of a wait
// task that failed or was killed makes it wait again. It has no retries and no pool.
//
//   - on-timeout: fail (the default) or succeed.
//
// A workflow task starts an instance of another stored workflow, its child, and ends as the
// child ends: succeeded, with the child's output, when the child succeeded; failed, naming
// the child instance and its error, when it failed or was stopped. Like a wait task it runs
// nowhere and holds no slot while the child runs. The child's output is the output of its
// final task: the task written last in its file among those no other task depends on. A
// stop of the instance, its timeout or a kill of the task stops the child (and the child's
// own children); a stop of the child fails the task. A rerun of the task, once it failed or
// was killed, starts a new child. The child instance's page links to the task that started
// it, and the task's page to the child.
//
//   - workflow (required): the name of the stored workflow to start. It is looked up when
//     the task starts, not at submit, so the two files may be submitted in any order; one
//     that is not stored then fails the task, saying so. A task cannot name its own
//     workflow; a chain of workflows starting each other stops at 10 levels of children
//     below the instance submitted (the task that would start the 11th fails).
//   - version: the version of that workflow to run; default the latest stored when the task
//     starts.
//   - params: the child's params, a mapping of names to templates (see Prompt templates)
//     over .params and the outputs of the task's dependencies, rendered when the task
//     starts; they override the child workflow's own defaults. A template that fails, or a
//     value the params' bounds refuse, fails the task without starting a child.
//
// For example:
//
//	tasks:
//	  - name: publish
//	    type: workflow
//	    workflow: publish-digest
//	    params: {text: "{{ .upstream.review.output }}"}
//	    depends-on: [review]
//
// The child runs at the priority of the task that started it (the parent instance's
// priority plus the task's). A workflow task has no retries, pool or timeout: give the
// child's workflow its own.
//
// An llm task makes one call to a language model; the completion is its output.
//
//   - provider (required): the name of a model provider configured under llm.providers in
//     the workers' config (an OpenAI-compatible server, Ollama, Anthropic, or the built-in
//     offline provider). `zksched submit` refuses a name its own config lacks.
//   - prompt (required): the prompt, a template (see Prompt templates).
//   - system: a system prompt, a template.
//   - temperature: 0 to 2; default the provider library's.
//   - max-tokens: a cap on the completion's tokens; default the model's.
//
// An agent task runs named steps in order, each one model call whose prompt can use the
// completions of the steps before it; the last step's completion is the task's output.
//
//   - provider (required), system, temperature, max-tokens: as for llm; system and the
//     model settings apply to every step.
//   - steps (required): 1 to 100 steps, each {name, prompt} or a wait step {name, wait:
//     true}. Names follow the rule of task names and are unique within the task; a prompt
//     must not be empty, and a wait step has none.
//
// For example:
//
//	tasks:
//	  - name: digest
//	    type: agent
//	    provider: openai-main
//	    depends-on: [fetch]
//	    retries: 2
//	    steps:
//	      - {name: themes, prompt: "List the main themes in: {{ .upstream.fetch.output }}"}
//	      - {name: report, prompt: "Write a weekly report on: {{ .steps.themes }}"}
//
// After each step the worker checkpoints the step's completion and token usage in the
// database, under the attempt's fencing token. A later attempt of the task (a retry, or
// another worker after a failover) starts from the first step without a checkpoint: a step
// that finished is never sent to the model again, so a failover never pays for it twice.
//
// A wait step pauses the agent for a person: when the agent reaches it (every step before it
// checkpointed), its attempt ends with the outcome paused and gives its worker slot back,
// and the task waits as a wait task does — no worker, no slot — until it is signalled the same
// ways (`zksched signal`, Approve or Reject on its page, the API). An approving signal's
// output becomes the step's output, {{ .steps.<name> }} in the prompts after it, and the task
// is queued again: any worker takes it up as a new attempt and goes on from the next step,
// without calling the model again for the steps before. A rejecting signal fails the task,
// its text as the reason. A wait step that is the last step gives the task the signal's
// output. A rerun of an agent rejected at a wait step goes on from its checkpoints and waits
// at that step again.
//
//   - timeout: how long the step waits, from when it began; without one it waits however
//     long it takes. The task's own timeout bounds each attempt, never a wait.
//   - on-timeout: what the step's timeout makes of it: fail (the default) fails the task;
//     succeed goes on from the next step with an empty output for the wait step.
//
// For example, a draft a person approves, then polished with their remarks:
//
//	steps:
//	  - {name: draft, prompt: "Draft a release note for: {{ .params.change }}"}
//	  - {name: approve, wait: true, timeout: 48h}
//	  - {name: polish, prompt: "Polish {{ .steps.draft }} with these remarks: {{ .steps.approve }}"}
//
// Every model call is retried inside the attempt when it fails with a rate limit (HTTP 429,
// after its Retry-After), a server error, a timeout or a network error, with backoff and
// jitter, up to the provider's max-attempts and never past the task's timeout; a bad request
// or an authentication error fails the attempt at once. The task's own retries then apply as
// for any task. Token usage (prompt, completion, total, requests) is recorded for every
// attempt and task, and for every agent step in its checkpoint.
//
// # Prompt templates
//
// Prompts and system prompts are Go templates (text/template) over:
//
//   - .params.<name>: the workflow instance's params;
//   - .upstream.<task>.output: the output of a task this one depends on (depends-on); for a
//     name with '-' or '.', write {{ index .upstream "fetch-data" "output" }};
//   - .steps.<step>: in an agent's step prompts, the completion of an earlier step;
//   - .item and .index: in the prompts of a for-each task, its item and the item's index.
//
// Template actions work as usual ({{ if }}, {{ range $name, $u := .upstream }}). A reference
// to anything else is an error, never an empty string: a template that does not parse, that
// names a task outside depends-on, a step that is not earlier, or .steps outside an agent's
// steps is refused at submit time; a param the run does not have fails the task when it runs,
// with the template's message, before any model call.
//
// A template is a small program, so it runs within bounds: one {{ range }} goes over at most
// 100,000 items (MaxRangeItems), all loops together take at most 1,000,000 steps (a loop's
// items times the nodes of its body, an inner loop again for each turn of the outer one), a
// prompt expands to at most 1 MiB and so does every string printf, print, html, js or urlquery
// makes inside it; printf widths are at most 1,000; a call takes at most 100 arguments; and
// {{ define }}, {{ block }} and {{ template }} are refused, as one template calling another can
// do work exponential in its size. What is certain to break a bound (a range over a literal
// number above the limit, nested literal ranges, {{ define }}) is refused at submit time; the
// rest fails the task when it runs. Rendering stops as soon as the task times out or is
// killed.
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
// shell task without a command; an llm task without a provider or a prompt, an agent
// without steps, a step without a name or with an empty prompt, a prompt template that does
// not parse or refers to what the task cannot see; a workflow task without a workflow, naming
// its own, with a negative version, or with retries, a pool or a timeout; a for-each on a
// wait or workflow task, or that does not parse, .item or .index outside a for-each task's
// prompts, a negative max-parallel or one without for-each; a field of another type; a
// dependency on a task that does not
// exist, on the task itself, or listed twice; a dependency cycle; a number out of its range; a
// negative duration; an invalid param, env, group or pool name (names are at most 128 bytes);
// more than 100 params, or a param value over 64 KiB or with a NUL (CheckParams, which also
// checks the params given at submit, by a trigger or through the API); a workflow with no tasks; a
// schedule with an invalid cron expression (or one no date matches), an unknown time zone,
// an unreadable start or end, an end before its start or no fire time between them, an
// unknown misfire or when-full policy. A file
// larger than 1 MiB or with more than 10,000 tasks is refused before anything else.
//
// A rejection is bounded whatever the file: at most 20 problems are reported (MaxErrors),
// then one saying the list stopped; a message quotes at most 200 bytes of any value
// (MaxQuoted), ending a longer one with "…". Aliases and merge keys are counted each time
// they bring a node or a value in: a file that expands to more than 524,288 YAML nodes or
// 4 MiB of values, merges a mapping into itself or nests merges more than 32 deep is refused.
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
