package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
)

// Checkpointer stores an agent task's finished steps, so that a later attempt (a retry, or
// another worker after a failover) goes on from the first unfinished step and never pays
// for a finished one again. The worker implements it on PostgreSQL, every write under the
// attempt's fencing token.
type Checkpointer interface {
	// Load returns the steps earlier attempts of the task finished, by step name.
	Load(ctx context.Context) (map[string]Checkpoint, error)
	// Save records that step finished. An error means it was not stored; when the cause is
	// that the task no longer belongs to this attempt, the attempt is being stopped.
	Save(ctx context.Context, step string, cp Checkpoint) error
}

// Checkpoint is one finished step of an agent task.
type Checkpoint struct {
	Output string
	Usage  llm.Usage
	// Attempt is the attempt that ran the step; Save leaves it to the store.
	Attempt int
}

// Agent runs agent tasks: their steps in order, each a prompt rendered over the params, the
// upstream outputs and the outputs of the earlier steps, each checkpointed as soon as it
// finishes. The last step's completion is the task's output. A wait step ends the attempt,
// paused (Result.Paused), unless a signal has given it its output: then that output, which
// the signal stored as the step's checkpoint, is the step's.
type Agent struct {
	Providers *llm.Providers
	// Shell runs the shell tools of a tool-calling agent.
	Shell Shell
	// HTTP bounds its http tools.
	HTTP HTTPTools
	// Events, unless nil, is told of a tool-calling agent's turns and tool calls.
	Events AgentEvents
}

// Run implements Executor.
func (e Agent) Run(ctx context.Context, t Task, log io.Writer) Result {
	if len(t.Spec.Tools) > 0 {
		client, err := e.Providers.Get(t.Spec.Provider)
		if err != nil {
			return Result{Err: err}
		}
		return e.loop(ctx, t, client, log)
	}
	switch {
	case t.Checkpoints == nil:
		return Result{Err: errors.New("agent task run without a checkpoint store")}
	case len(t.Spec.Steps) == 0:
		return Result{Err: errors.New("the agent task has no steps")}
	}
	client, err := e.Providers.Get(t.Spec.Provider)
	if err != nil {
		return Result{Err: err}
	}
	done, err := t.Checkpoints.Load(ctx)
	if err != nil {
		return Result{Err: fmt.Errorf("load checkpoints: %w", err)}
	}
	var own, total llm.Usage
	outputs := make(map[string]string, len(t.Spec.Steps))
	result := func(err error) Result { return Result{Err: err, Usage: &own, TaskUsage: &total} }
	for i, st := range t.Spec.Steps {
		label := fmt.Sprintf("step %d/%d %s", i+1, len(t.Spec.Steps), st.Name)
		cp, ok := done[st.Name]
		switch {
		case ok && st.Wait:
			fmt.Fprintf(log, "%s: signalled while attempt %d waited, its output taken from its checkpoint\n", label, cp.Attempt)
			outputs[st.Name] = cp.Output
			continue
		case ok:
			fmt.Fprintf(log, "%s: done by attempt %d, taken from its checkpoint (%d tokens)\n", label, cp.Attempt, cp.Usage.TotalTokens)
			outputs[st.Name] = cp.Output
			total = total.Add(cp.Usage)
			continue
		case st.Wait:
			fmt.Fprintf(log, "%s: waits for a signal; the attempt ends here, paused, and the next one goes on from the step after it\n", label)
			r := result(nil)
			r.Paused = &Pause{Step: st.Name, Timeout: time.Duration(st.Timeout)}
			return r
		}
		// Each template gets its own copy of the outputs so far.
		data := workflow.TemplateData{Params: t.Params, Upstream: t.Upstream, Steps: maps.Clone(outputs), Item: t.Item, Assets: t.Assets}
		req, err := request(ctx, t.Spec, fmt.Sprintf("step %q prompt", st.Name), st.Prompt, data)
		if err != nil {
			return result(err)
		}
		resp, err := call(ctx, client, req, label, log)
		own, total = own.Add(resp.Usage), total.Add(resp.Usage)
		if err != nil {
			return result(fmt.Errorf("step %q: %w", st.Name, err))
		}
		if err := t.Checkpoints.Save(ctx, st.Name, Checkpoint{Output: resp.Text, Usage: resp.Usage}); err != nil {
			return result(fmt.Errorf("checkpoint step %q: %w", st.Name, err))
		}
		outputs[st.Name] = resp.Text
	}
	r := result(nil)
	r.Output = outputs[t.Spec.Steps[len(t.Spec.Steps)-1].Name]
	return r
}
