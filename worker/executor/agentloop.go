package executor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zksched/zksched/internal/faultinject"
	"github.com/zksched/zksched/tracing"
	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
)

// LoopStore stores a tool-calling agent's turns and tool calls, so that a later attempt (a
// retry, or another worker after a failover) replays what is done instead of doing it again:
// a finished turn is never sent to the model again, and an ended tool call never run again.
// The worker implements it on PostgreSQL, every write under the attempt's fencing token.
type LoopStore interface {
	// Load returns the turns and the tool calls of earlier attempts (and of this one).
	Load(ctx context.Context) ([]Turn, []ToolCall, error)
	// SaveTurn records an answered model call.
	SaveTurn(ctx context.Context, t Turn) error
	// StartCall records that c is about to run; nothing runs a call unless it returned nil.
	StartCall(ctx context.Context, c ToolCall) error
	// EndCall records c's result (c.Result, c.IsError).
	EndCall(ctx context.Context, c ToolCall) error
	// InterruptCall marks a started call interrupted: its fate is for a person to tell.
	InterruptCall(ctx context.Context, c ToolCall) error
}

// AgentEvents is told of a tool-calling agent's turns and tool calls (the worker's metrics).
type AgentEvents interface {
	// AgentTurn is a turn sent to provider's model, using tokens, or replayed.
	AgentTurn(provider string, replayed bool, tokens int)
	// AgentToolCall is a call that ended by outcome: one of the ToolOutcome values.
	AgentToolCall(outcome string)
}

// The outcomes of a tool call, as AgentEvents counts them.
const (
	ToolSucceeded   = "succeeded"
	ToolFailed      = "failed"
	ToolRefused     = "refused"
	ToolReplayed    = "replayed"
	ToolInterrupted = "interrupted"
	ToolRejected    = "rejected"
)

// noEvents is the AgentEvents of an Agent given none.
type noEvents struct{}

func (noEvents) AgentTurn(string, bool, int) {}
func (noEvents) AgentToolCall(string)        {}

func (e Agent) events() AgentEvents {
	if e.Events == nil {
		return noEvents{}
	}
	return e.Events
}

// Children starts and looks at the child instances of a tool-calling agent's workflow tools,
// under the attempt's fencing token. The worker implements it on PostgreSQL.
type Children interface {
	// Start starts the child of call c (an instance of workflow at version, 0 for the latest,
	// with params), or returns the one the call started before. An error the model should be
	// told (no such workflow, refused params) is a *ChildRefused.
	Start(ctx context.Context, c ToolCall, workflow string, version int, params map[string]string) (int64, error)
	// End says whether the child has ended and, if it has, how.
	End(ctx context.Context, child int64) (ChildEnd, error)
}

// ChildEnd is how a workflow tool's child ended.
type ChildEnd struct {
	Ended, Succeeded bool
	// Output is its final output, as a workflow task would get it; Error its error.
	Output, Error string
}

// ChildRefused is a child a call cannot start, for the model to be told.
type ChildRefused struct{ Msg string }

func (e *ChildRefused) Error() string { return e.Msg }

// Turn is one answered model call of a tool-calling agent.
type Turn struct {
	Turn int
	// Digest identifies what was sent: the request's SHA-256, hex.
	Digest   string
	Response llm.Response
	// Attempt is the attempt that made the call; the store sets it.
	Attempt int
}

// ToolCall is one call of a tool the model asked for, by turn and position in the turn.
type ToolCall struct {
	Turn, Seq int
	// ID is the call's stable id, the same in every attempt: a tool dedupes on it.
	ID string
	// ModelID is the provider's id of the call, which the result answers.
	ModelID   string
	Tool      string
	Arguments string
	// State is "started", "ended" or "interrupted" when loaded; the store keeps it.
	State   string
	Result  string
	IsError bool
	// Attempt is the attempt that started it last; Starts how often it started.
	Attempt int
	Starts  int
}

// The states of a stored tool call.
const (
	CallStarted     = "started"
	CallEnded       = "ended"
	CallInterrupted = "interrupted"
)

// toolResultLimit bounds what a tool's result gives the model back: the first bytes of its
// standard output, marked cut.
const toolResultLimit = 64 << 10

// CallID is the stable id of the seq-th call of turn in task instance taskID, the
// ZKSCHED_TOOL_CALL_ID its tool gets.
func CallID(taskID int64, turn, seq int) string { return workflow.ToolCallID(taskID, turn, seq) }

