package workflow

import (
	"container/heap"
	"fmt"
	"slices"
	"time"
)

// Limits on what one workflow may hold. They keep a single submit from tying up the master
// (which holds the DAG in memory) or the database row that stores the spec.
const (
	// MaxFileSize is the largest workflow file Parse and ParseFile accept, in bytes.
	MaxFileSize = 1 << 20
	// MaxTasks is the largest number of tasks in one workflow.
	MaxTasks = 10_000
)

// Bounds of the numeric task fields.
const (
	// MaxRetries is the most retries a task may ask for; a task failing more often than this
	// needs fixing, not retrying.
	MaxRetries = 100
	// MinPriority is the lowest task priority.
	MinPriority = -1000
	// MaxPriority is the highest task priority.
	MaxPriority = 1000
)

// DefaultGroup is the worker group of a task that names none. Workers claim it unless
// configured otherwise.
const DefaultGroup = "default"

// Spec is a parsed workflow: a named DAG of tasks. It is stored as JSON (the jsonb column of
// workflow_definition) with the same field names as the YAML file, and read back with a plain
// json.Unmarshal.
//
// The methods that walk the DAG (Order, Roots, Downstream) expect a Spec that passed
// Validate; on an invalid one they ignore what they cannot make sense of.
type Spec struct {
	Name        string `json:"name" yaml:"name"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Params declare the params a run may give (`zksched submit --param k=v`), each with its
	// type and default (see Param). Their names follow the rule of environment variable
	// names, as tasks read them as ZKSCHED_PARAM_<name>.
	Params map[string]Param `json:"params,omitempty" yaml:"params,omitempty"`
	// ParamsExtra is what a run may do with a param Params does not declare:
	// ParamsExtraRefuse (also for "") or ParamsExtraAllow.
	ParamsExtra string `json:"params-extra,omitempty" yaml:"params-extra,omitempty"`
	// Tasks are in file order, which breaks ties wherever an order is chosen.
	Tasks []Task `json:"tasks" yaml:"tasks"`

	// Schedule makes the masters run the workflow by themselves; nil means only on demand.
	Schedule *Schedule `json:"schedule,omitempty" yaml:"schedule,omitempty"`
	// MaxActiveInstances caps the instances of the workflow that run at once, 0 for no cap.
	MaxActiveInstances int `json:"max-active-instances,omitempty" yaml:"max-active-instances,omitempty"`
	// WhenFull is what a new instance does at the cap: WhenFullQueue or WhenFullSkip. Parse
	// sets WhenFullQueue when there is a cap and the file names no policy.
	WhenFull string `json:"when-full,omitempty" yaml:"when-full,omitempty"`
	// Concurrency makes the instances whose key renders the same run at most its Max at a
	// time, in submit order; nil means no key.
	Concurrency *Concurrency `json:"concurrency,omitempty" yaml:"concurrency,omitempty"`
	// Timeout bounds a whole run, from when it starts (not while it waits for a slot): past
	// it, running tasks are killed and the instance fails. 0 means none.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Priority is added to every task's priority, so it orders claims across workflows.
	// MinPriority..MaxPriority; `zksched submit --priority` overrides it for one run.
	Priority int `json:"priority,omitempty" yaml:"priority,omitempty"`
	// Notify says who hears of the workflow's events; none means the masters'
	// notify.default.
	Notify []Notify `json:"notify,omitempty" yaml:"notify,omitempty"`
	// Deadline is how long after its submission an instance should have ended: past it the
	// deadline event is sent, once, and nothing else changes. 0 means none.
	Deadline Duration `json:"deadline,omitempty" yaml:"deadline,omitempty"`
	// Triggers are the events from outside that submit a run of the stored workflow (see
	// Trigger); none means it runs only by its schedule or on demand.
	Triggers []Trigger `json:"triggers,omitempty" yaml:"triggers,omitempty"`
	// OnAssets makes the masters start a run when the assets it names have had events (see
	// assets.go); nil means no asset starts it.
	OnAssets *OnAssets `json:"on-assets,omitempty" yaml:"on-assets,omitempty"`
}

// Task is one node of the DAG. The fields from Command on belong to one task type each; the
// registry in types.go says which, and Validate refuses a field set on a task of another type.
type Task struct {
	Name string `json:"name" yaml:"name"`
	// Type is one of Types().
	Type      string   `json:"type" yaml:"type"`
	DependsOn []string `json:"depends-on,omitempty" yaml:"depends-on,omitempty"`
	// Retries is how many times a failed run is retried, 0..MaxRetries.
	Retries       int      `json:"retries,omitempty" yaml:"retries,omitempty"`
	RetryInterval Duration `json:"retry-interval,omitempty" yaml:"retry-interval,omitempty"`
	// RetryBackoff makes the wait before each retry grow; nil waits RetryInterval before
	// every retry. It and RetryInterval are exclusive.
	RetryBackoff *RetryBackoff `json:"retry-backoff,omitempty" yaml:"retry-backoff,omitempty"`
	// RetryOn, when set, retries only the failures it names; NoRetryOn never retries those
	// it names. A failure not retried fails the task at once.
	RetryOn   *RetryOn `json:"retry-on,omitempty" yaml:"retry-on,omitempty"`
	NoRetryOn *RetryOn `json:"no-retry-on,omitempty" yaml:"no-retry-on,omitempty"`
	// Timeout bounds one run; 0 means none.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Deadline is how long after its workflow instance's submission the task should have
	// ended: past it the deadline event is sent, once, and nothing else changes. 0 means none.
	Deadline Duration `json:"deadline,omitempty" yaml:"deadline,omitempty"`
	// Priority orders claims: higher is claimed first. MinPriority..MaxPriority.
	Priority int `json:"priority,omitempty" yaml:"priority,omitempty"`
	// Group is the worker group that runs the task; Parse sets DefaultGroup when the file
	// names none.
	Group string `json:"group" yaml:"group"`
	// Pool names a concurrency pool shared across workflows: the config's pools: section
	// limits how many of its tasks run at once across all workers.
	Pool string            `json:"pool,omitempty" yaml:"pool,omitempty"`
	Env  map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// Trigger is what the task's dependencies must have come to for it to run: one of
	// Triggers; empty means TriggerAllSucceeded.
	Trigger string `json:"trigger,omitempty" yaml:"trigger,omitempty"`
	// When is a template over the params and the upstream outputs that renders true or
	// false; false skips the task. Empty means true.
	When string `json:"when,omitempty" yaml:"when,omitempty"`
	// ForEach is a template over the params and the upstream outputs that renders the task's
	// items: a JSON array, or one item a line. The task then runs once per item, each run a
	// task instance of its own (name[0], name[1], ...) that sees its item; see Items. Empty
	// means the task runs once.
	ForEach string `json:"for-each,omitempty" yaml:"for-each,omitempty"`
	// MaxParallel caps how many of a for-each task's items run at once, 0 for no cap.
	MaxParallel int `json:"max-parallel,omitempty" yaml:"max-parallel,omitempty"`
	// OutputLimit bounds the task's output in bytes, 1..MaxOutputLimit; 0 means the workers'
	// worker.output-limit (DefaultOutputLimit unless set). For a for-each task it bounds each
	// item's output and the JSON array of them (DefaultOutputLimit for the array when 0).
	OutputLimit int `json:"output-limit,omitempty" yaml:"output-limit,omitempty"`
	// OutputOverflow is what an output over the limit does: one of OverflowPolicies; empty
	// means OverflowFail.
	OutputOverflow string `json:"output-overflow,omitempty" yaml:"output-overflow,omitempty"`
	// Produces are the assets the task produces: each success writes an event of each, with
	// the task's output, in the statement that records the success.
	Produces []string `json:"produces,omitempty" yaml:"produces,omitempty"`

	// Command is the shell task's script, run with bash -c.
	Command string `json:"command,omitempty" yaml:"command,omitempty"`
	// Workdir is the shell task's working directory; empty means the worker's.
	Workdir string `json:"workdir,omitempty" yaml:"workdir,omitempty"`

	// Provider names the model provider of an llm or agent task, a key of llm.providers in
	// the workers' config.
	Provider string `json:"provider,omitempty" yaml:"provider,omitempty"`
	// Prompt is the llm task's prompt, a template (see docs/workflows.md, Prompt templates).
	Prompt string `json:"prompt,omitempty" yaml:"prompt,omitempty"`
	// System is the system prompt of an llm task, or of every step of an agent task; a
	// template. Empty sends none.
	System string `json:"system,omitempty" yaml:"system,omitempty"`
	// Temperature is the sampling temperature of an llm or agent task, 0..2; nil leaves the
	// model's default.
	Temperature *float64 `json:"temperature,omitempty" yaml:"temperature,omitempty"`
	// MaxTokens caps the tokens of each completion of an llm or agent task; 0 leaves the
	// model's default.
	MaxTokens int `json:"max-tokens,omitempty" yaml:"max-tokens,omitempty"`
	// Steps are the agent task's steps, run in order, each checkpointed when it finishes.
	Steps []Step `json:"steps,omitempty" yaml:"steps,omitempty"`
	// Tools make an agent task a loop instead of steps: its Prompt starts a conversation in
	// which the model may call these tools, sees their results and decides when it is done;
	// its final answer is the task's output. An agent has either Steps or Prompt and Tools.
	Tools []Tool `json:"tools,omitempty" yaml:"tools,omitempty"`
	// MaxTurns bounds a tool-calling agent's model calls; 0 means DefaultMaxTurns.
	MaxTurns int `json:"max-turns,omitempty" yaml:"max-turns,omitempty"`
	// MaxToolCalls bounds a tool-calling agent's tool calls, over all its turns; 0 means
	// DefaultMaxToolCalls.
	MaxToolCalls int `json:"max-tool-calls,omitempty" yaml:"max-tool-calls,omitempty"`
	// OutputFormat is what a tool-calling agent's final answer must be: OutputText (the
	// default, also for "") or OutputJSON, a JSON value matching OutputSchema when it is set.
	// An answer that does not parse or match gets one repair turn, then fails the task.
	OutputFormat string         `json:"output-format,omitempty" yaml:"output-format,omitempty"`
	OutputSchema map[string]any `json:"output-schema,omitempty" yaml:"output-schema,omitempty"`
	// MaxCost bounds what a tool-calling agent's model calls cost in all, at its provider's
	// input-price and output-price (which the workers' config must give); nil means no bound.
	MaxCost *float64 `json:"max-cost,omitempty" yaml:"max-cost,omitempty"`
	// MaxTotalTokens bounds the tokens a tool-calling agent's model calls use in all (what
	// each turn sends and receives); 0 means no bound. MaxTokens still caps each completion.
	MaxTotalTokens int `json:"max-total-tokens,omitempty" yaml:"max-total-tokens,omitempty"`

	// OnTimeout is what a wait task or a sensor comes to at its timeout: OnTimeoutFail (the
	// default, also for "") or OnTimeoutSucceed, with an empty output; a sensor may also
	// take OnTimeoutSkip.
	OnTimeout string `json:"on-timeout,omitempty" yaml:"on-timeout,omitempty"`

	// HTTP, SQL, File, Time and WorkflowRun are a sensor task's condition, exactly one of
	// them; Interval is the wait between its checks (0: DefaultSensorInterval) and Mode one of
	// SensorReschedule (the default, also for "") and SensorPoke. See sensor.go. A file writes
	// WorkflowRun as workflow: {name, state, since} (or workflow-run:); it is stored as
	// workflow-run, apart from Workflow, a workflow task's.
	HTTP        *SensorHTTP     `json:"http,omitempty" yaml:"http,omitempty"`
	SQL         *SensorSQL      `json:"sql,omitempty" yaml:"sql,omitempty"`
	File        *SensorFile     `json:"file,omitempty" yaml:"file,omitempty"`
	Time        *SensorTime     `json:"time,omitempty" yaml:"time,omitempty"`
	WorkflowRun *SensorWorkflow `json:"workflow-run,omitempty" yaml:"workflow-run,omitempty"`
	Interval    Duration        `json:"interval,omitempty" yaml:"interval,omitempty"`
	Mode        string          `json:"mode,omitempty" yaml:"mode,omitempty"`

	// Workflow names the stored workflow a workflow task starts an instance of (a child).
	Workflow string `json:"workflow,omitempty" yaml:"workflow,omitempty"`
	// Version is the version of Workflow the child runs; 0 means the latest stored when the
	// task starts.
	Version int `json:"version,omitempty" yaml:"version,omitempty"`
	// Params are the child's params, each a template over the params and the upstream outputs,
	// rendered when the task starts.
	Params map[string]string `json:"params,omitempty" yaml:"params,omitempty"`
}

// TypeWait is the type of a task that runs nowhere: it waits, holding no slot, until it is
// signalled or its timeout passes.
const TypeWait = "wait"

// What a wait task comes to at its timeout.
const (
	OnTimeoutFail    = "fail"
	OnTimeoutSucceed = "succeed"
)

// checkWait checks a wait task: it runs on no worker, so retries and a pool mean nothing.
func checkWait(t *Task) []problem {
	var probs []problem
	if t.OnTimeout != "" && t.OnTimeout != OnTimeoutFail && t.OnTimeout != OnTimeoutSucceed {
		probs = append(probs, problem{field: "on-timeout", msg: fmt.Sprintf("on-timeout %s is unknown: use %s or %s",
			quote(t.OnTimeout), OnTimeoutFail, OnTimeoutSucceed)})
	}
	if t.Retries != 0 {
		probs = append(probs, problem{field: "retries", msg: "a wait task runs nowhere, so it has no retries"})
	}
	if t.Pool != "" {
		probs = append(probs, problem{field: "pool", msg: "a wait task runs nowhere, so it takes no place in a pool"})
	}
	return probs
}

// Step is one step of an agent task: a named prompt whose completion later steps can use,
// or a wait step, whose output is the signal that ends its wait.
type Step struct {
	// Name is unique within the task; later prompts refer to its output as .steps.<name>.
	Name string `json:"name" yaml:"name"`
	// Prompt is a template over the workflow's params, the upstream outputs and the outputs
	// of the earlier steps. A wait step has none.
	Prompt string `json:"prompt" yaml:"prompt"`
	// Wait makes the step wait for a signal instead of calling the model: the agent's attempt
	// ends there, paused, holding no slot, and a signal's output becomes the step's.
	Wait bool `json:"wait,omitempty" yaml:"wait,omitempty"`
	// Timeout bounds a wait step's wait, from when it began; 0 waits without end.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// OnTimeout is what a wait step comes to at its timeout: OnTimeoutFail (the default, also
	// for "") fails the task, OnTimeoutSucceed goes on with an empty output.
	OnTimeout string `json:"on-timeout,omitempty" yaml:"on-timeout,omitempty"`
}

// The output formats of a tool-calling agent.
const (
	OutputText = "text"
	OutputJSON = "json"
)

// Tool is a tool a tool-calling agent's model may call.
type Tool struct {
	// Name is unique within the task and is what the model calls: letters, digits, '_' and
	// '-', at most 64 characters (what every provider accepts).
	Name string `json:"name" yaml:"name"`
	// Description tells the model what the tool does and when to use it.
	Description string `json:"description" yaml:"description"`
	// Type is one of ToolTypes.
	Type string `json:"type" yaml:"type"`
	// Command is a shell tool's script, run with bash -c like a shell task's command. The
	// call's arguments reach it only as environment variables, never in the script's text.
	Command string `json:"command,omitempty" yaml:"command,omitempty"`
	// URL is an http tool's address: it must start with one of the workers'
	// worker.http-tools.allow. Method is its HTTP method, HTTPMethods, empty for POST: GET
	// and DELETE send the call's arguments as the query string, the others as a JSON body.
	// Headers are sent with every call; ${NAME} in a value is the worker's variable NAME, if
	// its task environment (worker.task-env) lets NAME through.
	URL     string            `json:"url,omitempty" yaml:"url,omitempty"`
	Method  string            `json:"method,omitempty" yaml:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty" yaml:"headers,omitempty"`
	// Workflow and Version are a workflow tool's: each call starts an instance of the stored
	// workflow (version 0: the latest stored), the call's arguments as its params, and waits
	// for it to end; its final output is the call's result. A call starts one child, however
	// often it runs: a later attempt finds the child the call started.
	Workflow string `json:"workflow,omitempty" yaml:"workflow,omitempty"`
	Version  int    `json:"version,omitempty" yaml:"version,omitempty"`
	// Include and Exclude filter the tools of an mcp tool's server by name: only those in
	// Include when it is set, none of those in Exclude. An mcp tool's server is Command (run
	// per attempt like a shell task, spoken to over its standard input and output) or URL
	// (streamable HTTP, under worker.http-tools.allow); each of its tools is offered to the
	// model as <name>__<tool>.
	Include []string `json:"include,omitempty" yaml:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty" yaml:"exclude,omitempty"`
	// Arguments is the JSON Schema of the call's arguments (an object schema); a call whose
	// arguments do not match goes back to the model as the tool's error, not run. Empty
	// means the tool takes no arguments.
	Arguments map[string]any `json:"arguments,omitempty" yaml:"arguments,omitempty"`
	// Idempotent says that running a call twice has the effect of running it once (the tool
	// dedupes on ZKSCHED_TOOL_CALL_ID): a call interrupted by a crash may then be run again.
	Idempotent bool `json:"idempotent,omitempty" yaml:"idempotent,omitempty"`
	// OnInterrupted is what a later attempt does with a call that started and did not end
	// (its worker died mid-call): one of OnInterruptedPolicies; empty means OnInterruptedRetry
	// for an idempotent tool and OnInterruptedAsk for any other.
	OnInterrupted string `json:"on-interrupted,omitempty" yaml:"on-interrupted,omitempty"`
	// Timeout bounds one call; 0 means DefaultToolTimeout. The task's timeout bounds all.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Approve makes each call wait, holding no slot, for a person's approval before it runs;
	// a rejection goes back to the model as the call's result, with the reviewer's text.
	Approve bool `json:"approve,omitempty" yaml:"approve,omitempty"`
	// ApproveWhen is a template over the params, the upstream outputs and the call's
	// arguments (.args) that renders true or false: true makes the call wait for approval as
	// Approve does. Empty: Approve decides.
	ApproveWhen string `json:"approve-when,omitempty" yaml:"approve-when,omitempty"`
}

