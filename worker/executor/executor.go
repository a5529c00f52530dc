// Package executor runs one attempt of a task: the shell executor through a small supervisor
// process that takes every process the task started down with it (a cgroup per attempt, or
// the supervisor as a child subreaper), the llm and agent
// executors through worker/llm, and the noop executor for tests and benchmarks. An executor
// knows nothing of ZooKeeper or PostgreSQL: the worker hands it a Task, a context whose
// cancellation means "stop now", and a writer for the log; an agent also gets a Checkpointer.
package executor

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
)

// Task is what an executor needs to run one attempt.
type Task struct {
	ID                 int64
	WorkflowInstanceID int64
	Attempt            int
	WorkerID           string
	// Traceparent is the W3C trace context of the attempt's span, given to a shell task as
	// TRACEPARENT; "" without tracing.
	Traceparent string
	Spec        workflow.Task
	// Params are the workflow instance's parameters.
	Params map[string]string
	// Upstream are the results of the task's direct dependencies, by task name.
	Upstream map[string]workflow.Upstream
	// Item is the item of a for-each task's instance, nil for any other task.
	Item *workflow.Item
	// Assets are the asset events that started the run, nil for a run no asset started.
	Assets map[string]workflow.AssetInput
	// Checkpoints stores and loads an agent task's finished steps under the attempt's
	// fencing token; nil for other types.
	Checkpoints Checkpointer
	// Loop stores a tool-calling agent's turns and tool calls under the attempt's fencing
	// token; nil for other types.
	Loop LoopStore
	// Children starts and watches the children of its workflow tools; nil for other types.
	Children Children
	// OutputLimit is the most bytes the task's output may have: its output-limit, or the
	// worker's worker.output-limit (see LimitOutput). 0 means none.
	OutputLimit int

	// upstreamFiles are the files a shell task reads its dependencies' outputs from, by
	// dependency (see upstreamFiles).
	upstreamFiles map[string]string
	// stdoutTap, when set, gets a copy of a shell task's standard output: a shell tool's
	// result.
	stdoutTap io.Writer
	// stdin makes the supervisor give the command its standard input: an MCP server's.
	stdin bool
}

// Env returns the variables every task process gets, so a user's script can make its side
// effects idempotent per task and attempt; an item of a for-each task gets its item and index,
// and a task with dependencies their outputs (see upstreamEnv).
func (t Task) Env() []string {
	env := []string{
		"ZKSCHED_TASK_INSTANCE=" + strconv.FormatInt(t.ID, 10),
		"ZKSCHED_WORKFLOW_INSTANCE=" + strconv.FormatInt(t.WorkflowInstanceID, 10),
		"ZKSCHED_ATTEMPT=" + strconv.Itoa(t.Attempt),
		"ZKSCHED_WORKER=" + t.WorkerID,
		"ZKSCHED_TASK_NAME=" + t.Spec.Name,
	}
	for k, v := range t.Params {
		env = append(env, "ZKSCHED_PARAM_"+k+"="+v)
	}
	env = append(env, t.upstreamEnv(t.upstreamFiles)...)
	if t.Item != nil {
		env = append(env, "ZKSCHED_ITEM="+t.Item.Value, "ZKSCHED_INDEX="+strconv.Itoa(t.Item.Index))
	}
	if t.Traceparent != "" {
		env = append(env, "TRACEPARENT="+t.Traceparent)
	}
	for k, v := range t.Spec.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// Result is how an attempt ended, as far as the executor can tell. The worker decides the
// outcome: a context cancelled for a timeout, a kill or a hand-back overrides Err.
type Result struct {
	// Err is nil when the task succeeded.
	Err error
	// ExitCode is the process's exit status, when there was a process.
	ExitCode *int
	// Stopped is set when the executor stopped the attempt because its context was
	// cancelled. An attempt that ended by itself first is not stopped, whatever the context
	// says later: its result is its own.
	Stopped bool
	// Output is the task's result for downstream tasks: for shell, its last non-empty line
	// of standard output; for llm, the completion; for agent, the last step's completion.
	Output string
	// OutputSize is the output's size in bytes when the executor kept only the first
	// Task.OutputLimit bytes of it (a longer line of a shell task); 0 means len(Output).
	OutputSize int
	// OutputTruncated says Output is the first bytes of a longer output (LimitOutput).
	OutputTruncated bool
	// Usage is the token usage of the attempt's own model calls; nil for tasks that call no
	// model.
	Usage *llm.Usage
	// TaskUsage is the token usage of the whole result: for an agent, every step, including
	// those an earlier attempt checkpointed; nil when it is Usage or there is none.
	TaskUsage *llm.Usage
	// Paused is set when an agent reached a wait step with no signal yet: the attempt ends
	// there, every step before it checkpointed, and the task waits for the signal.
	Paused *Pause
}

// Pause is the wait step an agent's attempt ended at.
type Pause struct {
	Step string
	// Timeout bounds the wait; 0 waits without end.
	Timeout time.Duration
}

// Executor runs attempts of one task type.
type Executor interface {
	// Run runs the attempt until it ends or ctx is cancelled, writing its log to log. When
	// ctx is cancelled it stops the attempt (for shell: SIGTERM to the task's processes,
	// SIGKILL after the kill grace) and returns once everything the attempt started is gone.
	Run(ctx context.Context, t Task, log io.Writer) Result
}

// StreamLog is a log that takes a task's output streams apart: the worker's log masks its
// secrets, and a secret split between two writes is found only if nothing of another stream
// comes between them. The shell executor writes each of stdout and stderr through a Stream
// of its own when its log is a StreamLog.
type StreamLog interface {
	io.Writer
	// Stream returns a writer for one stream to the same log; closing it writes out what it
	// held back.
	Stream() io.WriteCloser
}

// Set maps task types to executors.
type Set map[string]Executor

// For returns the executor of a type.
func (s Set) For(typ string) (Executor, error) {
	e, ok := s[typ]
	if !ok {
		return nil, fmt.Errorf("no executor for task type %q", typ)
	}
	return e, nil
}

// Noop succeeds at once. It is for tests and benchmarks.
type Noop struct{}

// Run implements Executor.
func (Noop) Run(ctx context.Context, t Task, log io.Writer) Result { return Result{} }