// ApprovalStep is the paused step an agent waits at for a person to approve a call of a tool
// with approve: true; an approval stores a checkpoint under this name, a rejection one under
// RejectionStep's, its text the reviewer's.
func ApprovalStep(turn, seq int) string { return fmt.Sprintf("tool-approval:%d.%d", turn, seq) }

// RejectionStep is the checkpoint a rejected call's review leaves: see ApprovalStep.
func RejectionStep(turn, seq int) string { return fmt.Sprintf("tool-rejection:%d.%d", turn, seq) }

// ChildStep is the paused step an agent waits at, on no worker, while the child of its
// workflow tool's call callID runs: the child's end queues the task again. Its timeout's
// passing resumes it too, and leaves a checkpoint under this name.
func ChildStep(callID string) string { return "tool-child:" + callID }

// InterruptedStep is the paused step an agent waits at for a person to tell the fate of an
// interrupted call; a signal's output is then the call's result.
func InterruptedStep(turn, seq int) string { return fmt.Sprintf("tool-call:%d.%d", turn, seq) }

// loop runs a tool-calling agent: model turn, its tool calls, their results, the next turn,
// until the model answers without calling a tool (its answer is the output) or a bound ends
// it.
func (e Agent) loop(ctx context.Context, t Task, client *llm.Client, log io.Writer) Result {
	spec := t.Spec
	store := t.Loop
	if store == nil {
		return Result{Err: errors.New("tool-calling agent run without a loop store")}
	}
	turns, calls, err := store.Load(ctx)
	if err != nil {
		return Result{Err: fmt.Errorf("load the agent's turns: %w", err)}
	}
	doneTurns := make(map[int]Turn, len(turns))
	for _, tr := range turns {
		doneTurns[tr.Turn] = tr
	}
	doneCalls := make(map[[2]int]ToolCall, len(calls))
	for _, c := range calls {
		doneCalls[[2]int{c.Turn, c.Seq}] = c
	}
	signalled := map[string]Checkpoint{}
	if t.Checkpoints != nil {
		if signalled, err = t.Checkpoints.Load(ctx); err != nil {
			return Result{Err: fmt.Errorf("load checkpoints: %w", err)}
		}
	}
	tb := newToolbox(e, t, log)
	tb.signalled = signalled
	defer tb.close()
	maxTurns := cmp.Or(spec.MaxTurns, workflow.DefaultMaxTurns)
	maxCalls := cmp.Or(spec.MaxToolCalls, workflow.DefaultMaxToolCalls)

	data := workflow.TemplateData{Params: t.Params, Upstream: t.Upstream, Item: t.Item, Assets: t.Assets}
	base, err := request(ctx, spec, "prompt", spec.Prompt, data)
	if err != nil {
		return Result{Err: err}
	}
	if spec.OutputFormat == workflow.OutputJSON {
		base.System = strings.TrimSpace(base.System + "\n\n" + jsonInstruction(spec))
	}
	repaired := false
	var own, total llm.Usage
	result := func(err error) Result { return Result{Err: err, Usage: &own, TaskUsage: &total} }
	var history []llm.Message
	ncalls := 0
	for turn := 1; ; turn++ {
		if turn > maxTurns {
			return result(fmt.Errorf("the agent used its %d turns (max-turns) without a final answer", maxTurns))
		}
		label := fmt.Sprintf("turn %d", turn)
		req := base
		req.History = history
		var resp llm.Response
		if done, ok := doneTurns[turn]; ok {
			resp = done.Response
			total = total.Add(resp.Usage)
			fmt.Fprintf(log, "%s: answered in attempt %d, replayed from its checkpoint (%d tokens)\n", label, done.Attempt, resp.Usage.TotalTokens)
			e.events().AgentTurn(spec.Provider, true, 0)
		} else {
			if spec.MaxTotalTokens > 0 && total.TotalTokens >= spec.MaxTotalTokens {
				return result(fmt.Errorf("the agent used %d tokens, reaching max-total-tokens %d, without a final answer",
					total.TotalTokens, spec.MaxTotalTokens))
			}
			if spec.MaxCost != nil {
				cost, known := client.Cost(total)
				switch {
				case !known:
					return result(fmt.Errorf("max-cost needs the prices of provider %s: set its input-price and output-price "+
						"in the workers' llm.providers", spec.Provider))
				case cost >= *spec.MaxCost:
					return result(fmt.Errorf("the agent's turns cost %.4f, reaching max-cost %g, without a final answer", cost, *spec.MaxCost))
				}
			}
			if req.Tools, err = tb.specs(ctx); err != nil {
				return result(err)
			}
			resp, err = call(ctx, client, req, label, log)
			own, total = own.Add(resp.Usage), total.Add(resp.Usage)
			e.events().AgentTurn(spec.Provider, false, resp.Usage.TotalTokens)
			if err != nil {
				return result(fmt.Errorf("%s: %w", label, err))
			}
			for i := range resp.ToolCalls {
				resp.ToolCalls[i].Arguments = storable(resp.ToolCalls[i].Arguments)
			}
			faultinject.Point("agent-before-turn-saved")
			if err := store.SaveTurn(ctx, Turn{Turn: turn, Digest: digest(req), Response: resp}); err != nil {
				return result(fmt.Errorf("checkpoint %s: %w", label, err))
			}
			faultinject.Point("agent-after-turn-saved")
		}
		if len(resp.ToolCalls) == 0 {
			if spec.MaxTotalTokens > 0 && total.TotalTokens > spec.MaxTotalTokens {
				return result(fmt.Errorf("the agent used %d tokens, over max-total-tokens %d", total.TotalTokens, spec.MaxTotalTokens))
			}
			if cost, _ := client.Cost(total); spec.MaxCost != nil && cost > *spec.MaxCost {
				return result(fmt.Errorf("the agent's turns cost %.4f, over max-cost %g", cost, *spec.MaxCost))
			}
			answer, err := spec.CheckOutput(resp.Text)
			switch {
			case err != nil && repaired:
				return result(fmt.Errorf("%s: the final answer is still not what output-format asks after a repair turn: %w", label, err))
			case err != nil:
				// One more turn, which a replay makes again from the same stored answer.
				fmt.Fprintf(log, "%s: %v; asking the model once to answer again\n", label, err)
				repaired = true
				history = append(history, llm.Message{Assistant: true, Text: resp.Text},
					llm.Message{User: true, Text: fmt.Sprintf("Your answer cannot be used: %v. %s", err, jsonInstruction(spec))})
				continue
			}
			r := result(nil)
			r.Output = answer
			return r
		}
		history = append(history, llm.Message{Assistant: true, Text: resp.Text, ToolCalls: resp.ToolCalls})
		for seq0, asked := range resp.ToolCalls {
			seq := seq0 + 1
			ncalls++
			if ncalls > maxCalls {
				return result(fmt.Errorf("the agent asked for more than %d tool calls (max-tool-calls)", maxCalls))
			}
			c := ToolCall{Turn: turn, Seq: seq, ID: CallID(t.ID, turn, seq), ModelID: asked.ID, Tool: asked.Name, Arguments: asked.Arguments}
			clabel := fmt.Sprintf("%s call %d %s (%s)", label, seq, asked.Name, c.ID)
			prev, seen := doneCalls[[2]int{turn, seq}]
			tool, known := tb.resolve(asked.Name)
			run, resume := true, false
			switch {
			case seen && prev.State == CallEnded:
				c.Result, c.IsError = prev.Result, prev.IsError
				fmt.Fprintf(log, "%s: ended in attempt %d, its result replayed\n", clabel, prev.Attempt)
				e.events().AgentToolCall(ToolReplayed)
				run = false
			case seen && known && tool.Type == workflow.ToolWorkflow && prev.State == CallStarted:
				// The call started its child, or may have: it goes on with the child it
				// finds, and starts none if there is one.
				fmt.Fprintf(log, "%s: started in attempt %d; it goes on with its child workflow\n", clabel, prev.Attempt)
				resume = true
			case seen && known:
				step := InterruptedStep(turn, seq)
				if cp, ok := signalled[step]; ok {
					// A person said the call took effect, and what it returned.
					c.Result = cp.Output
					if err := store.EndCall(ctx, c); err != nil {
						return result(fmt.Errorf("%s: record its result: %w", clabel, err))
					}
					fmt.Fprintf(log, "%s: interrupted in attempt %d; a person said it took effect, their text is its result\n", clabel, prev.Attempt)
					run = false
					break
				}
				switch policy := tool.Interrupted(); policy {
				case workflow.OnInterruptedRetry:
					fmt.Fprintf(log, "%s: started in attempt %d and never ended; the tool is idempotent, so it runs again with the same call id\n", clabel, prev.Attempt)
				case workflow.OnInterruptedFail:
					return result(fmt.Errorf("%s: started in attempt %d and never ended; on-interrupted: fail", clabel, prev.Attempt))
				default:
					if err := store.InterruptCall(ctx, c); err != nil {
						return result(fmt.Errorf("%s: mark it interrupted: %w", clabel, err))
					}
					fmt.Fprintf(log, "%s: started in attempt %d and never ended; it may or may not have taken effect, "+
						"so the task waits for a person to tell: zksched signal %d --output RESULT if it took effect (RESULT "+
						"is what the model is told it returned), --fail --output REASON to fail the task\n", clabel, prev.Attempt, t.ID)
					e.events().AgentToolCall(ToolInterrupted)
					r := result(nil)
					r.Paused = &Pause{Step: step}
					return r
				}
			}
			gate := false
			if run && !resume && known && (tool.Approve || tool.ApproveWhen != "") {
				var args map[string]any
				_ = json.Unmarshal([]byte(c.Arguments), &args)
				if gate, err = tool.NeedsApproval(ctx, data, args); err != nil {
					return result(fmt.Errorf("%s: %w", clabel, err))
				}
			}
			if gate {
				approval, approved := signalled[ApprovalStep(turn, seq)]
				rejection, rejected := signalled[RejectionStep(turn, seq)]
				switch {
				case rejected:
					c.Result, c.IsError = "a reviewer rejected this call, so it did not run: "+rejection.Output, true
					if err := e.recordUnrun(ctx, &c, store, clabel, "rejected by a reviewer", log); err != nil {
						return result(err)
					}
					e.events().AgentToolCall(ToolRejected)
					run = false
				case approved:
					fmt.Fprintf(log, "%s: approved (%q)\n", clabel, clipText(approval.Output, 200))
				default:
					fmt.Fprintf(log, "%s: waits for a person's approval of arguments %s: zksched signal %d --output TEXT "+
						"approves it, --fail --output REASON rejects it (the model is told why)\n", clabel, clipText(c.Arguments, 500), t.ID)
					r := result(nil)
					r.Paused = &Pause{Step: ApprovalStep(turn, seq)}
					return r
				}
			}
			if run {
				pause, err := e.runTool(ctx, tb, tool, known, resume, &c, store, clabel, log)
				if err != nil {
					return result(err)
				}
				if pause != nil {
					r := result(nil)
					r.Paused = pause
					return r
				}
			}
			if run {
				faultinject.Point("agent-after-tool-ended")
			}
			history = append(history, llm.Message{Text: c.Result, ToolCallID: c.ModelID, ToolName: c.Tool})
		}
	}
}