// Tool types.
const (
	// ToolShell runs Command like a shell task, with the arguments in its environment.
	ToolShell = "shell"
	// ToolHTTP sends a request to URL with the arguments, and gives the model the answer.
	ToolHTTP = "http"
	// ToolMCP offers the tools of an MCP server.
	ToolMCP = "mcp"
	// ToolWorkflow starts a child workflow and gives the model its output.
	ToolWorkflow = "workflow"
)

// ToolTypes returns the tool types a tool-calling agent may declare.
func ToolTypes() []string { return []string{ToolShell, ToolHTTP, ToolMCP, ToolWorkflow} }

// MCPToolName is the name the model calls tool of the MCP server of the mcp tool server by.
func MCPToolName(server, tool string) string { return server + "__" + tool }

// HTTPMethods are the methods an http tool may use.
func HTTPMethods() []string { return []string{"GET", "POST", "PUT", "PATCH", "DELETE"} }

// What a later attempt does with a tool call interrupted by a crash.
const (
	// OnInterruptedRetry runs the call again with the same call id; only for idempotent tools.
	OnInterruptedRetry = "retry"
	// OnInterruptedAsk makes the task wait, holding no slot, for a person to say whether the
	// call took effect (a signal with "done" and the result, or "not-done" to run it again).
	OnInterruptedAsk = "ask"
	// OnInterruptedFail fails the task, naming the call.
	OnInterruptedFail = "fail"
)

