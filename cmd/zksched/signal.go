package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/zksched/zksched/dao"
)

// runSignal ends a waiting task instance: succeeded with --output, or failed with --fail. A
// paused agent is resumed instead of succeeding: --output is its wait step's output.
func runSignal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("signal", stdout)
	f := addInstanceFlags(fs)
	output := fs.String("output", "", "the task's output, which its downstream tasks read (for a paused agent, its wait step's); with --fail, the reason")
	fail := fs.Bool("fail", false, "fail the task instead of ending it succeeded")
	id, inst, done, err := f.parse(ctx, fs, args, "waiting task instance", stderr)
	if err != nil {
		return err
	}
	defer done()
	res, err := inst.Signal(ctx, id, *output, *fail)
	var conflict *dao.ConflictError
	if errors.As(err, &conflict) {
		return exitError{code: exitFailed, msg: fmt.Sprintf("not signalled: task instance %d is %s, not waiting", id, conflict.State)}
	}
	if err != nil {
		return instanceError("not signalled", err)
	}
	switch {
	case *f.asJSON:
		return writeJSON(stdout, res)
	case res.State == dao.TaskQueued && res.PausedStep != nil && strings.HasPrefix(*res.PausedStep, "tool-approval:"):
		verdict := "approved: it runs"
		if *fail {
			verdict = "rejected: the model is told, with your text"
		}
		fmt.Fprintf(stdout, "task instance %d resumed: its %s is %s; workflow instance %d goes on\n",
			id, "tool call "+strings.TrimPrefix(*res.PausedStep, "tool-approval:"), verdict, res.WorkflowInstance)
	case res.State == dao.TaskQueued && res.PausedStep != nil && strings.HasPrefix(*res.PausedStep, "tool-call:"):
		fmt.Fprintf(stdout, "task instance %d resumed: its interrupted %s is recorded as done, your text its result; workflow instance %d goes on\n",
			id, strings.Replace(*res.PausedStep, ":", " ", 1), res.WorkflowInstance)
	case res.State == dao.TaskQueued && res.PausedStep != nil:
		fmt.Fprintf(stdout, "task instance %d resumed at the step after %s; workflow instance %d goes on\n",
			id, *res.PausedStep, res.WorkflowInstance)
	default:
		fmt.Fprintf(stdout, "task instance %d %s; workflow instance %d goes on\n", id, res.State, res.WorkflowInstance)
	}
	return nil
}