// jsonInstruction tells the model the form of the final answer of an agent whose
// output-format is json.
func jsonInstruction(spec workflow.Task) string {
	if len(spec.OutputSchema) == 0 {
		return "Give your final answer as one JSON value, and nothing else."
	}
	schema, _ := json.Marshal(spec.OutputSchema)
	return "Give your final answer as one JSON value matching this JSON Schema, and nothing else: " + string(schema)
}

// runTool runs call c of tool (unknown: a name the model made up) and records it: started
// before it runs (unless resume: a workflow tool's call that started before goes on), ended
// with its result after. A call the tool refuses before running (an unknown tool, arguments
// that do not match its schema) is recorded ended with the error as its result, which the
// model sees and may correct. A workflow tool's call whose child runs on returns the pause
// the task waits at for it, the call left started. An error returned ends the attempt.
func (e Agent) runTool(ctx context.Context, tb *toolbox, tool workflow.Tool, known, resume bool, c *ToolCall, store LoopStore, label string, log io.Writer) (*Pause, error) {
	t := tb.t
	var refusal string
	var args map[string]any
	switch {
	case !known:
		refusal = fmt.Sprintf("no tool is called %q; the tools are: %s", c.Tool, toolNames(t.Spec.Tools))
	default:
		if err := checkArguments(tool, c.Arguments, &args); err != nil {
			refusal = fmt.Sprintf("the arguments do not match the tool's schema, so it did not run: %v", err)
		}
	}
	if known && refusal == "" && tool.Type == workflow.ToolHTTP {
		// The model can do nothing about the worker's config: the task fails, the call
		// never started.
		if err := e.checkHTTPTool(tool); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
	}
	if !resume {
		if err := store.StartCall(ctx, *c); err != nil {
			return nil, fmt.Errorf("%s: record its start: %w", label, err)
		}
	}
	if refusal != "" {
		c.Result, c.IsError = refusal, true
		fmt.Fprintf(log, "%s: refused: %s\n", label, refusal)
	} else {
		fmt.Fprintf(log, "%s: running with arguments %s\n", label, clipText(c.Arguments, 500))
		start := time.Now()
		span := tracing.StartTool(ctx, tool.Name, c.ID, c.Turn)
		var res Result
		var out string
		switch tool.Type {
		case workflow.ToolHTTP:
			res, out = e.runHTTPTool(ctx, t, tool, *c, args, log)
		case workflow.ToolWorkflow:
			res, out = e.runWorkflowTool(ctx, tb, tool, *c, args, log)
			if res.Err != nil && !res.Stopped && errors.Is(res.Err, errChildStore) {
				// Whether the child started is unknown: the call stays started, and a later
				// attempt finds the child if it did.
				span.End(true, res.Err.Error())
				return nil, fmt.Errorf("%s: %w", label, res.Err)
			}
			if res.Paused != nil {
				span.End(false, "waits for its child workflow")
				return res.Paused, nil
			}
		case workflow.ToolMCP:
			res, out = e.runMCPTool(ctx, tb, tool, *c, args, log)
			if errors.Is(res.Err, errMCPServer) {
				// The server is gone: the call's fate is unknown, so it stays started.
				span.End(true, res.Err.Error())
				return nil, fmt.Errorf("%s: %w", label, res.Err)
			}
		default:
			res, out = e.runShellTool(ctx, t, tool, *c, args, log)
		}
		defer func() { span.End(c.IsError, clipText(c.Result, 500)) }()
		if res.Stopped || ctx.Err() != nil {
			// The attempt is being stopped: the call stays started, for the next attempt's
			// on-interrupted policy.
			return nil, fmt.Errorf("%s: stopped before it ended", label)
		}
		c.Result = out
		if res.Err != nil {
			c.IsError = true
			c.Result = fmt.Sprintf("the tool failed: %v\n%s", res.Err, out)
		}
		fmt.Fprintf(log, "%s: ended in %v%s\n", label, time.Since(start).Round(time.Millisecond), map[bool]string{true: ", failed", false: ""}[c.IsError])
	}
	c.Result = storable(c.Result)
	if err := store.EndCall(ctx, *c); err != nil {
		return nil, fmt.Errorf("%s: record its result: %w", label, err)
	}
	switch {
	case refusal != "":
		e.events().AgentToolCall(ToolRefused)
	case c.IsError:
		e.events().AgentToolCall(ToolFailed)
	default:
		e.events().AgentToolCall(ToolSucceeded)
	}
	return nil, nil
}