// OnInterruptedPolicies returns the values of a tool's on-interrupted.
func OnInterruptedPolicies() []string {
	return []string{OnInterruptedRetry, OnInterruptedAsk, OnInterruptedFail}
}

// Bounds of a tool-calling agent.
const (
	DefaultMaxTurns     = 20
	MaxMaxTurns         = 200
	DefaultMaxToolCalls = 50
	MaxMaxToolCalls     = 1000
	MaxTools            = 64
	DefaultToolTimeout  = 10 * time.Minute
)

// Interrupted returns the tool's on-interrupted policy with the default applied.
func (t Tool) Interrupted() string {
	switch {
	case t.OnInterrupted != "":
		return t.OnInterrupted
	case t.Idempotent || t.Type == ToolWorkflow:
		// A workflow tool's call finds the child it started: running it again starts none.
		return OnInterruptedRetry
	}
	return OnInterruptedAsk
}

// The triggers: what a task's dependencies must have come to, once all have ended, for it
// to run. Otherwise it is skipped.
const (
	// TriggerAllSucceeded runs the task if every dependency succeeded (the default).
	TriggerAllSucceeded = "all-succeeded"
	// TriggerAllDone runs the task whatever its dependencies came to.
	TriggerAllDone = "all-done"
	// TriggerAnyFailed runs the task if one of its dependencies failed or was killed.
	TriggerAnyFailed = "any-failed"
)

