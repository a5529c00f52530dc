package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
)

// runSignal ends a waiting task instance: succeeded with --output, or failed with --fail. A
// paused agent is resumed instead of succeeding: --output is its wait step's output.
func runSignal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("signal", stdout)
	config := configFlag(fs)
	output := fs.String("output", "", "the task's output, which its downstream tasks read (for a paused agent, its wait step's); with --fail, the reason")
	fail := fs.Bool("fail", false, "fail the task instead of ending it succeeded")
	idArg, args, err := parseNamed(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %v", args)}
	}
	id, err := strconv.ParseInt(idArg, 10, 64)
	if err != nil || id <= 0 {
		return usageError{fmt.Errorf("want the id of a waiting task instance, got %q", idArg)}
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, cfg, newLogger(cfg.Log, stderr))
	if err != nil {
		return err
	}
	defer db.Close()
	ev := cliAudit(dao.AuditTaskSignal, "", map[string]any{"fail": *fail, "output_bytes": len(*output)})
	res, err := lifecycle.Signal(ctx, db, id, *output, *fail, ev)
	var conflict *dao.ConflictError
	switch {
	case errors.As(err, &conflict):
		return exitError{code: exitFailed, msg: fmt.Sprintf("not signalled: task instance %d is %s, not waiting", id, conflict.State)}
	case errors.Is(err, dao.ErrInstanceNotFound):
		return exitError{code: exitFailed, msg: fmt.Sprintf("not signalled: no task instance %d", id)}
	case errors.Is(err, lifecycle.ErrSignalTooLarge):
		return usageError{err}
	case err != nil:
		return err
	}
	if res.State == dao.TaskQueued {
		fmt.Fprintf(stdout, "task instance %d resumed at the step after %s; workflow instance %d goes on\n",
			id, *res.PausedStep, res.WorkflowInstanceID)
		return nil
	}
	fmt.Fprintf(stdout, "task instance %d %s; workflow instance %d goes on\n", id, res.State, res.WorkflowInstanceID)
	return nil
}