// recordUnrun records call c, which does not run, as started and ended at once with the result
// c holds (why names why in the log).
func (e Agent) recordUnrun(ctx context.Context, c *ToolCall, store LoopStore, label, why string, log io.Writer) error {
	if err := store.StartCall(ctx, *c); err != nil {
		return fmt.Errorf("%s: record its start: %w", label, err)
	}
	c.Result = storable(c.Result)
	if err := store.EndCall(ctx, *c); err != nil {
		return fmt.Errorf("%s: record its result: %w", label, err)
	}
	fmt.Fprintf(log, "%s: %s; the model is told\n", label, why)
	return nil
}

// errChildStore is a workflow tool's call whose child could not be started or watched for
// want of the database: the attempt ends, the call started.
var errChildStore = errors.New("the child workflow could not be started or watched")

// runWorkflowTool starts the child of call c, the arguments as its params (a string as it is,
// anything else as JSON), or finds the one it started. A child that has ended is the call's
// result: its final output, or the tool failing if it did not succeed. One that runs on makes
// the task wait for it, holding no slot (Paused), until its end or the tool's timeout resumes
// the task; resumed by the timeout (a checkpoint of its step), the call fails and the child
// goes on.
func (e Agent) runWorkflowTool(ctx context.Context, tb *toolbox, tool workflow.Tool, c ToolCall, args map[string]any, log io.Writer) (Result, string) {
	t := tb.t
	if t.Children == nil {
		return Result{Err: fmt.Errorf("%w: the worker runs no child workflows", errChildStore)}, ""
	}
	params := make(map[string]string, len(args))
	for k, v := range args {
		params[k] = argText(v)
	}
	child, err := t.Children.Start(ctx, c, tool.Workflow, tool.Version, params)
	var refused *ChildRefused
	switch {
	case errors.As(err, &refused):
		return Result{Err: errors.New(refused.Msg)}, ""
	case err != nil && ctx.Err() != nil:
		return Result{Stopped: true}, ""
	case err != nil:
		return Result{Err: fmt.Errorf("%w: %v", errChildStore, err)}, ""
	}
	faultinject.Point("agent-after-child-started")
	end, err := t.Children.End(ctx, child)
	switch {
	case err != nil && ctx.Err() != nil:
		return Result{Stopped: true}, ""
	case err != nil:
		return Result{Err: fmt.Errorf("%w: %v", errChildStore, err)}, ""
	case !end.Ended:
		if _, timedOut := tb.signalled[ChildStep(c.ID)]; timedOut {
			return Result{Err: fmt.Errorf("child workflow instance %d had not ended after %v; it goes on", child, toolTimeout(tool))}, ""
		}
		fmt.Fprintf(log, "child workflow instance %d of %s runs; the task waits for it to end, holding no slot\n", child, tool.Workflow)
		return Result{Paused: &Pause{Step: ChildStep(c.ID), Timeout: toolTimeout(tool)}}, ""
	case !end.Succeeded:
		return Result{Err: fmt.Errorf("child workflow instance %d did not succeed: %s", child, end.Error)}, ""
	}
	fmt.Fprintf(log, "child workflow instance %d of %s succeeded\n", child, tool.Workflow)
	return Result{}, end.Output
}