// Triggers returns the values of a task's trigger field.
func Triggers() []string { return []string{TriggerAllSucceeded, TriggerAllDone, TriggerAnyFailed} }

// Duration is a time.Duration that reads and writes as a Go duration string ("30s") in both
// YAML and JSON, so the stored spec reads like the file it came from.
type Duration time.Duration

// String returns the duration in time.Duration's format, "1m30s".
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as a Go duration string. Both encoding/json and the YAML encoder use
// it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a Go duration string such as "30s" or "1h30m". A bare number is refused
// (except 0): "30" could mean seconds or nanoseconds.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s is not a duration: write a Go duration such as \"30s\", \"10m\" or \"1h30m\"", quote(s))
	}
	return v, nil
}

// Task returns the task called name. The pointer is into s.Tasks, so changes through it
// change s.
func (s *Spec) Task(name string) (*Task, bool) {
	for i := range s.Tasks {
		if s.Tasks[i].Name == name {
			return &s.Tasks[i], true
		}
	}
	return nil, false
}

// Roots returns the tasks with no dependencies, in file order: the ones a new run starts
// with.
func (s *Spec) Roots() []string {
	var roots []string
	for _, t := range s.Tasks {
		if len(t.DependsOn) == 0 {
			roots = append(roots, t.Name)
		}
	}
	return roots
}