// runShellTool runs a shell tool's command as a shell task of the agent's runs, the call's
// arguments in its environment, and returns its result and its standard output, cut at
// toolResultLimit.
func (e Agent) runShellTool(ctx context.Context, t Task, tool workflow.Tool, c ToolCall, args map[string]any, log io.Writer) (Result, string) {
	timeout := toolTimeout(tool)
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sub := t
	sub.Spec = workflow.Task{Name: t.Spec.Name, Type: "shell", Command: tool.Command, Workdir: t.Spec.Workdir,
		Env: make(map[string]string, len(t.Spec.Env)+len(args)+3)}
	for k, v := range t.Spec.Env {
		sub.Spec.Env[k] = v
	}
	for k, v := range args {
		sub.Spec.Env["ZKSCHED_ARG_"+workflow.EnvSafe(k)] = argText(v)
	}
	sub.Spec.Env["ZKSCHED_ARGS"] = c.Arguments
	sub.Spec.Env["ZKSCHED_TOOL_CALL_ID"] = c.ID
	sub.Spec.Env["ZKSCHED_TOOL_NAME"] = tool.Name
	sub.OutputLimit = toolResultLimit
	tap := &cappedBuffer{limit: toolResultLimit}
	sub.stdoutTap = tap
	res := e.Shell.Run(tctx, sub, log)
	if errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		res.Stopped = false
		res.Err = fmt.Errorf("timed out after %v", timeout)
	}
	return res, tap.text()
}

// checkArguments parses a call's arguments, which must be a JSON object matching the tool's
// schema, into args.
func checkArguments(tool workflow.Tool, raw string, args *map[string]any) error {
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	if err := json.Unmarshal([]byte(raw), args); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if *args == nil {
		return errors.New("not a JSON object: null")
	}
	if tool.Type == workflow.ToolMCP {
		// Its server checks them against its own schema.
		return nil
	}
	return tool.CheckArgs(json.RawMessage(raw))
}

// argText is an argument's value as a variable holds it: a string as it is, anything else as
// JSON.
func argText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

func toolNames(tools []workflow.Tool) string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// digest is the SHA-256 of what a request sends, hex.
func digest(req llm.Request) string {
	raw, _ := json.Marshal(req)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// cappedBuffer keeps the first limit bytes written to it and counts the rest.
type cappedBuffer struct {
	limit int
	buf   []byte
	total int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.total += len(p)
	if room := b.limit - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *cappedBuffer) text() string {
	s := strings.TrimRight(string(b.buf), "\n")
	if b.total > len(b.buf) {
		s += fmt.Sprintf("\n[cut: the tool wrote %d bytes; the first %d are shown]", b.total, len(b.buf))
	}
	return s
}