// Downstream returns the tasks that depend directly on name, in file order: the ones to look
// at when name finishes.
func (s *Spec) Downstream(name string) []string {
	var down []string
	for _, t := range s.Tasks {
		if slices.Contains(t.DependsOn, name) {
			down = append(down, t.Name)
		}
	}
	return down
}

// Order returns the task names in a topological order: every task after all of its
// dependencies. Among tasks that could go next, the one earliest in the file goes first, so
// the order is stable and a file without dependencies keeps its own order.
//
// Dependencies on unknown tasks are ignored, and tasks on a dependency cycle (and those
// after them) are left out; Validate reports both.
func (s *Spec) Order() []string {
	index := s.index()
	pending := make([]int, len(s.Tasks)) // unmet dependencies of each task
	down := make([][]int, len(s.Tasks))
	for i, t := range s.Tasks {
		// A dependency listed twice is counted twice and released twice, so it needs no
		// special case.
		for _, dep := range t.DependsOn {
			j, ok := index[dep]
			if !ok {
				continue
			}
			pending[i]++
			down[j] = append(down[j], i)
		}
	}
	var ready indexHeap
	for i, n := range pending {
		if n == 0 {
			ready = append(ready, i)
		}
	}
	heap.Init(&ready)
	order := make([]string, 0, len(s.Tasks))
	for ready.Len() > 0 {
		i := heap.Pop(&ready).(int)
		order = append(order, s.Tasks[i].Name)
		for _, j := range down[i] {
			pending[j]--
			if pending[j] == 0 {
				heap.Push(&ready, j)
			}
		}
	}
	return order
}

// index maps each task name to its position; with duplicate names (which Validate refuses)
// the first one wins.
func (s *Spec) index() map[string]int {
	index := make(map[string]int, len(s.Tasks))
	for i, t := range s.Tasks {
		if _, dup := index[t.Name]; !dup {
			index[t.Name] = i
		}
	}
	return index
}

// indexHeap is a min-heap of task positions: it hands out the ready task earliest in the file.
type indexHeap []int

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h indexHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
